// kernel_pytorch._C: the top of csrc/. Each layer adds its own Python calls
// (docs/architecture.md); this file only assembles the module.
#include <torch/extension.h>

#include "aten/aten.h"
#include "core/core.h"
#include "distributed/distributed.h"
#include "ops/ops.h"
#include "profiler/profiler.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "kernel_pytorch C++ extension: the my_asic PrivateUse1 device";
  kernel_pytorch::init_core_bindings(m);
  kernel_pytorch::init_aten_bindings(m);
  kernel_pytorch::init_profiler_bindings(m);
  kernel_pytorch::ops::init_ops_bindings(m);
  kernel_pytorch::distributed::init_distributed_bindings(m);
}

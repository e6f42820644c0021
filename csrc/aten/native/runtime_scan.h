// Stream compaction through the runtime's scan, pointwise and scatter entries
// (runtime_scan.cpp), for boolean-mask indexing (runtime_indexing.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace kernel_pytorch::native {

// nonzero(self) on the device: [count, self.dim()] int64, row-major order;
// nullopt when an entry is missing or cannot take self (the caller falls back).
std::optional<at::Tensor> runtime_nonzero(const at::Tensor& self);

}  // namespace kernel_pytorch::native

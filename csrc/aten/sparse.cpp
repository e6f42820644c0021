// Sparse COO and compressed (CSR, CSC, BSR, BSC) tensors on my_asic.
//
// A sparse my_asic tensor is ATen's own SparseTensorImpl or
// SparseCsrTensorImpl whose component tensors (indices, values; compressed
// and plain indices) are ordinary dense my_asic tensors. Two kinds of kernels
// serve the SparsePrivateUse1 and SparseCsrPrivateUse1 dispatch keys:
//
// - Layout kernels: construction, component access, nnz and dims, resize,
//   copy, clone, zero. ATen writes these once for every device in terms of
//   the components (SparseCPU, SparseCUDA and SparseMeta share them), so
//   my_asic registers the same functions. They run no arithmetic; what they
//   do to the components (copies, fills) runs on the device's dense kernels.
// - Everything else (coalesce, add, sum, mm, addmm, to_dense, ...) runs
//   ATen's CPU sparse kernel on a CPU copy of the arguments and copies the
//   results back: a counted fallback (fallback_stats, MY_ASIC_FALLBACK), as
//   for dense ops without a native kernel. A runtime with its own sparse
//   kernels registers them for these keys and the fallback steps aside.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>

#include <vector>

#include "sparse.h"

#include "aten/aten.h"
#include "core/core.h"

namespace kernel_pytorch {
namespace {

bool on_device(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Arguments on my_asic, with the CPU copies the CPU kernel runs on.
struct MovedArguments {
  c10::DeviceIndex device = -1;
  std::vector<std::pair<at::Tensor, at::Tensor>> moved; // (my_asic original, CPU copy)

  at::Tensor to_cpu(const at::Tensor& t, const c10::FunctionSchema& schema) {
    if (!on_device(t)) {
      return t;
    }
    if (device == -1) {
      device = t.device().index();
    }
    TORCH_CHECK(
        device == t.device().index(),
        "Expected all tensors to be on the same device, but found at least two devices, my_asic:",
        static_cast<int>(device), " and my_asic:", static_cast<int>(t.device().index()),
        "! (when checking arguments of ", schema.name(), "). Move them to one device with .to('my_asic:N') first.");
    at::Tensor copy = t.cpu();
    if (t.requires_grad()) {
      // Some CPU kernels save extra state for backward only when an input
      // requires grad (sparse.mm's amax/amin keep the argmax): the copy must
      // say what the argument says.
      copy.requires_grad_(true);
    }
    moved.emplace_back(t, copy);
    return copy;
  }

  // The my_asic tensor whose CPU copy is `r`, if any (in-place and out=
  // ops return their argument).
  at::Tensor original_of(const at::Tensor& r) const {
    for (const auto& [original, copy] : moved) {
      if (copy.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) {
        return original;
      }
    }
    return {};
  }
};

// What the CPU kernel wrote into a mutated argument goes back into the
// my_asic tensor, resizing it as the kernel resized the copy.
void write_back(const at::Tensor& original, const at::Tensor& copy) {
  if (original.layout() == c10::kStrided) {
    if (original.sizes() != copy.sizes()) {
      original.resize_(copy.sizes());
    }
    original.copy_(copy);
  } else {
    original.copy_(copy); // the sparse copy_ resizes and replaces the components
  }
}

void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_fallback_call(op);
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t begin = stack->size() - num_args;

  MovedArguments args;
  map_tensors(stack, begin, num_args, [&](const at::Tensor& t) { return args.to_cpu(t, schema); });
  const c10::Device device(c10::DeviceType::PrivateUse1, args.device == -1 ? current_device() : args.device);
  rewrite_generators_and_devices(schema, stack, begin, device.index());

  {
    // Autograd already ran above this kernel: the CPU call must not record
    // a second graph.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(stack);
  }

  for (size_t i = 0; i < num_args; ++i) {
    const auto* alias_info = schema.arguments()[i].alias_info();
    if (alias_info != nullptr && alias_info->isWrite()) {
      for (const auto& [original, copy] : args.moved) {
        write_back(original, copy);
      }
      break;
    }
  }

  const size_t num_returns = schema.returns().size();
  const size_t rbegin = stack->size() - num_returns;
  auto to_device = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined()) {
      return r;
    }
    at::Tensor original = args.original_of(r);
    return original.defined() ? original : r.to(device);
  };
  map_tensors(stack, rbegin, num_returns, to_device);
}

} // namespace

int64_t route_structured_sparse_ops_to_fallback() {
  static int64_t routed = [] {
    // Composite kernels that the CPU overrides with a sparse one (sum,
    // structured add/mul/mm, ...) assume strided tensors: the CPU's sparse
    // kernel runs instead.
    const auto composites = {
        c10::DispatchKey::CompositeExplicitAutogradNonFunctional, c10::DispatchKey::CompositeExplicitAutograd};
    auto kernel = [] { return torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>(); };
    return route_composite_ops(c10::DispatchKey::SparsePrivateUse1, c10::DispatchKey::SparseCPU, composites, kernel) +
        route_composite_ops(c10::DispatchKey::SparseCsrPrivateUse1, c10::DispatchKey::SparseCsrCPU, composites, kernel);
  }();
  return routed;
}

// COO layout kernels: the device-generic functions SparseCPU and SparseCUDA
// register.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_coo));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
}

// Compressed layout kernels (CSR, CSC, BSR, BSC share one impl).
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed_symint));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_compressed_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse_compressed));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_csr_));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

} // namespace kernel_pytorch

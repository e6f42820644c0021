// mm, bmm, addmm, baddbmm (and so linear, matmul and their backward) through
// the runtime's GEMM (kpdrKernelTable::gemm) when device memory is not host
// addressable. Calls the entry cannot take (other dtypes, layouts without a
// unit stride, overlapping outputs, a NOT_SUPPORTED answer) run through the
// counted CPU fallback exactly as before, which also raises ATen's own errors
// for bad shapes. A host-addressable runtime keeps ATen's BLAS in place
// (matmul.cpp): faster there than any loop a runtime would bring.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <optional>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;
using S = const at::Scalar&;

std::optional<kpdrDtype> gemm_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return KPDR_DTYPE_FLOAT32;
    case at::kHalf: return KPDR_DTYPE_FLOAT16;
    case at::kBFloat16: return KPDR_DTYPE_BFLOAT16;
    default: return std::nullopt;
  }
}

bool plain_device_tensor(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.layout() == at::kStrided && t.device() == like.device() &&
      t.scalar_type() == like.scalar_type() && !t.is_neg() && !t.is_conj();
}

struct Shape {
  int64_t batch, m, n, k;
};

// The GEMM a (mm: 2-d, bmm: 3-d) call describes, if the runtime may take it.
std::optional<Shape> gemm_shape(T a, T b, bool batched) {
  const int64_t dims = batched ? 3 : 2;
  if (!a.defined() || a.device().type() != c10::DeviceType::PrivateUse1 || !gemm_dtype(a.scalar_type()) ||
      !plain_device_tensor(b, a) || !plain_device_tensor(a, a) || a.dim() != dims || b.dim() != dims) {
    return std::nullopt;
  }
  if (a.size(-1) != b.size(-2) || (batched && a.size(0) != b.size(0))) return std::nullopt;
  return Shape{batched ? a.size(0) : 1, a.size(-2), b.size(-1), a.size(-1)};
}

// Whether writing c may change t. Views of other storages never do (ATen's
// get_overlap_status answers TooHard for any non-dense view, even then).
bool may_overlap(const at::Tensor& c, const at::Tensor& t) {
  return c.storage().is_alias_of(t.storage()) && at::get_overlap_status(c, t) != at::MemOverlapStatus::No;
}

bool scalar_ok(const at::Scalar& s) {
  return !s.isComplex();
}

// (trans, ld) of a matrix view with one unit stride and rows that do not
// overlap, else false (the caller copies it). A broadcast view (stride 0
// over rows, as the backward of sum() hands out) is not a BLAS layout.
bool matrix_layout(const at::Tensor& t, int32_t* trans, int64_t* ld) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if ((t.stride(-1) == 1 || cols == 1) && (rows == 1 || t.stride(-2) >= cols)) {
    *trans = 0;
    *ld = rows == 1 ? cols : t.stride(-2);
    return true;
  }
  if ((t.stride(-2) == 1 || rows == 1) && (cols == 1 || t.stride(-1) >= rows)) {
    *trans = 1;
    *ld = cols == 1 ? rows : t.stride(-1);
    return true;
  }
  return false;
}

// C = alpha * A @ B + beta * C through the runtime. False (nothing enqueued,
// C untouched) when the runtime cannot take it.
bool runtime_gemm(const at::Tensor& c, at::Tensor a, at::Tensor b, const Shape& s, double alpha, double beta) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.gemm == nullptr) return false;
  if (!plain_device_tensor(c, a) || c.dim() != a.dim() || c.size(-2) != s.m || c.size(-1) != s.n ||
      (c.dim() == 3 && c.size(0) != s.batch)) {
    return false;
  }
  if ((c.stride(-1) != 1 && s.n > 1) || at::has_internal_overlap(c) != at::MemOverlap::No ||
      may_overlap(c, a) || may_overlap(c, b)) {
    return false;
  }
  c10::DeviceGuard guard(a.device());
  if (s.batch == 0 || s.m == 0 || s.n == 0) return true;
  kpdrGemmArgs args{};
  args.dtype = *gemm_dtype(a.scalar_type());
  args.batch = s.batch;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  if (s.k > 0) {
    if (!matrix_layout(a, &args.trans_a, &args.a_ld)) {
      a = a.contiguous();
      matrix_layout(a, &args.trans_a, &args.a_ld);
    }
    if (!matrix_layout(b, &args.trans_b, &args.b_ld)) {
      b = b.contiguous();
      matrix_layout(b, &args.trans_b, &args.b_ld);
    }
    args.a = a.const_data_ptr();
    args.b = b.const_data_ptr();
    args.a_batch_stride = a.dim() == 3 && s.batch > 1 ? a.stride(0) : 0;
    args.b_batch_stride = b.dim() == 3 && s.batch > 1 ? b.stride(0) : 0;
  }
  args.c = c.data_ptr();
  args.c_ld = std::max<int64_t>(c.stride(-2), s.n);
  args.c_batch_stride = c.dim() == 3 && s.batch > 1 ? c.stride(0) : 0;
  args.alpha = static_cast<float>(alpha);
  args.beta = static_cast<float>(beta);
  return launch_kernel(kernels.gemm, args, current_stream(a.device().index()));
}

std::vector<int64_t> result_sizes(const Shape& s, bool batched) {
  return batched ? std::vector<int64_t>{s.batch, s.m, s.n} : std::vector<int64_t>{s.m, s.n};
}

at::Tensor new_result(T a, const Shape& s, bool batched) {
  return at::empty(result_sizes(s, batched), a.options());
}

template <bool batched>
struct Product {  // mm / bmm
  static at::Tensor functional(T a, T b) {
    if (auto s = gemm_shape(a, b, batched)) {
      at::Tensor c = new_result(a, *s, batched);
      if (runtime_gemm(c, a, b, *s, 1.0, 0.0)) return c;
    }
    return run_on_fallback<at::Tensor, T, T>(kernel_key(&functional), a, b);
  }
  static at::Tensor& out(T a, T b, at::Tensor& result) {
    if (auto s = gemm_shape(a, b, batched); s && plain_device_tensor(result, a)) {
      at::native::resize_output(result, result_sizes(*s, batched));
      if (runtime_gemm(result, a, b, *s, 1.0, 0.0)) return result;
    }
    return run_on_fallback<at::Tensor&, T, T, at::Tensor&>(kernel_key(&out), a, b, result);
  }
};

template <bool batched>
struct AddProduct {  // addmm / baddbmm: beta * self + alpha * (a @ b)
  static bool into(const at::Tensor& result, T self, T a, T b, S beta, S alpha, const Shape& s) {
    if (!scalar_ok(beta) || !scalar_ok(alpha) || !plain_device_tensor(self, a)) return false;
    const double bv = beta.toDouble();
    if (bv != 0.0 && !result.is_same(self)) {
      if (!at::is_expandable_to(self.sizes(), result.sizes())) return false;
      result.copy_(self.expand(result.sizes()));
    }
    return runtime_gemm(result, a, b, s, alpha.toDouble(), bv);
  }
  static at::Tensor functional(T self, T a, T b, S beta, S alpha) {
    if (auto s = gemm_shape(a, b, batched)) {
      at::Tensor c = new_result(a, *s, batched);
      if (into(c, self, a, b, beta, alpha, *s)) return c;
    }
    return run_on_fallback<at::Tensor, T, T, T, S, S>(
        kernel_key(&functional), self, a, b, beta, alpha);
  }
  static at::Tensor& out(T self, T a, T b, S beta, S alpha, at::Tensor& result) {
    if (auto s = gemm_shape(a, b, batched); s && plain_device_tensor(result, a) &&
        (result.is_same(self) || !may_overlap(result, self))) {
      const auto sizes = result_sizes(*s, batched);
      if (result.is_same(self) ? result.sizes() == at::IntArrayRef(sizes) : true) {
        if (!result.is_same(self)) at::native::resize_output(result, sizes);
        if (into(result, self, a, b, beta, alpha, *s)) return result;
      }
    }
    return run_on_fallback<at::Tensor&, T, T, T, S, S, at::Tensor&>(
        kernel_key(&out), self, a, b, beta, alpha, result);
  }
  static at::Tensor& inplace(at::Tensor& self, T a, T b, S beta, S alpha) {
    if (auto s = gemm_shape(a, b, batched); s && self.sizes() == at::IntArrayRef(result_sizes(*s, batched))) {
      if (into(self, self, a, b, beta, alpha, *s)) return self;
    }
    return run_on_fallback<at::Tensor&, at::Tensor&, T, T, S, S>(
        kernel_key(&inplace), self, a, b, beta, alpha);
  }
};

}  // namespace

void register_runtime_gemm(Registrar& r) {
  if (runtime_kernels().gemm == nullptr) return;
  r.impl("mm", TORCH_FN(Product<false>::functional));
  r.impl("mm.out", TORCH_FN(Product<false>::out));
  r.impl("bmm", TORCH_FN(Product<true>::functional));
  r.impl("bmm.out", TORCH_FN(Product<true>::out));
  r.impl("addmm", TORCH_FN(AddProduct<false>::functional));
  r.impl("addmm.out", TORCH_FN(AddProduct<false>::out));
  r.impl("addmm_", TORCH_FN(AddProduct<false>::inplace));
  r.impl("baddbmm", TORCH_FN(AddProduct<true>::functional));
  r.impl("baddbmm.out", TORCH_FN(AddProduct<true>::out));
  r.impl("baddbmm_", TORCH_FN(AddProduct<true>::inplace));
}

}  // namespace kernel_pytorch::native

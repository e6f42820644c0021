// Scans and stream compaction through the runtime's scan entry (kpdr.h) when
// device memory is not host addressable.
//
// cumsum, cumprod (their in-place forms) and _logcumsumexp are one scan call
// into a contiguous result. flip is one pointwise copy from the input read
// through negated strides, so cumsum's backward (flip, cumsum, flip) stays on
// the device. nonzero is compaction: m = (x != 0), the exclusive SUM of m in
// int64 gives each selected element its row, one device->host read of the
// count sizes the result (CUDA synchronises there too), and one scatter per
// dimension writes that coordinate of the selected elements, unselected ones
// skipped through the scatter entry's skip value. masked_select is the same
// with one scatter of the values, and masked_scatter_ (masked_select's
// backward) a gather at the ranks. Boolean-mask indexing (runtime_indexing.cpp)
// turns masks into nonzero's columns, as ATen does. Shapes and dtypes are
// computed here, never through ATen's (partly Python) meta kernels. What the
// entries cannot take falls back to the CPU (counted), which also raises
// ATen's errors.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"
#include "runtime_scan.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;

// op along `dim` of `in` into `out` (same sizes, any strides; out may be in);
// false when the entry is absent or answers NOT_SUPPORTED.
bool launch_scan(T in, T out, int64_t dim, int32_t op, bool exclusive) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.scan == nullptr) return false;
  kpdrScanArgs a{};
  a.op = op;
  a.exclusive = exclusive ? 1 : 0;
  a.in_dtype = *entry_dtype(in.scalar_type());
  a.out_dtype = *entry_dtype(out.scalar_type());
  if (in.dim() == 0) {  // one element: a line of one
    a.ndim = 1;
    a.sizes[0] = 1;
    a.in_strides[0] = a.out_strides[0] = 1;
  } else {
    a.ndim = static_cast<int32_t>(in.dim());
    a.dim = static_cast<int32_t>(dim);
    for (int64_t d = 0; d < in.dim(); ++d) {
      a.sizes[d] = in.size(d);
      a.in_strides[d] = in.stride(d);
      a.out_strides[d] = out.stride(d);
    }
  }
  c10::DeviceGuard guard(in.device());
  if (in.numel() == 0) return true;
  a.in = in.const_data_ptr();
  a.out = out.mutable_data_ptr();
  return launch_kernel(kernels.scan, a, current_stream(in.device().index()));
}

std::optional<int64_t> wrap_dim(T self, int64_t dim) {
  const int64_t bound = std::max<int64_t>(self.dim(), 1);
  if (dim < -bound || dim >= bound) return std::nullopt;  // the fallback raises ATen's IndexError
  return dim < 0 ? dim + bound : dim;
}

// The input the entry reads for a result of `out_type`: self itself where the
// entry's arithmetic takes the pair (floats or bool into a float, integers or
// bool into an integer), else self converted first, as ATen's kernels do.
at::Tensor scan_input(T self, at::ScalarType out_type) {
  const bool float_out = entry_float(out_type);
  if (float_out ? (entry_float(self.scalar_type()) || self.scalar_type() == at::kBool)
                : entry_integer(self.scalar_type())) {
    return self;
  }
  return self.to(out_type);
}

bool scan_eligible(T self, at::ScalarType out_type, int32_t op) {
  if (!device_tensor(self, KPDR_MAX_DIMS) || !entry_dtype(out_type) || out_type == at::kBool) return false;
  return op != KPDR_SCAN_LOGADDEXP || entry_float(out_type);
}

template <int32_t op>
struct Cumulative {  // cumsum, cumprod: integral inputs accumulate into int64 unless a dtype is given
  static at::ScalarType result_type(T self, std::optional<at::ScalarType> dtype) {
    if (dtype) return *dtype;
    return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
  }

  static at::Tensor functional(T self, int64_t dim, std::optional<at::ScalarType> dtype) {
    const at::ScalarType out_type = result_type(self, dtype);
    if (scan_eligible(self, out_type, op)) {
      if (auto d = wrap_dim(self, dim)) {
        const at::Tensor in = scan_input(self, out_type);
        at::Tensor out = at::empty(self.sizes(), self.options().dtype(out_type));
        if (launch_scan(in, out, *d, op, false)) return out;
      }
    }
    return run_on_fallback<at::Tensor, T, int64_t, std::optional<at::ScalarType>>(
        kernel_key(&functional), self, dim, dtype);
  }

  static at::Tensor& inplace(at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
    if ((!dtype || *dtype == self.scalar_type()) && scan_eligible(self, self.scalar_type(), op) &&
        at::has_internal_overlap(self) == at::MemOverlap::No) {
      if (auto d = wrap_dim(self, dim)) {
        if (launch_scan(self, self, *d, op, false)) return self;
      }
    }
    return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, std::optional<at::ScalarType>>(
        kernel_key(&inplace), self, dim, dtype);
  }
};

at::Tensor logcumsumexp(T self, int64_t dim) {
  if (scan_eligible(self, self.scalar_type(), KPDR_SCAN_LOGADDEXP)) {
    if (auto d = wrap_dim(self, dim)) {
      at::Tensor out = at::empty(self.sizes(), self.options());
      if (launch_scan(self, out, *d, KPDR_SCAN_LOGADDEXP, false)) return out;
    }
  }
  return run_on_fallback<at::Tensor, T, int64_t>(kernel_key(&logcumsumexp), self, dim);
}

// ---- flip ---------------------------------------------------------------------

// out = self read from the far end of every flipped dimension: one pointwise
// copy whose input pointer starts at that end with the dimension's stride negated.
std::optional<at::Tensor> flip_native(T self, at::IntArrayRef dims) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.pointwise == nullptr || !device_tensor(self, KPDR_MAX_DIMS)) return std::nullopt;
  uint32_t flipped = 0;
  for (int64_t dim : dims) {
    const auto d = wrap_dim(self, dim);
    if (!d || (flipped & (1u << *d))) return std::nullopt;  // ATen raises for repeated or bad dims
    flipped |= 1u << *d;
  }
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() == 0) return out;
  kpdrPointwiseArgs a{};
  a.op = KPDR_POINTWISE_COPY;
  a.ndim = static_cast<int32_t>(self.dim());
  a.out = out.mutable_data_ptr();
  a.out_dtype = *entry_dtype(out.scalar_type());
  const char* start = static_cast<const char*>(self.const_data_ptr());
  for (int64_t d = 0; d < self.dim(); ++d) {
    a.sizes[d] = self.size(d);
    a.out_strides[d] = out.stride(d);
    const bool flip = self.dim() > 0 && (flipped & (1u << d));
    a.in[0].strides[d] = flip ? -self.stride(d) : self.stride(d);
    if (flip) start += (self.size(d) - 1) * self.stride(d) * static_cast<int64_t>(self.element_size());
  }
  a.in[0].data = start;
  a.in[0].dtype = a.out_dtype;
  a.alpha = 1.0;
  c10::DeviceGuard guard(self.device());
  if (!launch_kernel(kernels.pointwise, a, current_stream(self.device().index()))) return std::nullopt;
  return out;
}

at::Tensor flip(T self, at::IntArrayRef dims) {
  if (auto r = flip_native(self, dims)) return *r;
  return run_on_fallback<at::Tensor, T, at::IntArrayRef>(kernel_key(&flip), self, dims);
}

// ---- compaction -------------------------------------------------------------

// The selected positions of a mask: `pos` [N] int64 holds each selected
// element's rank and -1 elsewhere (row-major over the mask's sizes).
struct Selection {
  at::Tensor pos;
  int64_t count = 0;
};

// `mask`: a contiguous bool tensor. nullopt when an entry cannot take it.
std::optional<Selection> select(T mask) {
  const int64_t n = mask.numel();
  Selection s;
  const at::Tensor flat = mask.reshape({n});
  at::Tensor rank = at::empty({n}, mask.options().dtype(at::kLong));
  if (n == 0) {
    s.pos = rank;
    return s;
  }
  if (!launch_scan(flat, rank, 0, KPDR_SCAN_SUM, true)) return std::nullopt;
  // The count: the last rank plus the last mask element, read back (one synchronisation).
  s.count = rank.select(0, n - 1).add(flat.select(0, n - 1)).item<int64_t>();
  s.pos = at::where(flat, rank, at::scalar_tensor(-1, rank.options()));
  return s;
}

// indexed[pos[i] * row_stride + column] = dense[i] for the selected i of `sizes`
// (the row-major order `pos` follows); dense read through dense_strides.
bool scatter_rows(const Selection& s, at::IntArrayRef sizes, kpdrDtype dtype, const void* dense,
                  const std::vector<int64_t>& dense_strides, void* indexed, int64_t row_stride, c10::Device device) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.scatter == nullptr) return false;
  kpdrIndexArgs a{};
  a.ndim = static_cast<int32_t>(sizes.size());
  a.dtype = dtype;
  a.dense = const_cast<void*>(dense);
  a.indexed = indexed;
  a.num_indices = 1;
  kpdrIndexOperand& idx = a.indices[0];
  idx.data = s.pos.const_data_ptr();
  idx.dtype = KPDR_DTYPE_INT64;
  idx.size = s.count;
  idx.stride = row_stride;
  int64_t step = 1;
  for (int64_t d = a.ndim - 1; d >= 0; --d) {
    a.sizes[d] = sizes[d];
    a.dense_strides[d] = dense_strides[d];
    a.indexed_strides[d] = 0;
    idx.strides[d] = step;
    step *= sizes[d];
  }
  a.alpha = 1.0;
  a.skip = 1;
  a.skip_value = -1;
  a.error = nullptr;  // ranks below count by construction
  c10::DeviceGuard guard(device);
  return launch_kernel(kernels.scatter, a, current_stream(device.index()));
}

bool compaction_ready() {
  const kpdrKernelTable& k = runtime_kernels();
  return k.scan != nullptr && k.scatter != nullptr && k.pointwise != nullptr;
}

}  // namespace

std::optional<at::Tensor> runtime_nonzero(const at::Tensor& self) {
  if (!compaction_ready() || !device_tensor(self, KPDR_MAX_DIMS)) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  const int64_t nd = self.dim();
  at::Tensor mask;
  if (self.scalar_type() == at::kBool && self.is_contiguous()) {
    mask = self;
  } else {
    // mask = (self != 0), contiguous whatever self's layout (the flat scan reads it row-major)
    mask = at::empty(self.sizes(), self.options().dtype(at::kBool));
    at::Tensor zero = at::scalar_tensor(0, at::TensorOptions().dtype(self.scalar_type()));
    zero.unsafeGetTensorImpl()->set_wrapped_number(true);
    at::TensorIterator iter = at::TensorIteratorConfig()
                                  .check_all_same_dtype(false)
                                  .allow_cpu_scalars(true)
                                  .resize_outputs(false)
                                  .add_output(mask)
                                  .add_const_input(self)
                                  .add_const_input(zero)
                                  .build();
    if (!runtime_pointwise(iter, KPDR_POINTWISE_NE, 1.0)) return std::nullopt;
  }
  const std::optional<Selection> s = select(mask);
  if (!s) return std::nullopt;
  at::Tensor out = at::empty({s->count, nd}, self.options().dtype(at::kLong));
  if (s->count == 0 || nd == 0) return out;
  // Coordinate d of element i is i_d: an arange read with stride 1 along d, 0 elsewhere.
  const int64_t longest = *std::max_element(self.sizes().begin(), self.sizes().end());
  const at::Tensor coordinate = at::arange(longest, self.options().dtype(at::kLong));
  int64_t* base = out.mutable_data_ptr<int64_t>();
  for (int64_t d = 0; d < nd; ++d) {
    std::vector<int64_t> strides(nd, 0);
    strides[d] = 1;
    if (!scatter_rows(*s, self.sizes(), KPDR_DTYPE_INT64, coordinate.const_data_ptr(), strides, base + d, nd,
                      self.device())) {
      return std::nullopt;
    }
  }
  return out;
}

namespace {

at::Tensor nonzero(T self) {
  if (auto r = runtime_nonzero(self)) return *r;
  return run_on_fallback<at::Tensor, T>(kernel_key(&nonzero), self);
}

std::optional<at::Tensor> masked_select_native(T self, T mask) {
  if (!compaction_ready() || !device_tensor(self, KPDR_MAX_DIMS) || !device_tensor(mask, KPDR_MAX_DIMS) ||
      mask.scalar_type() != at::kBool || self.device() != mask.device()) {
    return std::nullopt;
  }
  std::vector<int64_t> shape;
  try {
    shape = at::infer_size(self.sizes(), mask.sizes());
  } catch (const std::exception&) {
    return std::nullopt;  // the fallback raises ATen's error
  }
  if (shape.size() > KPDR_MAX_DIMS) return std::nullopt;
  c10::DeviceGuard guard(self.device());
  const at::Tensor m = mask.expand(shape).contiguous();
  const at::Tensor x = self.expand(shape);
  const std::optional<Selection> s = select(m);
  if (!s) return std::nullopt;
  at::Tensor out = at::empty({s->count}, self.options());
  if (s->count == 0) return out;
  std::vector<int64_t> strides(x.strides().begin(), x.strides().end());
  if (shape.empty()) {  // 0-dim: one element
    shape = {1};
    strides = {1};
  }
  if (!scatter_rows(*s, shape, *entry_dtype(self.scalar_type()), x.const_data_ptr(), strides, out.mutable_data_ptr(),
                    1, self.device())) {
    return std::nullopt;
  }
  return out;
}

at::Tensor masked_select(T self, T mask) {
  if (auto r = masked_select_native(self, mask)) return *r;
  return run_on_fallback<at::Tensor, T, T>(kernel_key(&masked_select), self, mask);
}

// self[i] = source.flat[r(i)] where mask[i] (mask broadcast to self), r(i) the
// rank of i among the selected elements (masked_select's backward): the
// exclusive SUM of the mask gives r, a gather reads the source there, and
// where() keeps self elsewhere. A source shorter than the selection shows in
// the gather's error buffer (one read back), and raises ATen's error.
bool masked_scatter_native(at::Tensor& self, T mask, T source) {
  if (!compaction_ready() || runtime_kernels().gather == nullptr || !device_tensor(self, KPDR_MAX_DIMS) ||
      !device_tensor(mask, KPDR_MAX_DIMS) || !device_tensor(source, KPDR_MAX_DIMS) || mask.scalar_type() != at::kBool ||
      source.scalar_type() != self.scalar_type() || self.device() != mask.device() ||
      self.device() != source.device() || source.numel() == 0 || source.is_alias_of(self) ||
      at::has_internal_overlap(self) != at::MemOverlap::No ||
      !at::is_expandable_to(mask.sizes(), self.sizes())) {
    return false;
  }
  c10::DeviceGuard guard(self.device());
  const int64_t n = self.numel();
  if (n == 0) return true;
  const at::Tensor m = mask.expand(self.sizes()).contiguous();
  const at::Tensor flat = m.reshape({n});
  at::Tensor rank = at::empty({n}, self.options().dtype(at::kLong));
  if (!launch_scan(flat, rank, 0, KPDR_SCAN_SUM, true)) return false;
  const at::Tensor idx = at::where(flat, rank, at::scalar_tensor(0, rank.options()));
  const at::Tensor src = source.contiguous().reshape({-1});
  at::Tensor picked = at::empty(self.sizes(), self.options());
  const at::Tensor error = at::zeros({2}, rank.options());
  kpdrIndexArgs a{};
  a.ndim = 1;
  a.sizes[0] = n;
  a.dtype = *entry_dtype(self.scalar_type());
  a.dense = picked.mutable_data_ptr();
  a.dense_strides[0] = 1;
  a.indexed = const_cast<void*>(src.const_data_ptr());
  a.num_indices = 1;
  a.indices[0].data = idx.const_data_ptr();
  a.indices[0].dtype = KPDR_DTYPE_INT64;
  a.indices[0].strides[0] = 1;
  a.indices[0].size = src.numel();
  a.indices[0].stride = 1;
  a.error = error.mutable_data_ptr<int64_t>();
  if (!launch_kernel(runtime_kernels().gather, a, current_stream(self.device().index()))) return false;
  TORCH_CHECK(error.cpu().data_ptr<int64_t>()[0] == 0, "Number of elements of source < number of ones in mask");
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .check_all_same_dtype(false)
                                .resize_outputs(false)
                                .add_output(self)
                                .add_const_input(m)
                                .add_const_input(picked)
                                .add_const_input(self)
                                .build();
  return runtime_pointwise(iter, KPDR_POINTWISE_WHERE, 1.0);
}

at::Tensor& masked_scatter_(at::Tensor& self, T mask, T source) {
  if (masked_scatter_native(self, mask, source)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, T, T>(kernel_key(&masked_scatter_), self, mask, source);
}

}  // namespace

void register_runtime_scan(Registrar& r) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.pointwise != nullptr) r.impl("flip", TORCH_FN(flip));
  if (kernels.scan == nullptr) return;
  r.impl("cumsum", TORCH_FN(Cumulative<KPDR_SCAN_SUM>::functional));
  r.impl("cumsum_", TORCH_FN(Cumulative<KPDR_SCAN_SUM>::inplace));
  r.impl("cumprod", TORCH_FN(Cumulative<KPDR_SCAN_PROD>::functional));
  r.impl("cumprod_", TORCH_FN(Cumulative<KPDR_SCAN_PROD>::inplace));
  r.impl("_logcumsumexp", TORCH_FN(logcumsumexp));
  if (compaction_ready()) {
    r.impl("nonzero", TORCH_FN(nonzero));
    r.impl("masked_select", TORCH_FN(masked_select));
    if (kernels.gather != nullptr) r.impl("masked_scatter_", TORCH_FN(masked_scatter_));
  }
}

}  // namespace kernel_pytorch::native

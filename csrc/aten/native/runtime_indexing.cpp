// Indexing, embedding, masking and concatenation through the runtime's gather,
// scatter and pointwise entries (kpdr.h's core-op section) when device memory
// is not host addressable.
//
// index_select, embedding (through index_select), index.Tensor and gather
// are gather calls; embedding_dense_backward, index_put_ (so index.Tensor's
// backward), scatter, scatter_add (gather's backward) and index_add
// (index_select's backward) scatter calls; masked_fill_ is pointwise `where`; cat is one
// pointwise copy per input into its slice of a result whose shape, dtype and
// layout ATen's own meta function computes. Index tensors are checked on the
// device: the entry records an out-of-range index in a small int64 buffer
// that is read back after the call (one synchronisation per call, as the CPU
// checks before it writes), and the op raises ATen's IndexError naming it.
// What the entries cannot take (bool-mask indices, CPU operands, more than
// KPDR_MAX_DIMS dimensions, NOT_SUPPORTED answers) runs through the counted
// CPU fallback, which also raises ATen's errors for malformed calls.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/TensorShape.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"
#include "runtime_scan.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;

bool on_device(T t, c10::Device device) {
  return t.defined() && t.device() == device && t.layout() == at::kStrided && !t.is_neg() && !t.is_conj();
}

bool index_dtype(T t) {
  return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt;
}

// One gather/scatter call being assembled: sizes and per-operand strides.
struct IndexCall {
  kpdrIndexArgs args{};
  std::vector<at::Tensor> keep;  // index tensors made on the way (expanded, moved)

  explicit IndexCall(at::IntArrayRef sizes) {
    args.ndim = static_cast<int32_t>(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) args.sizes[d] = sizes[d];
  }
  static bool fits(at::IntArrayRef sizes) { return sizes.size() <= KPDR_MAX_DIMS; }
  void index(T idx, at::IntArrayRef strides, int64_t size, int64_t stride) {
    kpdrIndexOperand& op = args.indices[args.num_indices++];
    op.data = idx.const_data_ptr();
    op.dtype = idx.scalar_type() == at::kInt ? KPDR_DTYPE_INT32 : KPDR_DTYPE_INT64;
    for (size_t d = 0; d < strides.size(); ++d) op.strides[d] = strides[d];
    op.size = size;
    op.stride = stride;
    keep.push_back(idx);
  }
  // Launches and raises IndexError for an out-of-range index; false when the
  // entry cannot take the call (nothing done).
  bool run(bool scatter, c10::Device device, const char* op_name, const std::vector<int64_t>& dims) {
    const kpdrKernelTable& kernels = runtime_kernels();
    auto entry = scatter ? kernels.scatter : kernels.gather;
    if (entry == nullptr) return false;
    int64_t n = 1;
    for (int d = 0; d < args.ndim; ++d) n *= args.sizes[d];
    c10::DeviceGuard guard(device);
    if (n == 0) return true;
    const at::Tensor error = at::zeros({2}, at::TensorOptions().dtype(at::kLong).device(device));
    args.error = error.mutable_data_ptr<int64_t>();
    if (!launch_kernel(entry, args, current_stream(device.index()))) return false;
    const at::Tensor reported = error.cpu();
    const int64_t k = reported.data_ptr<int64_t>()[0];
    if (k != 0) {
      const kpdrIndexOperand& op = args.indices[k - 1];
      TORCH_CHECK_INDEX(false, op_name, ": index ", reported.data_ptr<int64_t>()[1],
                        " is out of bounds for dimension ", dims.at(k - 1), " with size ", op.size);
    }
    return true;
  }
};

// ---- index_select (and so embedding) ----------------------------------------

std::optional<at::Tensor> index_select_native(T self, int64_t dim, T index) {
  if (!self.defined() || self.device().type() != c10::DeviceType::PrivateUse1) return std::nullopt;
  const c10::Device device = self.device();
  if (!on_device(self, device) || !on_device(index, device) || !index_dtype(index) || index.dim() > 1 ||
      self.dim() == 0 || !IndexCall::fits(self.sizes()) || !entry_dtype(self.scalar_type())) {
    return std::nullopt;
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  shape[d] = index.numel();
  at::Tensor out = at::empty(shape, self.options());
  IndexCall call(out.sizes());
  call.args.dtype = *entry_dtype(self.scalar_type());
  call.args.dense = out.mutable_data_ptr();
  call.args.indexed = const_cast<void*>(self.const_data_ptr());
  std::vector<int64_t> idx_strides(self.dim(), 0);
  for (int64_t j = 0; j < self.dim(); ++j) {
    call.args.dense_strides[j] = out.stride(j);
    call.args.indexed_strides[j] = j == d ? 0 : self.stride(j);
  }
  idx_strides[d] = index.dim() == 1 ? index.stride(0) : 0;
  call.index(index, idx_strides, self.size(d), self.stride(d));
  if (!call.run(false, device, "index_select()", {d})) return std::nullopt;
  return out;
}

at::Tensor index_select(T self, int64_t dim, T index) {
  if (auto r = index_select_native(self, dim, index)) return *r;
  return run_on_fallback<at::Tensor, T, int64_t, T>(kernel_key(&index_select), self, dim, index);
}

// ---- embedding's backward ---------------------------------------------------

at::Tensor embedding_dense_backward(T grad, T indices, c10::SymInt num_weights, c10::SymInt padding_idx,
                                    bool scale_grad_by_freq) {
  const c10::Device device = grad.device();
  if (!scale_grad_by_freq && grad.device().type() == c10::DeviceType::PrivateUse1 && on_device(grad, device) &&
      on_device(indices, device) && index_dtype(indices) && entry_float(grad.scalar_type()) && grad.dim() >= 1 &&
      num_weights.maybe_as_int() && padding_idx.maybe_as_int()) {
    const int64_t rows = *num_weights.maybe_as_int(), width = grad.size(-1);
    const int64_t n = indices.numel();
    if (grad.numel() == n * width) {
      at::Tensor result = at::zeros({rows, width}, grad.options());
      const at::Tensor g = grad.reshape({n, width});
      const at::Tensor idx = indices.reshape({n});
      IndexCall call(g.sizes());
      call.args.dtype = *entry_dtype(grad.scalar_type());
      call.args.dense = const_cast<void*>(g.const_data_ptr());
      call.args.dense_strides[0] = g.stride(0);
      call.args.dense_strides[1] = g.stride(1);
      call.args.indexed = result.mutable_data_ptr();
      call.args.indexed_strides[0] = 0;
      call.args.indexed_strides[1] = result.stride(1);
      call.args.accumulate = 1;
      call.args.alpha = 1.0;
      const int64_t pad = *padding_idx.maybe_as_int();
      call.args.skip = pad != -1;
      call.args.skip_value = pad;
      call.keep.push_back(g);
      call.index(idx, {idx.stride(0), 0}, rows, result.stride(0));
      if (call.run(true, device, "embedding_dense_backward()", {0})) return result;
    }
  }
  return run_on_fallback<at::Tensor, T, T, c10::SymInt, c10::SymInt, bool>(
      kernel_key(&embedding_dense_backward), grad, indices, std::move(num_weights), std::move(padding_idx),
      scale_grad_by_freq);
}

// ---- advanced indexing: index.Tensor, index_put_ ----------------------------

// ATen's AdvancedIndex (TensorAdvancedIndexing.cpp): the indexed dimensions
// made adjacent, src restrided so the indices' broadcast shape replaces
// them (stride 0), each index reshaped to broadcast over the result.
struct Advanced {
  at::Tensor src;                       // restrided
  std::vector<at::Tensor> indices;      // expanded to src's shape
  std::vector<int64_t> sizes, strides;  // of the indexed dimensions
  std::vector<int64_t> dims;            // their positions in self (for errors)
};

std::optional<Advanced> advanced(at::Tensor self, const c10::List<std::optional<at::Tensor>>& list) {
  const c10::Device device = self.device();
  std::vector<at::Tensor> indices;
  for (const std::optional<at::Tensor>& t : list) {
    if (t.has_value() && t->defined()) {
      if (!on_device(*t, device)) return std::nullopt;
      if (t->scalar_type() == at::kBool) {  // a mask: its nonzero columns, as ATen's expandTensors
        const int64_t first = static_cast<int64_t>(indices.size());
        if (t->dim() == 0 || first + t->dim() > self.dim()) return std::nullopt;
        for (int64_t j = 0; j < t->dim(); ++j) {
          if (t->size(j) != self.size(first + j)) return std::nullopt;  // the fallback raises ATen's IndexError
        }
        const std::optional<at::Tensor> rows = runtime_nonzero(*t);
        if (!rows) return std::nullopt;
        for (int64_t j = 0; j < t->dim(); ++j) indices.push_back(rows->select(1, j));
        continue;
      }
      if (!index_dtype(*t)) return std::nullopt;  // byte masks: the fallback expands them
      indices.push_back(*t);
    } else {
      indices.emplace_back();
    }
  }
  if (indices.size() > static_cast<size_t>(self.dim())) return std::nullopt;  // the fallback raises
  try {
    indices = at::expand_outplace(indices);
  } catch (const std::exception&) {
    return std::nullopt;  // shape mismatch: the fallback raises ATen's IndexError
  }
  while (indices.size() < static_cast<size_t>(self.dim())) indices.emplace_back();
  std::vector<int64_t> position(self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) position[d] = d;
  if (!at::native::hasContiguousSubspace(indices)) {
    std::vector<int64_t> order;
    std::vector<at::Tensor> moved;
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (indices[d].defined()) { order.push_back(d); moved.push_back(indices[d]); }
    }
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (!indices[d].defined()) { order.push_back(d); moved.emplace_back(); }
    }
    self = self.permute(order);
    indices = moved;
    position = order;
  }
  Advanced info;
  int64_t before = 0, after = 0, indexed = 0;
  at::IntArrayRef replacement;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!indices[d].defined()) {
      (indexed == 0 ? before : after)++;
    } else {
      ++indexed;
      replacement = indices[d].sizes();
      info.sizes.push_back(self.size(d));
      info.strides.push_back(self.stride(d));
      info.dims.push_back(position[d]);
    }
  }
  if (indexed == 0) return std::nullopt;
  for (int64_t s : info.sizes) {
    if (s == 0) return std::nullopt;  // ATen's size-0 rules: the fallback applies them
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  std::vector<int64_t> strides(self.strides().begin(), self.strides().end());
  shape.erase(shape.begin() + before, shape.begin() + before + indexed);
  strides.erase(strides.begin() + before, strides.begin() + before + indexed);
  shape.insert(shape.begin() + before, replacement.begin(), replacement.end());
  strides.insert(strides.begin() + before, replacement.size(), 0);
  if (shape.size() > KPDR_MAX_DIMS) return std::nullopt;
  info.src = self.as_strided(shape, strides);
  for (const at::Tensor& t : indices) {
    if (!t.defined()) continue;
    std::vector<int64_t> s(before, 1);
    s.insert(s.end(), t.sizes().begin(), t.sizes().end());
    s.insert(s.end(), after, 1);
    info.indices.push_back(t.reshape(s).expand(shape));
  }
  return info;
}

at::Tensor index(T self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (self.defined() && self.device().type() == c10::DeviceType::PrivateUse1 && on_device(self, self.device()) &&
      entry_dtype(self.scalar_type())) {
    if (auto info = advanced(self, indices)) {
      at::Tensor out = at::empty(info->src.sizes(), self.options());
      IndexCall call(out.sizes());
      call.args.dtype = *entry_dtype(self.scalar_type());
      call.args.wrap = 1;
      call.args.dense = out.mutable_data_ptr();
      call.args.indexed = const_cast<void*>(self.const_data_ptr());
      for (int64_t d = 0; d < out.dim(); ++d) {
        call.args.dense_strides[d] = out.stride(d);
        call.args.indexed_strides[d] = info->src.stride(d);
      }
      for (size_t k = 0; k < info->indices.size(); ++k) {
        call.index(info->indices[k], info->indices[k].strides(), info->sizes[k], info->strides[k]);
      }
      if (call.run(false, self.device(), "index", info->dims)) return out;
    }
  }
  return run_on_fallback<at::Tensor, T, const c10::List<std::optional<at::Tensor>>&>(kernel_key(&index), self, indices);
}

bool masked_fill_native(at::Tensor& self, T mask, T value);

// x[mask] = v with one bool mask and one value: masked_fill_ (no count to
// read back), as ATen's canDispatchToMaskedFill does for CPU values. The mask
// covers the dimensions after the leading full slices and broadcasts over the rest.
bool index_put_as_masked_fill(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& list, T values) {
  // A device value of another dtype is ATen's "dtypes match" error: the fallback raises it.
  if (values.numel() != 1 || values.is_alias_of(self) ||
      (!values.device().is_cpu() && values.scalar_type() != self.scalar_type())) {
    return false;
  }
  std::optional<at::Tensor> mask;
  int64_t before = 0;
  for (const std::optional<at::Tensor>& t : list) {
    if (!t.has_value() || !t->defined()) {
      if (!mask) ++before;
      continue;
    }
    if (mask || t->scalar_type() != at::kBool || !on_device(*t, self.device())) return false;
    mask = *t;
  }
  if (!mask || before + mask->dim() > self.dim()) return false;
  for (int64_t j = 0; j < mask->dim(); ++j) {
    if (mask->size(j) != self.size(before + j)) return false;  // the fallback raises ATen's IndexError
  }
  at::Tensor m = *mask;
  while (m.dim() < self.dim() - before) m = m.unsqueeze(-1);
  return masked_fill_native(self, m, values.reshape({}));
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, T values_in,
                           bool accumulate, bool unsafe) {
  const c10::Device device = self.device();
  if (!accumulate && self.defined() && device.type() == c10::DeviceType::PrivateUse1 && on_device(self, device) &&
      entry_dtype(self.scalar_type()) && at::has_internal_overlap(self) == at::MemOverlap::No &&
      index_put_as_masked_fill(self, indices, values_in)) {
    return self;
  }
  // A 0-dim CPU value moves to the device first, as ATen's index_put_ does.
  const at::Tensor values = values_in.defined() && values_in.device().is_cpu() && values_in.dim() == 0 &&
                                    self.defined() && device.type() == c10::DeviceType::PrivateUse1
                                ? values_in.to(device)
                                : values_in;
  if (self.defined() && device.type() == c10::DeviceType::PrivateUse1 && on_device(self, device) &&
      on_device(values, device) && values.scalar_type() == self.scalar_type() && entry_dtype(self.scalar_type()) &&
      (!accumulate || entry_float(self.scalar_type())) && !values.is_alias_of(self) &&
      at::has_internal_overlap(self) == at::MemOverlap::No) {
    if (auto info = advanced(self, indices)) {
      const auto shape = info->src.sizes();
      if (at::is_expandable_to(values.sizes(), shape)) {
        const at::Tensor v = values.expand(shape);
        IndexCall call(shape);
        call.args.dtype = *entry_dtype(self.scalar_type());
        call.args.wrap = 1;
        call.args.accumulate = accumulate ? 1 : 0;
        call.args.alpha = 1.0;
        call.args.dense = const_cast<void*>(v.const_data_ptr());
        call.args.indexed = self.mutable_data_ptr();
        for (size_t d = 0; d < shape.size(); ++d) {
          call.args.dense_strides[d] = v.stride(d);
          call.args.indexed_strides[d] = info->src.stride(d);
        }
        for (size_t k = 0; k < info->indices.size(); ++k) {
          call.index(info->indices[k], info->indices[k].strides(), info->sizes[k], info->strides[k]);
        }
        if (call.run(true, device, "index_put_", info->dims)) return self;
      }
    }
  }
  return run_on_fallback<at::Tensor&, at::Tensor&, const c10::List<std::optional<at::Tensor>>&, T, bool, bool>(
      kernel_key(&index_put_impl), self, indices, values_in, accumulate, unsafe);
}

// ---- gather, scatter, scatter_add, index_add ----------------------------------

// ATen's shape rules for gather/scatter (ScatterGatherChecks.h): same number
// of dimensions, index no larger than `other` anywhere and than self outside
// `dim`. Calls outside them go to the fallback, which raises ATen's error.
bool scatter_gather_shapes(T self, int64_t dim, T index, const at::Tensor* other) {
  if (self.dim() == 0 || index.dim() != self.dim() || (other != nullptr && other->dim() != self.dim()) ||
      !IndexCall::fits(index.sizes())) {
    return false;
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != dim && index.size(d) > self.size(d)) return false;
    if (other != nullptr && index.size(d) > other->size(d)) return false;
  }
  return true;
}

at::Tensor gather(T self, int64_t dim, T index, bool sparse_grad) {
  const c10::Device device = self.device();
  if (self.defined() && device.type() == c10::DeviceType::PrivateUse1 && on_device(self, device) &&
      on_device(index, device) && index.scalar_type() == at::kLong && entry_dtype(self.scalar_type())) {
    const int64_t d = at::maybe_wrap_dim(dim, self.dim());
    if (scatter_gather_shapes(self, d, index, nullptr)) {
      at::Tensor out = at::empty(index.sizes(), self.options());
      IndexCall call(out.sizes());
      call.args.dtype = *entry_dtype(self.scalar_type());
      call.args.dense = out.mutable_data_ptr();
      call.args.indexed = const_cast<void*>(self.const_data_ptr());
      for (int64_t j = 0; j < self.dim(); ++j) {
        call.args.dense_strides[j] = out.stride(j);
        call.args.indexed_strides[j] = j == d ? 0 : self.stride(j);
      }
      call.index(index, index.strides(), self.size(d), self.stride(d));
      if (call.run(false, device, "gather()", {d})) return out;
    }
  }
  return run_on_fallback<at::Tensor, T, int64_t, T, bool>(kernel_key(&gather), self, dim, index, sparse_grad);
}

// self[... index[i] ... along dim] (+)= alpha * src[i] for every index i of
// `sizes` (gather's layout read in reverse); false when the entry can't take it.
bool scatter_into(at::Tensor& self, int64_t d, T index, at::IntArrayRef index_strides, T src,
                  at::IntArrayRef sizes, bool accumulate, double alpha, const char* op_name) {
  const c10::Device device = self.device();
  if (!on_device(src, device) || src.scalar_type() != self.scalar_type() || !entry_dtype(self.scalar_type()) ||
      (accumulate && !entry_float(self.scalar_type())) || src.is_alias_of(self) || index.is_alias_of(self) ||
      at::has_internal_overlap(self) != at::MemOverlap::No) {
    return false;
  }
  IndexCall call(sizes);
  call.args.dtype = *entry_dtype(self.scalar_type());
  call.args.accumulate = accumulate ? 1 : 0;
  call.args.alpha = alpha;
  call.args.dense = const_cast<void*>(src.const_data_ptr());
  call.args.indexed = self.mutable_data_ptr();
  for (size_t j = 0; j < sizes.size(); ++j) {
    call.args.dense_strides[j] = src.stride(j);
    call.args.indexed_strides[j] = static_cast<int64_t>(j) == d ? 0 : self.stride(j);
  }
  call.index(index, index_strides, self.size(d), self.stride(d));
  return call.run(true, device, op_name, {d});
}

// scatter/scatter_add; `value`: src is a 0-dim tensor broadcast over index
// (scatter.value).
bool scatter_native(at::Tensor& self, int64_t dim, T index, T src, bool accumulate, const char* op_name,
                    bool value = false) {
  const c10::Device device = self.device();
  if (!self.defined() || device.type() != c10::DeviceType::PrivateUse1 || !on_device(self, device) ||
      !on_device(index, device) || index.scalar_type() != at::kLong) {
    return false;
  }
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (value) {
    if (!scatter_gather_shapes(self, d, index, nullptr)) return false;
    const at::Tensor v = src.expand(index.sizes());
    return scatter_into(self, d, index, index.strides(), v, index.sizes(), accumulate, 1.0, op_name);
  }
  if (!scatter_gather_shapes(self, d, index, &src)) return false;
  return scatter_into(self, d, index, index.strides(), src, index.sizes(), accumulate, 1.0, op_name);
}

at::Tensor& scatter_src_(at::Tensor& self, int64_t dim, T index, T src) {
  if (scatter_native(self, dim, index, src, false, "scatter_()")) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, T, T>(kernel_key(&scatter_src_), self, dim, index, src);
}

at::Tensor scatter_src(T self, int64_t dim, T index, T src) {
  if (on_device(self, self.device()) && self.device().type() == c10::DeviceType::PrivateUse1) {
    at::Tensor result = self.clone(at::MemoryFormat::Preserve);
    if (scatter_native(result, dim, index, src, false, "scatter()")) return result;
  }
  return run_on_fallback<at::Tensor, T, int64_t, T, T>(kernel_key(&scatter_src), self, dim, index, src);
}

// The fill value as a 0-dim device tensor of self's dtype (the entry reads
// dense through zero strides).
std::optional<at::Tensor> device_value(T self, const at::Scalar& value) {
  if (value.isComplex() || !entry_dtype(self.scalar_type())) return std::nullopt;
  return at::scalar_tensor(value, self.options());
}

at::Tensor& scatter_value_(at::Tensor& self, int64_t dim, T index, const at::Scalar& value) {
  if (self.defined() && self.device().type() == c10::DeviceType::PrivateUse1) {
    if (auto v = device_value(self, value)) {
      if (scatter_native(self, dim, index, *v, false, "scatter_()", true)) return self;
    }
  }
  return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, T, const at::Scalar&>(
      kernel_key(&scatter_value_), self, dim, index, value);
}

at::Tensor scatter_value(T self, int64_t dim, T index, const at::Scalar& value) {
  if (on_device(self, self.device()) && self.device().type() == c10::DeviceType::PrivateUse1) {
    if (auto v = device_value(self, value)) {
      at::Tensor result = self.clone(at::MemoryFormat::Preserve);
      if (scatter_native(result, dim, index, *v, false, "scatter()", true)) return result;
    }
  }
  return run_on_fallback<at::Tensor, T, int64_t, T, const at::Scalar&>(
      kernel_key(&scatter_value), self, dim, index, value);
}

at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, T index, T src) {
  if (scatter_native(self, dim, index, src, true, "scatter_add_()")) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, T, T>(kernel_key(&scatter_add_), self, dim, index, src);
}

at::Tensor scatter_add(T self, int64_t dim, T index, T src) {
  if (on_device(self, self.device()) && self.device().type() == c10::DeviceType::PrivateUse1) {
    at::Tensor result = self.clone(at::MemoryFormat::Preserve);
    if (scatter_native(result, dim, index, src, true, "scatter_add()")) return result;
  }
  return run_on_fallback<at::Tensor, T, int64_t, T, T>(kernel_key(&scatter_add), self, dim, index, src);
}

// self.index_add_(dim, index, source, alpha): source's slice i along dim is
// added to self's slice index[i] (index_select's backward).
bool index_add_native(at::Tensor& self, int64_t dim, T index, T source, const at::Scalar& alpha) {
  const c10::Device device = self.device();
  if (!self.defined() || device.type() != c10::DeviceType::PrivateUse1 || !on_device(self, device) ||
      !on_device(index, device) || !index_dtype(index) || index.dim() > 1 || self.dim() == 0 ||
      source.dim() != self.dim() || alpha.isComplex() || !IndexCall::fits(source.sizes())) {
    return false;
  }
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (source.size(d) != index.numel()) return false;
  for (int64_t j = 0; j < self.dim(); ++j) {
    if (j != d && source.size(j) != self.size(j)) return false;
  }
  std::vector<int64_t> idx_strides(self.dim(), 0);
  idx_strides[d] = index.dim() == 1 ? index.stride(0) : 0;
  return scatter_into(self, d, index, idx_strides, source, source.sizes(), true, alpha.to<double>(),
                      "index_add_()");
}

at::Tensor& index_add_(at::Tensor& self, int64_t dim, T index, T source, const at::Scalar& alpha) {
  if (index_add_native(self, dim, index, source, alpha)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, T, T, const at::Scalar&>(
      kernel_key(&index_add_), self, dim, index, source, alpha);
}

at::Tensor index_add(T self, int64_t dim, T index, T source, const at::Scalar& alpha) {
  if (on_device(self, self.device()) && self.device().type() == c10::DeviceType::PrivateUse1) {
    at::Tensor result = self.clone(at::MemoryFormat::Preserve);
    if (index_add_native(result, dim, index, source, alpha)) return result;
  }
  return run_on_fallback<at::Tensor, T, int64_t, T, T, const at::Scalar&>(
      kernel_key(&index_add), self, dim, index, source, alpha);
}

// ---- masked_fill_ -----------------------------------------------------------

// self = where(mask, value, self) in place; `value` a 0-dim tensor (a CPU
// one travels as a scalar operand of self's dtype, as ATen casts it).
bool masked_fill_native(at::Tensor& self, T mask, T value) {
  const c10::Device device = self.device();
  if (device.type() != c10::DeviceType::PrivateUse1 || !on_device(self, device) || !on_device(mask, device) ||
      mask.scalar_type() != at::kBool || !entry_dtype(self.scalar_type()) || value.dim() != 0 ||
      at::isComplexType(value.scalar_type())) {
    return false;
  }
  at::Tensor fill = value;
  if (value.device().is_cpu()) {
    fill = at::scalar_tensor(value.item(), at::TensorOptions().dtype(self.scalar_type()));
    fill.unsafeGetTensorImpl()->set_wrapped_number(true);
  } else if (!on_device(value, device) || !entry_dtype(value.scalar_type())) {
    return false;
  }
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .check_all_same_dtype(false)
                                .allow_cpu_scalars(true)
                                .resize_outputs(false)
                                .add_output(self)
                                .add_const_input(mask)
                                .add_const_input(fill)
                                .add_const_input(self)
                                .build();
  return runtime_pointwise(iter, KPDR_POINTWISE_WHERE, 1.0);
}

at::Tensor& masked_fill_scalar(at::Tensor& self, T mask, const at::Scalar& value) {
  if (!value.isComplex()) {
    const at::Tensor v = at::scalar_tensor(value, at::TensorOptions().dtype(value.type()));
    if (masked_fill_native(self, mask, v)) return self;
  }
  return run_on_fallback<at::Tensor&, at::Tensor&, T, const at::Scalar&>(
      kernel_key(&masked_fill_scalar), self, mask, value);
}

at::Tensor& masked_fill_tensor(at::Tensor& self, T mask, T value) {
  if (masked_fill_native(self, mask, value)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, T, T>(kernel_key(&masked_fill_tensor), self, mask, value);
}

// ---- cat --------------------------------------------------------------------

// Copies each input into its slice of `result` through the pointwise entry;
// false (before writing anything) when some input cannot go that way.
bool cat_into(const std::vector<at::Tensor>& inputs, int64_t dim, at::Tensor& result) {
  if (result.dim() > KPDR_MAX_DIMS || !entry_dtype(result.scalar_type())) return false;
  const c10::Device device = result.device();
  for (const at::Tensor& t : inputs) {
    if (!on_device(t, device) || !entry_dtype(t.scalar_type()) || t.is_alias_of(result)) return false;
  }
  const int64_t d = at::maybe_wrap_dim(dim, result.dim());
  int64_t offset = 0;
  for (const at::Tensor& t : inputs) {
    if (t.dim() == 1 && t.size(0) == 0 && result.dim() != 1) continue;  // legacy empty inputs are skipped
    const int64_t length = t.size(d);
    if (length > 0 && t.numel() > 0) {
      at::Tensor slice = result.narrow(d, offset, length);
      if (!runtime_pointwise_copy(t, slice)) slice.copy_(t);
    }
    offset += length;
  }
  return true;
}

// The result ATen's cat gives (sizes, dtype, memory format), following its
// meta function (legacy 1-D empty inputs skipped, dtypes promoted, a memory
// format kept only when every input suggests it); nullopt for inputs ATen
// rejects, which the CPU fallback then reports with ATen's own errors.
// Computed here, not on meta tensors: cat's meta kernel is Python
// (torch._meta_registrations), which costs ~90 us and the GIL per call, and
// its first call imports torch._dynamo.
struct CatShape {
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
  at::MemoryFormat format;
};

std::optional<CatShape> cat_shape(const std::vector<at::Tensor>& inputs, int64_t dim) {
  const at::Tensor* first = nullptr;  // the first input not skipped
  for (const at::Tensor& t : inputs) {
    if (t.dim() == 0) return std::nullopt;
    if (first == nullptr && !at::native::cat_should_skip_tensor(t)) first = &t;
  }
  CatShape shape{{0}, at::native::result_type(inputs), at::MemoryFormat::Contiguous};
  std::optional<at::MemoryFormat> format;
  for (const at::Tensor& t : inputs) {
    const at::MemoryFormat f = t.suggest_memory_format();
    if (f == at::MemoryFormat::Contiguous || (format && *format != f)) {
      format = at::MemoryFormat::Contiguous;
      break;
    }
    format = f;
  }
  shape.format = format.value_or(at::MemoryFormat::Contiguous);
  if (first == nullptr) return shape;  // only legacy empty inputs: a 1-D empty result
  const int64_t rank = first->dim();
  if (dim < -rank || dim >= rank) return std::nullopt;
  const int64_t d = dim < 0 ? dim + rank : dim;
  shape.sizes = first->sizes().vec();
  shape.sizes[d] = 0;
  for (const at::Tensor& t : inputs) {
    if (at::native::cat_should_skip_tensor(t)) continue;
    if (t.dim() != rank) return std::nullopt;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != d && t.size(i) != first->size(i)) return std::nullopt;
    }
    shape.sizes[d] += t.size(d);
  }
  return shape;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<at::Tensor> inputs(tensors.begin(), tensors.end());
  if (!inputs.empty() && runtime_kernels().pointwise != nullptr &&
      inputs[0].device().type() == c10::DeviceType::PrivateUse1) {
    const c10::Device device = inputs[0].device();
    bool same = true;
    for (const at::Tensor& t : inputs) same = same && on_device(t, device) && entry_dtype(t.scalar_type());
    if (same) {
      if (const std::optional<CatShape> shape = cat_shape(inputs, dim)) {
        c10::DeviceGuard guard(device);
        at::Tensor result = at::empty(shape->sizes, inputs[0].options().dtype(shape->dtype).memory_format(shape->format));
        if (result.numel() == 0 || cat_into(inputs, dim, result)) return result;
      }
    }
  }
  return run_on_fallback<at::Tensor, const at::ITensorListRef&, int64_t>(kernel_key(&cat), tensors, dim);
}

}  // namespace

void register_runtime_indexing(Registrar& r) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.gather != nullptr) {
    r.impl("index_select", TORCH_FN(index_select));
    r.impl("index.Tensor", TORCH_FN(index));
    r.impl("gather", TORCH_FN(gather));
  }
  if (kernels.scatter != nullptr) {
    r.impl("scatter.src", TORCH_FN(scatter_src));
    r.impl("scatter_.src", TORCH_FN(scatter_src_));
    r.impl("scatter.value", TORCH_FN(scatter_value));
    r.impl("scatter_.value", TORCH_FN(scatter_value_));
    r.impl("scatter_add", TORCH_FN(scatter_add));
    r.impl("scatter_add_", TORCH_FN(scatter_add_));
    r.impl("index_add", TORCH_FN(index_add));
    r.impl("index_add_", TORCH_FN(index_add_));
  }
  if (kernels.scatter != nullptr && kernels.pointwise != nullptr) {
    r.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
    r.impl("_index_put_impl_", TORCH_FN(index_put_impl));
  }
  if (kernels.pointwise != nullptr) {
    r.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_scalar));
    r.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_tensor));
    r.impl("cat", TORCH_FN(cat));
  }
}

}  // namespace kernel_pytorch::native

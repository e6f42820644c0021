// The runtime's generic pointwise and reduce entries (kpdr.h's core-op
// section) as the ATen glue uses them: for runtimes whose memory the host
// cannot address (runtime_pointwise.cpp, runtime_reduce.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <limits>
#include <optional>

#include "core/core.h"

namespace kernel_pytorch::native {

// The entry dtype of an ATen dtype (float32, float16, bfloat16, bool).
std::optional<kpdrDtype> entry_dtype(at::ScalarType t);
bool entry_float(at::ScalarType t);
// Bool, int32 or int64: the dtypes the reduce and scan entries compute on as
// integers (exactly, in int64).
bool entry_integer(at::ScalarType t);
// A my_asic tensor an entry can address through its strides: strided, of an
// entry dtype, no lazy negation or conjugation, at most `max_dims` dimensions.
// Entries that take the dimensions as they are (scan, sort) pass
// KPDR_MAX_DIMS; callers whose TensorIterator coalesces dimensions first, and
// checks their count itself, leave it unbounded.
bool device_tensor(const at::Tensor& t, int64_t max_dims = std::numeric_limits<int64_t>::max());

// Runs a built iterator (one output, up to three inputs; 0-dim CPU inputs
// travel as values) through kpdrKernelTable::pointwise. False, with nothing
// enqueued, when the entry is absent or cannot take it (dtypes, dimensions,
// KPDR_ERROR_NOT_SUPPORTED): the caller then falls back.
bool runtime_pointwise(at::TensorIteratorBase& iter, int32_t op, double alpha);
// Fills the iterator's one output (no inputs) with `value`.
bool runtime_fill(at::TensorIteratorBase& iter, double value);
// dst.copy_(src) on one device through the entry (dtype casts, layout
// changes); false when it cannot, and the caller copies another way.
bool runtime_pointwise_copy(const at::Tensor& src, const at::Tensor& dst);
// A float tensor of my_asic the reduce entry can read (strided, at most
// KPDR_MAX_DIMS dimensions, no lazy negation or conjugation).
bool reduce_eligible(const at::Tensor& self);
// A bool or integer tensor of my_asic (entry_integer) the reduce entry can
// read as int64: strided, at most KPDR_MAX_DIMS dimensions.
bool reduce_integer_eligible(const at::Tensor& self);
// `op` over the dimensions of `mask` into a new contiguous tensor of `out_type`
// (kLong for ARGMAX/ARGMIN and integer sums; `correction` for VAR/STD);
// undefined when the entry cannot take the call (runtime_reduce.cpp).
at::Tensor reduce_into_new(const at::Tensor& self, uint32_t mask, bool keepdim, at::ScalarType out_type, int32_t op,
                           double correction = 0);
// The reduced dimensions as a bit mask (all of them when `dims` is empty), or
// nullopt for an out-of-range or repeated dimension (runtime_reduce.cpp).
std::optional<uint32_t> reduce_mask(const at::Tensor& self, at::IntArrayRef dims);
// sum of a bool, int32 or int64 tensor into int64 (ATen's default) through the
// reduce entry; undefined when it cannot (runtime_statistics.cpp).
at::Tensor runtime_integer_sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                               std::optional<at::ScalarType> dtype);

}  // namespace kernel_pytorch::native

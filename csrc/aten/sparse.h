// Sparse COO and compressed tensors on my_asic (sparse.cpp).
#pragma once

#include <cstdint>

namespace kernel_pytorch {

// Sends ops on sparse my_asic tensors whose composite kernel expects strided
// tensors where the CPU has a sparse kernel (structured add, mul, mm; sum)
// to the sparse CPU fallback, as route_structured_ops_to_fallback does for
// dense ones.
// Idempotent; returns the number of ops routed for both sparse keys.
int64_t route_structured_sparse_ops_to_fallback();

} // namespace kernel_pytorch

// One table of kernel entry points per CPU ISA level (DispatchStub's shape):
// kernels_<isa>.cpp compiles kernels_impl.h for its level and returns its
// table; isa.cpp picks the table once.
#pragma once

#include "kernels/kernels.h"

namespace kp::cpu {

struct KernelSet {
  void (*rms_norm)(const kpdrRmsNormArgs&);
  void (*silu)(const kpdrSiluArgs&);
  void (*rope)(const kpdrRopeArgs&);
  void (*softmax)(const kpdrSoftmaxArgs&);
  void (*decode_attention)(const kpdrDecodeAttentionArgs&);
  void (*prefill_attention)(const kpdrPrefillAttentionArgs&);
  void (*matmul_vec)(const kpdrMatmulVecArgs&);
};

// Whether a kernel writing an output of `output_bytes` stores it with
// non-temporal stores (streaming.cpp): from the size of the last-level cache
// up, or KP_STREAMING_STORES_MIN_BYTES when set.
bool use_streaming_stores(int64_t output_bytes);

const KernelSet& kernels_generic();
// Null where the build has no code for that level (non-x86 targets).
const KernelSet* kernels_avx2();
const KernelSet* kernels_avx512();
const KernelSet* kernels_avx512_bf16();

}  // namespace kp::cpu

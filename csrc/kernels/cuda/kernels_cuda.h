// kernel_pytorch's CUDA kernel library: the kernels behind kernel_pytorch.ops
// on CUDA tensors. Torch-free like csrc/kernels/cpu: arguments are the kpdr
// descriptors of csrc/runtime/kpdr.h (device pointers, element strides, the
// innermost dimension contiguous) plus a stream; every launch only enqueues
// (no host synchronisation, no allocation), so it is CUDA-graph capturable.
//
// Each op has a launch configuration (LaunchConfig). `candidates` lists the
// configurations worth timing for an argument set, the first being the fixed
// default; the tuner (csrc/ops/cuda/tuner.cpp) picks among them. A
// configuration the kernel cannot use for these arguments falls back to the
// default inside the launcher, so any LaunchConfig is safe to pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/kpdr.h"

namespace kp::cuda {

// threads: threads per row (norms, softmax), per block (elementwise, rope,
//          matmul_vec, attention); 0 = default.
// split:   op specific: rms_norm: resident blocks per multiprocessor of the
//          streaming kernel (>= 0), or minus the rows per block of the
//          one-row-per-group kernel (< 0); rows per block (softmax), vectors per thread
//          (elementwise), rows per warp (matmul_vec), cache splits
//          (decode_attention); 0 = default.
struct LaunchConfig {
  int threads = 0;
  int split = 0;
};

struct ConfigList {
  static constexpr int kMax = 12;
  LaunchConfig items[kMax];
  int size = 0;
  void add(int threads, int split) {
    if (size < kMax) items[size++] = LaunchConfig{threads, split};
  }
};

cudaError_t rms_norm(const kpdrRmsNormArgs& a, LaunchConfig cfg, cudaStream_t stream);
ConfigList rms_norm_candidates(const kpdrRmsNormArgs& a);

cudaError_t silu(const kpdrSiluArgs& a, LaunchConfig cfg, cudaStream_t stream);
ConfigList silu_candidates(const kpdrSiluArgs& a);

cudaError_t rope(const kpdrRopeArgs& a, LaunchConfig cfg, cudaStream_t stream);
ConfigList rope_candidates(const kpdrRopeArgs& a);

cudaError_t softmax(const kpdrSoftmaxArgs& a, LaunchConfig cfg, cudaStream_t stream);
ConfigList softmax_candidates(const kpdrSoftmaxArgs& a);

// Flash-decoding: splits of the cache length are reduced in float32 scratch
// memory of decode_attention_workspace_bytes(a, cfg) bytes (0 when one split
// suffices), which the caller allocates (e.g. from its caching allocator).
size_t decode_attention_workspace_bytes(const kpdrDecodeAttentionArgs& a, LaunchConfig cfg);
cudaError_t decode_attention(const kpdrDecodeAttentionArgs& a, LaunchConfig cfg, void* workspace,
                             cudaStream_t stream);
ConfigList decode_attention_candidates(const kpdrDecodeAttentionArgs& a);
// Whether the kernel supports this head_dim / layout (else the caller falls back).
bool decode_attention_supported(const kpdrDecodeAttentionArgs& a);

cudaError_t matmul_vec(const kpdrMatmulVecArgs& a, LaunchConfig cfg, cudaStream_t stream);
ConfigList matmul_vec_candidates(const kpdrMatmulVecArgs& a);

// ------------------------------------------------------------- build facts

// The architectures this library was compiled for ("sm_80, sm_90"), the nvcc
// version ("13.0"), and whether a device of compute capability major.minor
// can run its kernels.
std::string built_archs();
std::string nvcc_version();
bool built_for(int major, int minor);
int sm_count();  // of the current device

// ---------------------------------------------------------------- backward

// rms_norm backward over rows of `cols` (x, grad, dx contiguous rows):
//   dx = inv * (g*w - x * inv^2 * mean(g*w*x)),  inv = rsqrt(mean(x^2) + eps)
// and per-block partial sums of dweight = sum_rows g * x * inv into
// dw_partial [rms_norm_backward_blocks(a), cols] float32, which the caller
// sums over its first dimension.
struct RmsNormBackwardArgs {
  kpdrDtype dtype;
  int64_t rows, cols;
  const void* grad;
  const void* x;
  const void* weight;
  void* dx;
  float* dw_partial;
  float eps;
};
int rms_norm_backward_blocks(const RmsNormBackwardArgs& a);
cudaError_t rms_norm_backward(const RmsNormBackwardArgs& a, cudaStream_t stream);

// silu_and_mul backward: x rows of 2*cols (gate | up), grad rows of cols,
// dx rows of 2*cols (all contiguous):
//   dgate = g * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate))),  dup = g * silu(gate)
struct SiluAndMulBackwardArgs {
  kpdrDtype dtype;
  int64_t rows, cols;
  const void* grad;
  const void* x;
  void* dx;
};
cudaError_t silu_and_mul_backward(const SiluAndMulBackwardArgs& a, cudaStream_t stream);

}  // namespace kp::cuda

// kernel_pytorch's CPU kernel library: the kernels behind kernel_pytorch.ops.
//
// Torch-free (plain pointers, sizes and strides), so the same code serves the
// torch extension's CPU kernels and the reference device runtime
// (libmyasic.so), which runs them as its "device" kernels. Arguments are the
// kpdr kernel descriptors of csrc/runtime/kpdr.h; every pointer here is
// host-addressable memory.
//
// Each kernel is compiled once per CPU ISA level (generic, AVX2, AVX-512,
// AVX-512 with BF16 dot products) and
// the best level the CPU supports runs, like ATen's DispatchStub;
// KP_CPU_ISA=generic|avx2|avx512|avx512_bf16 forces a level (read once, at first use).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/kpdr.h"

namespace kp {

// kAvx512Bf16: AVX-512 plus the AVX512-BF16 dot products (bfloat16 attention).
// kAmx: that plus AMX tiles (AMX-TILE, AMX-BF16) for bfloat16 decode q.k; needs
// the kernel's permission for tile data (Linux 5.16+, asked for once).
enum class CpuIsa : int { kGeneric = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3, kAmx = 4 };

const char* isa_name(CpuIsa isa);
// The highest level this CPU and this build can run.
CpuIsa best_supported_isa();
// The level the kernels use now (KP_CPU_ISA, else the best supported).
CpuIsa active_isa();
// Switches the level ("generic", "avx2", "avx512", "avx512_bf16", "amx" or "auto"). Returns false and
// explains in *error when the name is unknown or the CPU cannot run it.
bool set_active_isa(const std::string& name, std::string* error);

// How kernels split work over threads: fn(begin, end) is called on disjoint
// ranges covering [begin, end), each at least `grain` long where possible.
// The default is the library's own thread pool (KP_NUM_THREADS threads, else
// one per hardware thread); the torch extension installs at::parallel_for so
// torch.set_num_threads governs its kernels.
using ParallelFor = void (*)(int64_t begin, int64_t end, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn);
void set_parallel_for(ParallelFor parallel_for);
// The library's pool (parallel.cpp): at most max_threads threads (and no more
// than it has: pool_threads(), from KP_NUM_THREADS or the hardware), pieces of
// at least `grain` claimed as threads become free, idle threads blocked. The
// caller never waits for a worker that has not started, so on a machine
// where other processes hold the cores a region costs at most what one
// thread would.
int pool_threads();
void pool_parallel_for(int64_t begin, int64_t end, int64_t grain, int max_threads,
                       const std::function<void(int64_t, int64_t)>& fn);
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);
// Runs pieces of the pool's region in progress on the calling thread, if it
// has pieces left; returns whether it did. For a thread that would otherwise
// sit waiting for that work: the simulated device's host thread waiting on a
// stream whose kernel is running on the pool.
bool help_parallel_region();

// Outputs of at least this many bytes per call are written with
// non-temporal (streaming) stores, which skip the read a cached store makes
// first but leave nothing in the cache. Default: the last-level cache size, or
// KP_STREAMING_STORES_MIN_BYTES; a negative value restores the default.
int64_t streaming_stores_min_bytes();
void set_streaming_stores_min_bytes(int64_t bytes);

// The kernels, `void name(const Args& args)` for each X(ns, name, Args) of
// this list (semantics in kpdr.h). Arguments are trusted: callers validate.
#define KP_CPU_KERNELS(X, ns)                        \
  X(ns, rms_norm, kpdrRmsNormArgs)                   \
  X(ns, silu, kpdrSiluArgs)                          \
  X(ns, rope, kpdrRopeArgs)                          \
  X(ns, softmax, kpdrSoftmaxArgs)                    \
  X(ns, decode_attention, kpdrDecodeAttentionArgs)   \
  X(ns, prefill_attention, kpdrPrefillAttentionArgs) \
  X(ns, matmul_vec, kpdrMatmulVecArgs)
#define KP_CPU_DECLARE_KERNEL(ns, name, Args) void name(const Args& args);
KP_CPU_KERNELS(KP_CPU_DECLARE_KERNEL, _)
// Core ops (kpdr.h's core-op section): one generic implementation, gemm.cpp.
void gemm(const kpdrGemmArgs& args);
// Generic pointwise and reduction entries (pointwise.cpp): any strides and
// dtypes, float math. pointwise_arity: the op code's input count, 0 if the
// code is unknown.
void pointwise(const kpdrPointwiseArgs& args);
void reduce(const kpdrReduceArgs& args);
int pointwise_arity(int32_t op);
// The softmax family over any dim, nll_loss, layer_norm, and reduce's
// ARGMAX/ARGMIN/VAR/STD and integer SUM (losses.cpp; reduce() passes those on).
void softmax_dim(const kpdrSoftmaxDimArgs& args);
void nll_loss(const kpdrNllLossArgs& args);
void layer_norm(const kpdrLayerNormArgs& args);
void reduce_statistics(const kpdrReduceArgs& args);
// Convolution's columns and max pooling (conv.cpp): gathers over any strides.
void im2col(const kpdrIm2colArgs& args);
void max_pool2d(const kpdrMaxPool2dArgs& args);
// Whether the call computes in integer arithmetic (kpdr.h: every operand it
// reads INT64, INT32 or BOOL), and whether its op takes that arithmetic (and
// its rank, for TRIL/TRIU).
bool pointwise_integer(const kpdrPointwiseArgs& args);
bool pointwise_supported(const kpdrPointwiseArgs& args);
// Gather and scatter (kpdrIndexArgs, indexing.cpp); `error` resolved to host
// memory. Scatter runs serially, so accumulation is deterministic.
void gather(const kpdrIndexArgs& args);
void scatter(const kpdrIndexArgs& args);
// Random fills (kpdrRandomArgs, random.cpp): Philox4x32-10 per element, in
// parallel; the distribution and dtype checked by the caller.
void random_fill(const kpdrRandomArgs& args);
// Sorting along one dimension (kpdrSortArgs, sort.cpp): slices in parallel,
// each through std::sort / std::partial_sort of (value, position) pairs.
void sort(const kpdrSortArgs& args);
// Scans (kpdrScanArgs, scan.cpp): lines in parallel, each serially; float
// in double, integer in exact int64. scan_integer: the call's arithmetic.
void scan(const kpdrScanArgs& args);
bool scan_integer(const kpdrScanArgs& args);

}  // namespace kp

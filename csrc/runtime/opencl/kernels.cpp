// kpdrGetKernels of the OpenCL runtime: each entry translates the device
// pointers of its descriptor to (cl_mem, byte offset) pairs, sets the
// kernel's arguments and enqueues it on the stream's command queue, in order
// with the stream's copies.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "conv.h"
#include "errors.h"
#include "gemm.h"
#include "kernel_cache.h"
#include "kpdr.h"
#include "losses.h"
#include "indexing.h"
#include "random.h"
#include "sort.h"
#include "scan.h"
#include "pointwise.h"
#include "runtime.h"

using kpdr_opencl::fail;
using kpdr_opencl::Runtime;

namespace {

// The arguments of one launch, collected before the kernel's lock is taken.
class Launch {
 public:
  Launch(const char* api) : api_(api) {}

  kpdrError_t begin(kpdrStream_t handle, int dtype) {
    if (kpdrError_t error = Runtime::acquire(&runtime_)) return error;
    if (handle == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": stream is NULL");
    stream_ = runtime_->streams().find(handle);
    if (stream_ == nullptr) {
      return fail(KPDR_ERROR_INVALID_HANDLE, std::string(api_) + ": unknown stream handle");
    }
    if (dtype != KPDR_DTYPE_FLOAT32 && dtype != KPDR_DTYPE_FLOAT16 && dtype != KPDR_DTYPE_BFLOAT16) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": unknown kpdrDtype " + std::to_string(dtype));
    }
    dtype_ = static_cast<kpdrDtype>(dtype);
    handle_ = handle;
    return KPDR_SUCCESS;
  }

  // A tensor argument: its buffer and byte offset (two kernel arguments). A
  // NULL optional pointer passes the first buffer (the kernel ignores it).
  kpdrError_t tensor(const void* ptr, const char* name, bool optional = false) {
    if (ptr == nullptr) {
      if (!optional || holders_.empty()) {
        return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": " + name + " is NULL");
      }
      add_mem(holders_.front()->mem, 0);
      return KPDR_SUCCESS;
    }
    kpdr_opencl::DeviceRange range;
    if (!runtime_->device_memory().find(ptr, &range)) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": " + name +
                                                " is not device memory of this runtime");
    }
    if (range.allocation->device != stream_->device()) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  std::string(api_) + ": " + name + " lives on device " +
                      std::to_string(range.allocation->device) + " but the stream belongs to device " +
                      std::to_string(stream_->device()));
    }
    add_mem(range.allocation->mem, range.offset);
    holders_.push_back(range.allocation);
    return KPDR_SUCCESS;
  }
  // A buffer of the runtime's own (scratch), passed as (cl_mem, offset 0).
  void mem(kpdr_opencl::cl_mem m) { add_mem(m, 0); }
  // Scratch memory for this launch and the ones enqueued after it on the same
  // stream before this Launch goes: the stream's kept workspace when it is
  // large enough, else a new buffer that replaces it afterwards.
  kpdrError_t workspace(size_t bytes, kpdr_opencl::cl_mem* out) {
    *out = stream_->borrow_workspace(bytes);
    if (*out == nullptr) {
      cl_int status = CL_SUCCESS;
      *out = runtime_->cl().CreateBuffer(runtime_->context(), kpdr_opencl::CL_MEM_READ_WRITE, bytes, nullptr, &status);
      if (*out == nullptr || status != CL_SUCCESS) {
        *out = nullptr;
        return fail(KPDR_ERROR_OUT_OF_MEMORY, std::string(api_) + ": a scratch buffer of " +
                                                  kpdr_opencl::bytes_text(bytes) + " failed (" +
                                                  kpdr_opencl::cl_error_name(status) + ")");
      }
    }
    workspace_ = *out;
    workspace_bytes_ = bytes;
    return KPDR_SUCCESS;
  }
  // The stream this launch runs on.
  kpdrStream_t stream_handle() const { return handle_; }
  kpdrDtype dtype() const { return dtype_; }
  const char* api() const { return api_; }
  int compute_units() const { return runtime_->device(stream_->device()).compute_units; }
  ~Launch() {
    if (workspace_ != nullptr) stream_->return_workspace(workspace_, workspace_bytes_);
  }
  void i64(int64_t v) { add(&v, sizeof(v)); }
  void i32(int32_t v) { add(&v, sizeof(v)); }
  void f32(float v) { add(&v, sizeof(v)); }

  // Enqueues `name` over `dims` dimensions; `local` NULL lets the driver choose.
  kpdrError_t run(const char* name, unsigned dims, const size_t* global, const size_t* local) {
    for (unsigned i = 0; i < dims; ++i) {
      if (global[i] == 0) return KPDR_SUCCESS;  // empty tensor: nothing to do
    }
    kpdr_opencl::Kernel* kernel = nullptr;
    if (kpdrError_t error = runtime_->kernels().get(stream_->device(), dtype_, name, &kernel)) {
      return error;
    }
    const kpdr_opencl::ClApi& cl = runtime_->cl();
    std::lock_guard<std::mutex> lock(kernel->mutex);
    size_t failed = 0;
    if (const cl_int status = args_.set_on(cl, *kernel, &failed)) {
      return fail(KPDR_ERROR_UNKNOWN, std::string(api_) + ": clSetKernelArg(" + std::to_string(failed) +
                                          ") failed with " + kpdr_opencl::cl_error_name(status));
    }
    return stream_->submit(api_, [&](kpdr_opencl::cl_command_queue queue, kpdr_opencl::cl_event* done) {
      return cl.EnqueueNDRangeKernel(queue, kernel->kernel, dims, nullptr, global, local, 0, nullptr, done);
    });
  }

  size_t wg() const { return wg_; }
  // Whether the program has warp shuffles (KP_SHFL), after fetch_work_group.
  bool shuffles() const { return shuffles_; }
  // The work-group size the device's programs were built with (every program has kp_silu).
  kpdrError_t fetch_work_group() {
    kpdr_opencl::Kernel* kernel = nullptr;
    if (kpdrError_t error = runtime_->kernels().get(stream_->device(), dtype_, "kp_silu", &kernel)) return error;
    wg_ = kernel->work_group;
    shuffles_ = kernel->shuffles;
    return KPDR_SUCCESS;
  }

 private:
  using cl_int = kpdr_opencl::cl_int;
  static constexpr cl_int CL_SUCCESS = kpdr_opencl::CL_SUCCESS;
  void add(const void* value, size_t size) { args_.add(value, size); }
  void add_mem(kpdr_opencl::cl_mem mem, size_t offset) {
    args_.add(&mem, sizeof(mem), /*buffer=*/true);
    const uint64_t off = offset;
    add(&off, sizeof(off));
  }

  const char* api_;
  Runtime* runtime_ = nullptr;
  std::shared_ptr<kpdr_opencl::Stream> stream_;
  kpdrDtype dtype_ = KPDR_DTYPE_FLOAT32;
  kpdr_opencl::KernelArgs args_;
  std::vector<std::shared_ptr<kpdr_opencl::Allocation>> holders_;  // alive until enqueued
  kpdrStream_t handle_ = nullptr;
  kpdr_opencl::cl_mem workspace_ = nullptr;  // lent by the stream until this Launch goes
  size_t workspace_bytes_ = 0;
  size_t wg_ = 0;
  bool shuffles_ = false;
};

template <typename Body>
kpdrError_t guarded(const char* api, Body&& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string(api) + ": internal error: " + error.what());
  }
}

#define KP_TRY(call) \
  if (kpdrError_t kp_error = (call)) return kp_error

// Every entry: C++ exceptions become errors, the descriptor must exist and its
// stream and dtype are checked; `body(launch)` then adds the arguments and
// enqueues.
template <typename Args, typename Body>
kpdrError_t entry(const char* api, const Args* a, kpdrStream_t stream, Body&& body) {
  return guarded(api, [&] {
    if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": args is NULL");
    Launch l(api);
    KP_TRY(l.begin(stream, a->dtype));
    return body(l);
  });
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One work-group per row (the kernel is declared with reqd_work_group_size(WG)).
kpdrError_t run_rows(Launch& l, const char* kernel, int64_t rows) {
  KP_TRY(l.fetch_work_group());
  const size_t global = static_cast<size_t>(rows) * l.wg(), local = l.wg();
  return l.run(kernel, 1, &global, &local);
}

kpdrError_t rms_norm(const kpdrRmsNormArgs* a, kpdrStream_t stream) {
  return entry("rms_norm", a, stream, [&](Launch& l) {
    const bool residual = a->residual != nullptr;
    l.i64(a->cols);
    KP_TRY(l.tensor(a->x, "x")); l.i64(a->x_row_stride);
    KP_TRY(l.tensor(a->residual, "residual", true)); l.i64(a->residual_row_stride);
    KP_TRY(l.tensor(a->weight, "weight"));
    KP_TRY(l.tensor(a->out, "out")); l.i64(a->out_row_stride);
    KP_TRY(l.tensor(a->residual_out, "residual_out", !residual)); l.i64(a->residual_out_row_stride);
    l.f32(a->eps);
    KP_TRY(l.tensor(a->rstd, "rstd", true));
    l.i32(residual ? 1 : 0);
    l.i32(a->rstd != nullptr ? 1 : 0);
    return run_rows(l, "kp_rms_norm", a->rows);
  });
}

kpdrError_t silu(const kpdrSiluArgs* a, kpdrStream_t stream) {
  return entry("silu", a, stream, [&](Launch& l) {
    l.i64(a->cols);
    KP_TRY(l.tensor(a->x, "x")); l.i64(a->x_row_stride);
    KP_TRY(l.tensor(a->out, "out")); l.i64(a->out_row_stride);
    l.i32(a->gated);
    KP_TRY(l.fetch_work_group());
    const size_t quads = (static_cast<size_t>(a->cols) + 3) / 4;  // 4 elements per work-item
    const size_t global[2] = {round_up(quads, l.wg()), static_cast<size_t>(a->rows)};
    const size_t local[2] = {l.wg(), 1};
    return l.run("kp_silu", 2, global, local);
  });
}

kpdrError_t rope(const kpdrRopeArgs* a, kpdrStream_t stream) {
  return entry("rope", a, stream, [&](Launch& l) {
    if (a->cs_dtype < KPDR_DTYPE_FLOAT32 || a->cs_dtype > KPDR_DTYPE_BFLOAT16) {
      return fail(KPDR_ERROR_INVALID_VALUE, "rope: unknown cs_dtype");
    }
    l.i64(a->seq); l.i64(a->heads); l.i64(a->head_dim);
    KP_TRY(l.tensor(a->x, "x")); l.i64(a->x_stride[0]); l.i64(a->x_stride[1]); l.i64(a->x_stride[2]);
    KP_TRY(l.tensor(a->out, "out")); l.i64(a->out_stride[0]); l.i64(a->out_stride[1]); l.i64(a->out_stride[2]);
    KP_TRY(l.tensor(a->cos, "cos"));
    KP_TRY(l.tensor(a->sin, "sin"));
    l.i32(a->cs_dtype);
    l.i64(a->cs_batch_stride); l.i64(a->cs_seq_stride);
    l.i32(a->interleaved); l.i32(a->inverse);
    KP_TRY(l.fetch_work_group());
    // (head x group of 4 rotation pairs, position, batch); the first
    // dimension's work-group no wider than a position needs.
    const size_t per_position = static_cast<size_t>(a->heads) * ((a->head_dim / 2 + 3) / 4);
    if (per_position > UINT32_MAX) return fail(KPDR_ERROR_NOT_SUPPORTED, "rope: more than 2^32 rotation groups per position");
    size_t local0 = 1;
    while (local0 < l.wg() && local0 < per_position) local0 *= 2;
    const size_t global[3] = {round_up(per_position, local0), static_cast<size_t>(a->seq), static_cast<size_t>(a->batch)};
    const size_t local[3] = {local0, 1, 1};
    return l.run("kp_rope", 3, global, local);
  });
}

kpdrError_t softmax(const kpdrSoftmaxArgs* a, kpdrStream_t stream) {
  return entry("softmax", a, stream, [&](Launch& l) {
    l.i64(a->cols);
    KP_TRY(l.tensor(a->x, "x")); l.i64(a->x_row_stride);
    KP_TRY(l.tensor(a->out, "out")); l.i64(a->out_row_stride);
    return run_rows(l, "kp_softmax", a->rows);
  });
}

// Decode and prefill attention as one problem: `seq_q` query rows per (batch,
// head) against `seq_kv` keys (decode: one row, the cache, optional lengths).
struct Attention {
  int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  const void *q, *k, *v, *out, *lengths;
  int64_t q_stride[3], k_stride[3], v_stride[3], out_stride[3];  // (batch, head, row or position)
  float scale;
  int causal;
};

// Splits each row's keys (flash decoding) until there are about eight
// work-groups per compute unit, in chunks of at least `min_chunk` keys (a
// multiple of `block`); kp_attention_combine merges the splits.
void split_keys(const Launch& l, const Attention& p, int64_t groups, int64_t min_chunk, int64_t block,
                int64_t* splits, int64_t* chunk) {
  const int64_t target = 8 * static_cast<int64_t>(l.compute_units());
  *splits = std::max<int64_t>(1, std::min<int64_t>((target + groups - 1) / groups, (p.seq_kv + min_chunk - 1) / min_chunk));
  *chunk = static_cast<int64_t>(round_up(std::max<int64_t>(1, (p.seq_kv + *splits - 1) / *splits), block));
  *splits = std::max<int64_t>(1, (p.seq_kv + *chunk - 1) / *chunk);
}

// kp_attention_combine: merges `splits` partial results per (batch, head, row) from `part` into out
// (base2: the partial maxima are base-2 logarithms, as kp_decode_attention_gqa writes them).
kpdrError_t combine_splits(const Launch& first, const Attention& p, int64_t splits, kpdr_opencl::cl_mem part,
                           bool base2) {
  Launch combine(first.api());
  KP_TRY(combine.begin(first.stream_handle(), first.dtype()));
  combine.i64(p.heads); combine.i64(p.head_dim); combine.i64(splits);
  combine.mem(part);
  KP_TRY(combine.tensor(p.out, "out")); combine.i64(p.out_stride[0]); combine.i64(p.out_stride[1]);
  combine.i64(p.seq_q); combine.i64(p.out_stride[2]);
  combine.i32(base2 ? 1 : 0);
  return run_rows(combine, "kp_attention_combine", p.batch * p.heads * p.seq_q);
}

// kp_decode_attention_gqa applies: d / 8 >= 2 work-items per key row (d % 8
// == 0) and rows of k and v that are 4-element aligned (strides and buffers).
bool split_kernel_applies(const Attention& p, kpdrDtype dtype) {
  const uintptr_t vector_bytes = 4 * (dtype == KPDR_DTYPE_FLOAT32 ? 4 : 2);
  return p.head_dim % 8 == 0 && p.head_dim >= 16 && (p.k_stride[0] | p.k_stride[1] | p.k_stride[2]) % 4 == 0 &&
         (p.v_stride[0] | p.v_stride[1] | p.v_stride[2]) % 4 == 0 &&
         (reinterpret_cast<uintptr_t>(p.k) | reinterpret_cast<uintptr_t>(p.v)) % vector_bytes == 0;
}

// The split-K kernel: one work-group per (batch, kv head, up to 4 of its
// query heads, row, split of the keys), then the merge.
kpdrError_t split_attention(Launch& l, const Attention& p) {
  constexpr int64_t kMaxGroup = 4;  // KP_MAXG in the kernel
  const int64_t keys_per_item = l.dtype() == KPDR_DTYPE_FLOAT32 ? 2 : 4;  // KP_KPT
  const int64_t wg = static_cast<int64_t>(l.wg());
  const int64_t head_chunks = (p.heads / p.kv_heads + kMaxGroup - 1) / kMaxGroup;
  const int64_t groups = p.batch * p.kv_heads * head_chunks * p.seq_q;
  const int64_t block = (wg / (p.head_dim / 8)) * keys_per_item;  // keys per loop step
  int64_t splits = 1, chunk = 1;
  // One wave: at most one work-group per compute unit (the H100 holds one of
  // these at a time: 190 registers a work-item), so no unit waits for a
  // second round while the others idle, and no more splits (partial results
  // and their merge) than filling the device needs. Measured there: 1.1-1.25x
  // faster than rounding up into a second wave, 1.3-1.8x faster than eight
  // work-groups per unit; batch 16 (128 groups) needs no merge at all.
  constexpr int64_t kMinChunk = 256;  // keys per split at least
  const int64_t units = static_cast<int64_t>(l.compute_units());
  splits = std::max<int64_t>(1, std::min<int64_t>(units / groups, (p.seq_kv + kMinChunk - 1) / kMinChunk));
  chunk = static_cast<int64_t>(round_up(static_cast<size_t>((p.seq_kv + splits - 1) / splits), block));
  splits = std::max<int64_t>(1, (p.seq_kv + chunk - 1) / chunk);
  kpdr_opencl::cl_mem part = nullptr;  // with one split the kernel writes out itself
  if (splits > 1) {
    KP_TRY(l.workspace(static_cast<size_t>(p.batch * p.heads * p.seq_q * splits * (p.head_dim + 2)) * sizeof(float), &part));
  }
  l.i64(p.heads); l.i64(p.kv_heads); l.i64(p.seq_kv); l.i64(p.head_dim);
  KP_TRY(l.tensor(p.q, "q")); l.i64(p.q_stride[0]); l.i64(p.q_stride[1]);
  KP_TRY(l.tensor(p.k, "k")); l.i64(p.k_stride[0]); l.i64(p.k_stride[1]); l.i64(p.k_stride[2]);
  KP_TRY(l.tensor(p.v, "v")); l.i64(p.v_stride[0]); l.i64(p.v_stride[1]); l.i64(p.v_stride[2]);
  KP_TRY(l.tensor(p.lengths, "lengths", true)); l.i32(p.lengths != nullptr ? 1 : 0);
  l.f32(p.scale);
  if (part != nullptr) l.mem(part); else KP_TRY(l.tensor(p.out, "out"));
  l.i64(splits); l.i64(chunk); l.i64(head_chunks);
  l.i64(p.seq_q); l.i64(p.q_stride[2]); l.i32(p.causal); l.i64(p.seq_kv - p.seq_q);
  KP_TRY(l.tensor(p.out, "out")); l.i64(p.out_stride[0]); l.i64(p.out_stride[1]); l.i64(p.out_stride[2]);
  const size_t global[2] = {static_cast<size_t>(groups * wg), static_cast<size_t>(splits)};
  const size_t local[2] = {l.wg(), 1};
  // Warp shuffles sum a team of d / 8 work-items inside a warp: a power of two up to 32.
  const int64_t team = p.head_dim / 8;
  const bool shuffle = l.shuffles() && (team & (team - 1)) == 0 && team <= 32;
  KP_TRY(l.run(shuffle ? "kp_decode_attention_shfl" : "kp_decode_attention_gqa", 2, global, local));
  return splits == 1 ? KPDR_SUCCESS : combine_splits(l, p, splits, part, true);
}

// head_dim up to the work-group size, whole groups of query heads per kv head.
kpdrError_t attention_supported(Launch& l, const char* api, int64_t head_dim, int64_t heads, int64_t kv_heads) {
  KP_TRY(l.fetch_work_group());
  if (head_dim > static_cast<int64_t>(l.wg()) || kv_heads <= 0 || heads % kv_heads != 0) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": head_dim " + std::to_string(head_dim) +
                                              " exceeds the OpenCL work-group size " + std::to_string(l.wg()));
  }
  return KPDR_SUCCESS;
}

kpdrError_t decode_attention(const kpdrDecodeAttentionArgs* a, kpdrStream_t stream) {
  return entry("decode_attention", a, stream, [&](Launch& l) {
    KP_TRY(attention_supported(l, "decode_attention", a->head_dim, a->heads, a->kv_heads));
    if (a->batch * a->heads == 0) return KPDR_SUCCESS;
    const Attention p{a->batch, a->heads, a->kv_heads, 1, a->cache_len, a->head_dim,
                      a->q, a->k, a->v, a->out, a->lengths,
                      {a->q_stride[0], a->q_stride[1], 0}, {a->k_stride[0], a->k_stride[1], a->k_stride[2]},
                      {a->v_stride[0], a->v_stride[1], a->v_stride[2]}, {a->out_stride[0], a->out_stride[1], 0},
                      a->scale, 0};
    if (split_kernel_applies(p, l.dtype())) return split_attention(l, p);
    // Any head_dim and alignment: one work-group per (batch, head, split).
    const int64_t rows = a->batch * a->heads;
    int64_t splits = 1, chunk = 1;
    split_keys(l, p, rows, 256, 1, &splits, &chunk);
    kpdr_opencl::cl_mem part = nullptr;
    if (splits > 1) KP_TRY(l.workspace(static_cast<size_t>(rows * splits * (a->head_dim + 2)) * sizeof(float), &part));
    l.i64(a->heads); l.i64(a->kv_heads); l.i64(a->cache_len); l.i64(a->head_dim);
    KP_TRY(l.tensor(a->q, "q")); l.i64(a->q_stride[0]); l.i64(a->q_stride[1]);
    KP_TRY(l.tensor(a->k, "k")); l.i64(a->k_stride[0]); l.i64(a->k_stride[1]); l.i64(a->k_stride[2]);
    KP_TRY(l.tensor(a->v, "v")); l.i64(a->v_stride[0]); l.i64(a->v_stride[1]); l.i64(a->v_stride[2]);
    KP_TRY(l.tensor(a->lengths, "lengths", true)); l.i32(a->lengths != nullptr ? 1 : 0);
    KP_TRY(l.tensor(a->out, "out")); l.i64(a->out_stride[0]); l.i64(a->out_stride[1]);
    l.f32(a->scale);
    if (part != nullptr) l.mem(part); else KP_TRY(l.tensor(a->out, "out"));  // unused with one split
    l.i64(splits); l.i64(chunk);
    const size_t global[2] = {static_cast<size_t>(rows) * l.wg(), static_cast<size_t>(splits)};
    const size_t local[2] = {l.wg(), 1};
    KP_TRY(l.run("kp_decode_attention", 2, global, local));
    if (splits == 1) return KPDR_SUCCESS;
    return combine_splits(l, p, splits, part, false);
  });
}

kpdrError_t prefill_attention(const kpdrPrefillAttentionArgs* a, kpdrStream_t stream) {
  return entry("prefill_attention", a, stream, [&](Launch& l) {
    KP_TRY(attention_supported(l, "prefill_attention", a->head_dim, a->heads, a->kv_heads));
    const Attention p{a->batch, a->heads, a->kv_heads, a->seq_q, a->seq_kv, a->head_dim,
                      a->q, a->k, a->v, a->out, nullptr,
                      {a->q_stride[0], a->q_stride[1], a->q_stride[2]}, {a->k_stride[0], a->k_stride[1], a->k_stride[2]},
                      {a->v_stride[0], a->v_stride[1], a->v_stride[2]},
                      {a->out_stride[0], a->out_stride[1], a->out_stride[2]}, a->scale, a->causal};
    if (a->batch * a->heads * a->seq_q == 0) return KPDR_SUCCESS;
    if (split_kernel_applies(p, l.dtype())) return split_attention(l, p);
    // Any head_dim and alignment: one work-group per query row.
    l.i64(a->heads); l.i64(a->kv_heads); l.i64(a->seq_q); l.i64(a->seq_kv); l.i64(a->head_dim);
    KP_TRY(l.tensor(a->q, "q")); l.i64(a->q_stride[0]); l.i64(a->q_stride[1]); l.i64(a->q_stride[2]);
    KP_TRY(l.tensor(a->k, "k")); l.i64(a->k_stride[0]); l.i64(a->k_stride[1]); l.i64(a->k_stride[2]);
    KP_TRY(l.tensor(a->v, "v")); l.i64(a->v_stride[0]); l.i64(a->v_stride[1]); l.i64(a->v_stride[2]);
    KP_TRY(l.tensor(a->out, "out")); l.i64(a->out_stride[0]); l.i64(a->out_stride[1]); l.i64(a->out_stride[2]);
    l.f32(a->scale); l.i32(a->causal);
    return run_rows(l, "kp_prefill_attention", a->batch * a->heads * a->seq_q);
  });
}

kpdrError_t matmul_vec(const kpdrMatmulVecArgs* a, kpdrStream_t stream) {
  return entry("matmul_vec", a, stream, [&](Launch& l) {
    l.i64(a->k);
    KP_TRY(l.tensor(a->w, "w")); l.i64(a->w_row_stride);
    KP_TRY(l.tensor(a->x, "x"));
    KP_TRY(l.tensor(a->out, "out"));
    return run_rows(l, "kp_matmul_vec", a->n);
  });
}

#undef KP_TRY

}  // namespace

extern "C" KPDR_API kpdrError_t kpdrGetKernels(kpdrKernelTable* table) {
  if (table == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "kpdrGetKernels: table is NULL");
  kpdrKernelTable ours{};
  ours.struct_size = sizeof(kpdrKernelTable);
  Runtime* runtime = Runtime::get_if_initialized();
  // kernels=0 (MY_ASIC_OPENCL_KERNELS=0): no entries, every op through the CPU fallback.
  if (runtime == nullptr || runtime->options().kernels) {
    ours.rms_norm = &rms_norm;
    ours.silu = &silu;
    ours.rope = &rope;
    ours.softmax = &softmax;
    ours.decode_attention = &decode_attention;
    ours.prefill_attention = &prefill_attention;
    ours.matmul_vec = &matmul_vec;
    ours.gemm = &kpdr_opencl::gemm;
    ours.pointwise = &kpdr_opencl::pointwise;
    ours.reduce = &kpdr_opencl::reduce;
    ours.softmax_dim = &kpdr_opencl::softmax_dim;
    ours.nll_loss = &kpdr_opencl::nll_loss;
    ours.layer_norm = &kpdr_opencl::layer_norm;
    ours.im2col = &kpdr_opencl::im2col;
    ours.max_pool2d = &kpdr_opencl::max_pool2d;
    ours.gather = &kpdr_opencl::gather;  // indexing.cpp
    ours.scatter = &kpdr_opencl::scatter;
    ours.random = &kpdr_opencl::random_fill;  // random.cpp
    ours.sort = &kpdr_opencl::sort;  // sort.cpp
    ours.scan = &kpdr_opencl::scan;
  }
  const size_t size = table->struct_size < sizeof(ours) ? table->struct_size : sizeof(ours);
  std::memcpy(static_cast<void*>(table), &ours, size);
  table->struct_size = static_cast<uint32_t>(size);
  return KPDR_SUCCESS;
}

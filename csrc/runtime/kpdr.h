/*
 * kpdr.h — the kernel_pytorch Device Runtime ABI.
 *
 * This is the whole contract between kernel_pytorch's PyTorch integration
 * (csrc/core) and a chip vendor's runtime. A vendor ships a shared library
 * exporting these C symbols; kernel_pytorch loads it with dlopen and never
 * talks to the hardware any other way.
 *
 * Conventions
 *  - Every call returns kpdrError_t; KPDR_SUCCESS is 0. On failure the
 *    runtime should leave a human readable detail for the calling thread in
 *    kpdrGetLastErrorMessage() (e.g. "requested 2.0 GiB, 1.5 GiB free").
 *  - Devices are numbered 0 .. count-1. All device work is asynchronous and
 *    goes through streams; a stream executes its work in submission order.
 *  - Every call is thread safe. No call may call back into Python.
 *  - The runtime is initialised once with kpdrInit(); every other call except
 *    kpdrGetAbiVersion, kpdrGetErrorString and kpdrGetLastErrorMessage
 *    returns KPDR_ERROR_NOT_INITIALIZED before that.
 */
#ifndef KPDR_H_
#define KPDR_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change; the loader refuses other versions. */
#define KPDR_ABI_VERSION 1

#if defined(_WIN32)
#define KPDR_API __declspec(dllexport)
#else
#define KPDR_API __attribute__((visibility("default")))
#endif

typedef enum kpdrError {
  KPDR_SUCCESS = 0,
  KPDR_ERROR_INVALID_VALUE = 1,     /* bad argument (null pointer, bad kind) */
  KPDR_ERROR_INVALID_DEVICE = 2,    /* device index out of range */
  KPDR_ERROR_OUT_OF_MEMORY = 3,     /* device capacity, or the memory backing it, exhausted: the message says which */
  KPDR_ERROR_NOT_READY = 4,         /* stream/event query: work still pending */
  KPDR_ERROR_NOT_INITIALIZED = 5,   /* kpdrInit has not succeeded yet */
  KPDR_ERROR_ALREADY_INITIALIZED = 6, /* kpdrInit called a second time */
  KPDR_ERROR_INVALID_HANDLE = 7,    /* unknown pointer, stream or event */
  KPDR_ERROR_NOT_SUPPORTED = 8,     /* optional feature absent (a kernel for this dtype) */
  KPDR_ERROR_UNKNOWN = 999
} kpdrError_t;

typedef enum kpdrMemcpyKind {
  KPDR_MEMCPY_HOST_TO_DEVICE = 1,
  KPDR_MEMCPY_DEVICE_TO_HOST = 2,
  KPDR_MEMCPY_DEVICE_TO_DEVICE = 3 /* same or different devices */
} kpdrMemcpyKind;

/* Event creation flags. */
#define KPDR_EVENT_DEFAULT 0u
#define KPDR_EVENT_DISABLE_TIMING 1u

typedef struct kpdrStream_st* kpdrStream_t;
typedef struct kpdrEvent_st* kpdrEvent_t;

typedef struct kpdrDeviceProperties {
  char name[256];
  uint64_t total_memory;    /* bytes of device memory (the enforced capacity) */
  int32_t compute_units;    /* cores / SMs / CUs, whatever the chip calls them */
  int32_t host_addressable; /* 1: device pointers may be read and written by
                               host code directly (kernel_pytorch then runs CPU
                               kernels in place); 0: only through kpdrMemcpy* */
  int32_t reserved[16];     /* zero; room for growth without an ABI bump */
} kpdrDeviceProperties;

/* --- version, initialisation, errors ----------------------------------- */
KPDR_API uint32_t kpdrGetAbiVersion(void);
/* options: "key=value" pairs separated by ';' (may be NULL or ""). Keys a
 * runtime does not know are ignored. The reference runtime understands
 * device_count, memory_mb, names (comma separated), host_addressable,
 * compute_units and copy_bandwidth_gbps (docs/device_runtime_abi.md). */
KPDR_API kpdrError_t kpdrInit(const char* options);
KPDR_API const char* kpdrGetErrorString(kpdrError_t error);
KPDR_API const char* kpdrGetLastErrorMessage(void);

/* --- devices ------------------------------------------------------------- */
KPDR_API kpdrError_t kpdrGetDeviceCount(int* count);
KPDR_API kpdrError_t kpdrGetDeviceProperties(int device, kpdrDeviceProperties* props);
/* Waits for all work on every stream of the device. */
KPDR_API kpdrError_t kpdrDeviceSynchronize(int device);
KPDR_API kpdrError_t kpdrMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes);

/* --- memory -------------------------------------------------------------- */
KPDR_API kpdrError_t kpdrMalloc(int device, void** ptr, size_t size);
KPDR_API kpdrError_t kpdrFree(int device, void* ptr);
/* Page-locked host memory: usable as the host side of an async copy. */
KPDR_API kpdrError_t kpdrMallocHost(void** ptr, size_t size);
KPDR_API kpdrError_t kpdrFreeHost(void* ptr);
/* Which device owns ptr (any address inside an allocation); -1 for memory
 * from kpdrMallocHost; KPDR_ERROR_INVALID_HANDLE for unknown memory. */
KPDR_API kpdrError_t kpdrPointerGetDevice(const void* ptr, int* device);
/* Enqueues a copy on stream. For DEVICE_TO_DEVICE across devices, stream
 * belongs to either device. Host memory not from kpdrMallocHost must stay
 * valid until the stream has finished the copy. */
KPDR_API kpdrError_t kpdrMemcpyAsync(void* dst, const void* src, size_t size,
                                     kpdrMemcpyKind kind, kpdrStream_t stream);

/* --- streams ------------------------------------------------------------- */
/* priority: 0 is the default, lower numbers are higher priority. */
KPDR_API kpdrError_t kpdrStreamCreate(int device, int priority, kpdrStream_t* stream);
KPDR_API kpdrError_t kpdrStreamDestroy(kpdrStream_t stream);
KPDR_API kpdrError_t kpdrStreamSynchronize(kpdrStream_t stream);
/* KPDR_SUCCESS when all submitted work is done, else KPDR_ERROR_NOT_READY. */
KPDR_API kpdrError_t kpdrStreamQuery(kpdrStream_t stream);
/* Work submitted to stream after this call waits until event completes. */
KPDR_API kpdrError_t kpdrStreamWaitEvent(kpdrStream_t stream, kpdrEvent_t event);

/* --- events -------------------------------------------------------------- */
KPDR_API kpdrError_t kpdrEventCreate(int device, unsigned int flags, kpdrEvent_t* event);
KPDR_API kpdrError_t kpdrEventDestroy(kpdrEvent_t event);
/* Captures the work submitted to stream so far; the event completes (and
 * takes its timestamp) when that work is done. Re-recording is allowed. */
KPDR_API kpdrError_t kpdrEventRecord(kpdrEvent_t event, kpdrStream_t stream);
/* KPDR_SUCCESS when complete (or never recorded), else KPDR_ERROR_NOT_READY. */
KPDR_API kpdrError_t kpdrEventQuery(kpdrEvent_t event);
KPDR_API kpdrError_t kpdrEventSynchronize(kpdrEvent_t event);
/* Milliseconds between two completed events created without
 * KPDR_EVENT_DISABLE_TIMING. */
KPDR_API kpdrError_t kpdrEventElapsedTime(float* ms, kpdrEvent_t start, kpdrEvent_t end);

/* --- optional: compute kernels ------------------------------------------
 *
 * A runtime that brings its own kernels exports kpdrGetKernels. It is
 * optional: kernel_pytorch looks it up with dlsym, and an op whose entry is
 * missing (no kpdrGetKernels, or a NULL entry) runs through kernel_pytorch's
 * CPU fallback instead, which fallback_stats() counts.
 *
 * Kernel conventions
 *  - Every pointer is device memory of the stream's device (the caller has
 *    checked devices, shapes and dtypes). Sizes and strides are in elements,
 *    not bytes. The innermost dimension of every tensor argument is
 *    contiguous (stride 1); the other strides are given (pointwise, reduce,
 *    softmax_dim, nll_loss and scan take any strides).
 *  - A launch only enqueues: it returns once the arguments are validated and
 *    the work is queued on `stream`, which runs it in order with the stream's
 *    copies. The argument struct may be freed when the launch returns.
 *  - Inputs and outputs never overlap unless an entry says so. Arithmetic
 *    accumulates in float32 whatever the storage dtype.
 *  - A kernel that cannot handle a call (a dtype the chip lacks, say)
 *    returns KPDR_ERROR_NOT_SUPPORTED without enqueuing anything; that call
 *    then runs through the CPU fallback. Any other error is raised to Python.
 */

typedef enum kpdrDtype {
  KPDR_DTYPE_FLOAT32 = 0,
  KPDR_DTYPE_FLOAT16 = 1,
  KPDR_DTYPE_BFLOAT16 = 2,
  KPDR_DTYPE_BOOL = 3,     /* one byte, 0 or 1: pointwise/reduce operands only */
  /* Integers (appended; core-op entries only): indices, targets, counters.
   * An entry computes on them in integer arithmetic where its text says so;
   * a runtime answers a dtype it does not take with KPDR_ERROR_NOT_SUPPORTED. */
  KPDR_DTYPE_INT64 = 4,
  KPDR_DTYPE_INT32 = 5
} kpdrDtype;

/* out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight over rows of `cols`.
 * With residual != NULL (fused_add_rms_norm): s = x[r] + residual[r] is
 * written to residual_out[r] (rounded to dtype) and normalised instead. */
typedef struct kpdrRmsNormArgs {
  kpdrDtype dtype;
  int64_t rows, cols;
  const void* x;           int64_t x_row_stride;
  const void* residual;    int64_t residual_row_stride;     /* may be NULL */
  const void* weight;                                       /* [cols] */
  void* out;               int64_t out_row_stride;
  void* residual_out;      int64_t residual_out_row_stride; /* with residual */
  float eps;
  void* rstd;              /* optional [rows] float32: 1 / rms of each row */
} kpdrRmsNormArgs;

/* gated == 0: out[r][i] = silu(x[r][i]) for i < cols.
 * gated == 1: out[r][i] = silu(x[r][i]) * x[r][cols + i] (SwiGLU; x rows hold
 * 2 * cols elements). silu(v) = v / (1 + exp(-v)). */
typedef struct kpdrSiluArgs {
  kpdrDtype dtype;
  int64_t rows, cols;
  const void* x;  int64_t x_row_stride;
  void* out;      int64_t out_row_stride;
  int32_t gated;
} kpdrSiluArgs;

/* Rotary position embedding of x [batch, seq, heads, head_dim] with
 * cos, sin [seq, head_dim / 2] (cs_batch_stride 0) or [batch, seq, head_dim / 2].
 * interleaved == 0 rotates the pairs (i, i + head_dim/2), 1 the pairs
 * (2i, 2i + 1). inverse == 1 rotates by -angle (the backward pass). */
typedef struct kpdrRopeArgs {
  kpdrDtype dtype;                 /* of x and out */
  kpdrDtype cs_dtype;              /* of cos and sin */
  int64_t batch, seq, heads, head_dim;
  const void* x;    int64_t x_stride[3];   /* batch, seq, head */
  void* out;        int64_t out_stride[3];
  const void* cos;  const void* sin;
  int64_t cs_batch_stride, cs_seq_stride;
  int32_t interleaved;
  int32_t inverse;
} kpdrRopeArgs;

/* Numerically stable softmax of each row of `cols`. */
typedef struct kpdrSoftmaxArgs {
  kpdrDtype dtype;
  int64_t rows, cols;
  const void* x;  int64_t x_row_stride;
  void* out;      int64_t out_row_stride;
} kpdrSoftmaxArgs;

/* One query token per sequence against a KV cache (grouped-query attention:
 * query head h reads kv head h / (heads / kv_heads)).
 * q, out [batch, heads, head_dim]; k, v [batch, kv_heads, cache_len, head_dim];
 * lengths [batch] int64 valid cache lengths in 1..cache_len (NULL: all). */
typedef struct kpdrDecodeAttentionArgs {
  kpdrDtype dtype;
  int64_t batch, heads, kv_heads, cache_len, head_dim;
  const void* q;   int64_t q_stride[2];     /* batch, head */
  const void* k;   int64_t k_stride[3];     /* batch, kv head, position */
  const void* v;   int64_t v_stride[3];
  const int64_t* lengths;
  void* out;       int64_t out_stride[2];
  float scale;
} kpdrDecodeAttentionArgs;

/* Attention over a whole sequence, q [batch, heads, seq_q, head_dim],
 * k, v [batch, kv_heads, seq_kv, head_dim], out like q. causal == 1 masks
 * key j for query i when j > i + (seq_kv - seq_q) (bottom-right aligned). */
typedef struct kpdrPrefillAttentionArgs {
  kpdrDtype dtype;
  int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  const void* q;   int64_t q_stride[3];     /* batch, head, position */
  const void* k;   int64_t k_stride[3];
  const void* v;   int64_t v_stride[3];
  void* out;       int64_t out_stride[3];
  float scale;
  int32_t causal;
} kpdrPrefillAttentionArgs;

/* out[n] = sum_k w[n][k] * x[k]; w [n, k], x [k], out [n] (contiguous). */
typedef struct kpdrMatmulVecArgs {
  kpdrDtype dtype;
  int64_t n, k;
  const void* w;  int64_t w_row_stride;
  const void* x;
  void* out;
} kpdrMatmulVecArgs;

/* --- core ops: the compute ATen's own operators spend their time in --- */

/* Strided, batched GEMM: for every b < batch,
 *   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],
 * op(A[b]) m x k, op(B[b]) k x n, C[b] m x n (row-major, c_ld >= n).
 * trans_a == 0: A[b](i, p) = a[b * a_batch_stride + i * a_ld + p];
 * trans_a == 1: A[b](i, p) = a[b * a_batch_stride + p * a_ld + i]
 * (A stored k x m, i.e. a column-major m x k matrix); trans_b likewise.
 * Batch strides may be 0 (one matrix broadcast over the batch). With
 * beta == 0, C is not read (NaN/Inf in it do not propagate, as in BLAS).
 * A, B and C are of `dtype`; products accumulate in float32; k == 0
 * gives beta * C. C never overlaps A or B. Serves mm, bmm, addmm,
 * baddbmm and so linear and matmul (and their backward). */
typedef struct kpdrGemmArgs {
  kpdrDtype dtype;
  int64_t batch, m, n, k;
  int32_t trans_a, trans_b;
  const void* a;  int64_t a_batch_stride, a_ld;
  const void* b;  int64_t b_batch_stride, b_ld;
  void* c;        int64_t c_batch_stride, c_ld;
  float alpha, beta;
} kpdrGemmArgs;

/* Pointwise and reduce operands are N-d views with arbitrary strides (in
 * elements; 0 broadcasts, negative and non-unit strides allowed) over at
 * most KPDR_MAX_DIMS dimensions. */
#define KPDR_MAX_DIMS 8

/* One operand of kpdrPointwiseArgs: a strided view of `dtype`, or, with
 * data == NULL, the constant `value` at every index (a Python scalar, a fill
 * value). */
typedef struct kpdrOperand {
  const void* data;
  kpdrDtype dtype;
  int64_t strides[KPDR_MAX_DIMS];
  double value;
} kpdrOperand;

/* Pointwise op codes. Inputs x0, x1, x2 are read as float (bool as 0/1),
 * the result is computed in float32 and converted to the output's dtype
 * (round to nearest even; bool: != 0; INT64/INT32: toward zero, NaN and
 * out-of-range values unspecified). Integer arithmetic instead: when the
 * output and every input the op reads (tensors by their dtype, scalar
 * operands by their `dtype` field, their `value` then truncated to int64)
 * are INT64, INT32 or BOOL, x0..x2 and alpha are int64 and the result is
 * exact (wrapping), stored as int32 by truncation and as bool by != 0. Only
 * the codes marked [int] take integer arithmetic; a runtime answers the
 * others NOT_SUPPORTED there (BITWISE_* are integer-only). Codes marked
 * [index] read the element's index i (row-major over `sizes`). Values are
 * fixed: new codes are appended, and a runtime answers a code it does not
 * know with KPDR_ERROR_NOT_SUPPORTED. */
typedef enum kpdrPointwiseOp {
  /* unary: out = f(x0) */
  KPDR_POINTWISE_COPY = 0,        /* [int] x0: copy, dtype cast, fill (x0 a scalar) */
  KPDR_POINTWISE_NEG = 1,         /* [int] */
  KPDR_POINTWISE_ABS = 2,         /* [int] */
  KPDR_POINTWISE_EXP = 3,
  KPDR_POINTWISE_LOG = 4,
  KPDR_POINTWISE_SQRT = 5,
  KPDR_POINTWISE_RSQRT = 6,
  KPDR_POINTWISE_RELU = 7,        /* x0 > 0 ? x0 : 0 (NaN stays NaN) */
  KPDR_POINTWISE_GELU = 8,        /* x0 * Phi(x0), the erf form */
  KPDR_POINTWISE_GELU_TANH = 9,   /* the tanh approximation */
  KPDR_POINTWISE_SILU = 10,       /* x0 / (1 + exp(-x0)) */
  KPDR_POINTWISE_SIGMOID = 11,
  KPDR_POINTWISE_TANH = 12,
  KPDR_POINTWISE_POW_SCALAR = 13, /* pow(x0, alpha) */
  KPDR_POINTWISE_SIGN = 14,        /* [int] 1, 0 or -1 (0 for NaN): abs's backward */
  KPDR_POINTWISE_COS = 15,
  KPDR_POINTWISE_SIN = 16,
  KPDR_POINTWISE_LOGICAL_NOT = 17, /* [int] x0 == 0 */
  KPDR_POINTWISE_BITWISE_NOT = 18, /* [int] ~x0 (integers only; bool: LOGICAL_NOT) */
  KPDR_POINTWISE_LOG1P = 19,
  KPDR_POINTWISE_EXPM1 = 20,
  KPDR_POINTWISE_LOG_SIGMOID = 21, /* min(x0, 0) - log1p(exp(-|x0|)) */
  KPDR_POINTWISE_ERF = 22,
  KPDR_POINTWISE_FLOOR = 23,       /* [int] (integers: x0) */
  KPDR_POINTWISE_CEIL = 24,        /* [int] */
  KPDR_POINTWISE_ROUND = 25,       /* [int] halves to even */
  KPDR_POINTWISE_TRUNC = 26,       /* [int] */
  KPDR_POINTWISE_HARDSWISH = 27,   /* x0 * min(max(x0 + 3, 0), 6) / 6 */
  KPDR_POINTWISE_MISH = 28,        /* x0 * tanh(log1p(exp(x0))) */
  KPDR_POINTWISE_LEAKY_RELU = 29,  /* x0 > 0 ? x0 : x0 * alpha (alpha = negative_slope) */
  /* binary: out = f(x0, x1) */
  KPDR_POINTWISE_ADD = 32,        /* [int] x0 + alpha * x1 */
  KPDR_POINTWISE_SUB = 33,        /* [int] x0 - alpha * x1 */
  KPDR_POINTWISE_MUL = 34,        /* [int] */
  KPDR_POINTWISE_DIV = 35,        /* true division */
  KPDR_POINTWISE_MAXIMUM = 36,    /* [int] NaN propagates */
  KPDR_POINTWISE_MINIMUM = 37,    /* [int] */
  KPDR_POINTWISE_EQ = 38,         /* [int] comparisons: 1 or 0 (output usually BOOL) */
  KPDR_POINTWISE_NE = 39,         /* [int] */
  KPDR_POINTWISE_LT = 40,         /* [int] */
  KPDR_POINTWISE_LE = 41,         /* [int] */
  KPDR_POINTWISE_GT = 42,         /* [int] */
  KPDR_POINTWISE_GE = 43,         /* [int] */
  KPDR_POINTWISE_LERP = 44,       /* x0 + alpha * (x1 - x0) (as ATen: from x1's side for alpha >= 0.5) */
  KPDR_POINTWISE_LOGICAL_AND = 45, /* [int] x0 != 0 && x1 != 0 */
  KPDR_POINTWISE_LOGICAL_OR = 46,  /* [int] x0 != 0 || x1 != 0 */
  KPDR_POINTWISE_HARDSWISH_BACKWARD = 47, /* x1 <= -3 ? 0 : x1 < 3 ? x0 * (x1 / 3 + 0.5) : x0 (x0 the gradient, x1 the input) */
  /* backward of the activations: x0 is the incoming gradient */
  KPDR_POINTWISE_THRESHOLD_BACKWARD = 48, /* x1 <= alpha ? 0 : x0 (relu: x1 its input or output) */
  KPDR_POINTWISE_SIGMOID_BACKWARD = 49,   /* x0 * x1 * (1 - x1), x1 = sigmoid's output */
  KPDR_POINTWISE_TANH_BACKWARD = 50,      /* x0 * (1 - x1 * x1), x1 = tanh's output */
  KPDR_POINTWISE_GELU_BACKWARD = 51,      /* x0 * gelu'(x1), x1 = gelu's input */
  KPDR_POINTWISE_GELU_TANH_BACKWARD = 52,
  KPDR_POINTWISE_SILU_BACKWARD = 53,      /* x0 * silu'(x1), x1 = silu's input */
  KPDR_POINTWISE_BITWISE_AND = 54,        /* [int] x0 & x1 (integers only) */
  KPDR_POINTWISE_BITWISE_OR = 55,         /* [int] x0 | x1 */
  KPDR_POINTWISE_BITWISE_XOR = 56,        /* [int] x0 ^ x1 */
  KPDR_POINTWISE_SOFTPLUS = 57,           /* x0 * alpha > x1 ? x0 : log1p(exp(x0 * alpha)) / alpha (alpha = beta, x1 = threshold) */
  KPDR_POINTWISE_LOG_SIGMOID_BACKWARD = 58, /* x0 * sigmoid(-x1), x1 = log_sigmoid's input */
  KPDR_POINTWISE_ATAN2 = 59,              /* atan2(x0, x1) */
  KPDR_POINTWISE_FMOD = 60,               /* fmod(x0, x1): the sign of x0 */
  KPDR_POINTWISE_REMAINDER = 61,          /* m = fmod(x0, x1), plus x1 when m != 0 and its sign differs from x1's */
  KPDR_POINTWISE_LEAKY_RELU_BACKWARD = 62, /* x1 > 0 ? x0 : x0 * alpha (x1 the input or, alpha >= 0, the output) */
  KPDR_POINTWISE_XLOGY = 63,              /* x1 NaN ? NaN : x0 == 0 ? 0 : x0 * log(x1) */
  /* ternary: out = f(x0, x1, x2) */
  KPDR_POINTWISE_WHERE = 64,      /* [int] x0 != 0 ? x1 : x2 */
  KPDR_POINTWISE_ADDCMUL = 65,    /* x0 + alpha * x1 * x2 */
  KPDR_POINTWISE_ADDCDIV = 66,    /* x0 + alpha * x1 / x2 */
  KPDR_POINTWISE_NAN_TO_NUM = 67, /* NaN -> alpha, +inf -> x1, -inf -> x2, else x0 */
  KPDR_POINTWISE_CLAMP = 68,      /* NaN x0 stays NaN, else min(max(x0, x1), x2) (absent bounds: -inf, +inf) */
  KPDR_POINTWISE_SOFTPLUS_BACKWARD = 69, /* x1 * alpha > x2 ? x0 : x0 * e / (e + 1), e = exp(x1 * alpha) */
  /* index-dependent: i the row-major linear index over `sizes`; for TRIL and
   * TRIU, (r, c) the indices of the last two dimensions (ndim >= 2) */
  KPDR_POINTWISE_ARANGE = 80,     /* [int][index] x0 + alpha * i (x0 a scalar: arange) */
  KPDR_POINTWISE_LINSPACE = 81,   /* [index] i < n / 2 ? x0 + alpha * i : x1 - alpha * (n - 1 - i), n elements */
  KPDR_POINTWISE_TRIL = 82,        /* [int][index] c - r <= alpha ? x0 : 0 */
  KPDR_POINTWISE_TRIU = 83        /* [int][index] c - r >= alpha ? x0 : 0 */
} kpdrPointwiseOp;

/* out[i] = op(in[0][i], in[1][i], in[2][i]) for every index i of `sizes`
 * (ndim 0: one element). Inputs beyond the op's arity are ignored. out has
 * no zero strides and may be exactly one input (same data, dtype and
 * strides: in-place ops); it overlaps no input otherwise. */
typedef struct kpdrPointwiseArgs {
  int32_t op;                     /* kpdrPointwiseOp */
  int32_t ndim;
  int64_t sizes[KPDR_MAX_DIMS];
  void* out;
  kpdrDtype out_dtype;
  int64_t out_strides[KPDR_MAX_DIMS];
  kpdrOperand in[3];
  double alpha;
} kpdrPointwiseArgs;

typedef enum kpdrReduceOp {
  KPDR_REDUCE_SUM = 0,            /* empty: 0 */
  KPDR_REDUCE_MEAN = 1,           /* sum / count; empty: NaN */
  KPDR_REDUCE_AMAX = 2,           /* NaN propagates; empty: not called */
  KPDR_REDUCE_AMIN = 3,
  /* Appended (the statistics; a runtime that predates them answers
   * KPDR_ERROR_NOT_SUPPORTED). ARGMAX/ARGMIN write an INT64 out: the
   * row-major index, over the reduced dimensions in order, of the first
   * maximum (minimum); a NaN counts as both, so the first NaN wins, as in
   * ATen. VAR/STD: sum((x - mean)^2) / max(0, count - correction), its
   * square root for STD (so inf or NaN where the divisor is 0, as in ATen).
   * Not called with an empty slice for ARGMAX/ARGMIN. SUM with out_dtype
   * INT64 (appended likewise) sums BOOL, INT32 or INT64 inputs exactly in
   * 64-bit integers: ATen's sum of bool and integer tensors. AMAX/AMIN with
   * out_dtype INT64 (appended later) compare such inputs exactly as 64-bit
   * integers (not called with an empty slice): ATen's max/min/amax/amin of
   * integer and bool tensors, narrowed to the input's dtype by the caller. */
  KPDR_REDUCE_ARGMAX = 4,
  KPDR_REDUCE_ARGMIN = 5,
  KPDR_REDUCE_VAR = 6,
  KPDR_REDUCE_STD = 7
} kpdrReduceOp;

/* Reduces the input (`sizes`, in_strides) over the dimensions whose bit is
 * set in reduce_mask. out is indexed by the other dimensions through
 * out_strides (its strides of reduced dimensions are ignored) and overlaps
 * nothing. Accumulates in float32. */
typedef struct kpdrReduceArgs {
  int32_t op;                     /* kpdrReduceOp */
  int32_t ndim;
  int64_t sizes[KPDR_MAX_DIMS];
  uint32_t reduce_mask;
  const void* in;
  kpdrDtype in_dtype;
  int64_t in_strides[KPDR_MAX_DIMS];
  void* out;
  kpdrDtype out_dtype;
  int64_t out_strides[KPDR_MAX_DIMS];
  double correction;              /* appended: VAR/STD only (Bessel's: 1) */
} kpdrReduceArgs;

/* Softmax family over dimension `dim` of an N-d strided tensor (`sizes`; any
 * strides, as kpdrOperand: `value` unused). Forward (x = the input):
 *   SOFTMAX:           out = exp(x - max) / sum(exp(x - max))
 *   LOG_SOFTMAX:       out = x - max - log(sum(exp(x - max)))
 * Backward (x = the forward's output y, grad = the incoming gradient g):
 *   SOFTMAX_BACKWARD:     out = y * (g - sum(g * y))
 *   LOG_SOFTMAX_BACKWARD: out = g - exp(y) * sum(g)
 * Sums run over `dim`, in float32. Dtypes are any float dtypes, each its
 * own (ATen's half_to_float: x half, out float32). out overlaps no input. */
typedef enum kpdrSoftmaxOp {
  KPDR_SOFTMAX = 0,
  KPDR_LOG_SOFTMAX = 1,
  KPDR_SOFTMAX_BACKWARD = 2,
  KPDR_LOG_SOFTMAX_BACKWARD = 3
} kpdrSoftmaxOp;

typedef struct kpdrSoftmaxDimArgs {
  int32_t op;                     /* kpdrSoftmaxOp */
  int32_t ndim;                   /* 1..KPDR_MAX_DIMS */
  int32_t dim;                    /* 0..ndim-1 */
  int64_t sizes[KPDR_MAX_DIMS];
  void* out;
  kpdrDtype out_dtype;
  int64_t out_strides[KPDR_MAX_DIMS];
  kpdrOperand x;
  kpdrOperand grad;               /* backward only */
} kpdrSoftmaxDimArgs;

/* Negative log likelihood over input [batch, classes, spatial] (log
 * probabilities; nll_loss is spatial 1, nll_loss2d spatial H*W) with
 * integer targets [batch, spatial] (INT64 or INT32) and optional class
 * weights w [classes] (NULL: ones). A target equal to ignore_index weighs 0.
 * Forward (backward == 0), per element e = (n, s) with t = target[e]:
 *   loss[e] = -w[t] * input[n, t, s];  total_weight = sum_e w[t]
 *   reduction 0 (none): out[e] = loss[e] through out_strides;
 *   1 (mean): out[0] = sum_e loss[e] / total_weight (all ignored: NaN);
 *   2 (sum):  out[0] = sum_e loss[e].
 *   total_weight[0] is written for every reduction (0 for none).
 * Backward (backward == 1): every element of grad_input is written:
 *   grad_input[n, t, s] = -w[t] * g(e) where t is a valid target, 0 elsewhere;
 *   g(e) = grad_output[e] (none), grad_output[0] / total_weight[0] (mean),
 *   grad_output[0] (sum).
 * A target outside [0, classes) other than ignore_index cannot be reported
 * from a queued kernel: its loss is NaN and its gradient row 0 (ATen raises
 * on the CPU; the caller checks targets where it must). Float tensors are
 * all of `dtype`; arithmetic in float32. */
typedef struct kpdrNllLossArgs {
  int32_t backward;
  int32_t reduction;              /* 0 none, 1 mean, 2 sum (ATen's Reduction) */
  kpdrDtype dtype;
  kpdrDtype target_dtype;
  int64_t batch, classes, spatial;
  int64_t ignore_index;
  const void* input;      int64_t input_strides[3];      /* forward */
  void* grad_input;       int64_t grad_input_strides[3]; /* backward */
  const void* target;     int64_t target_strides[2];
  const void* weight;     int64_t weight_stride;         /* may be NULL */
  void* out;                                             /* forward */
  const void* grad_output;                               /* backward */
  int64_t out_strides[2];         /* of out / grad_output for reduction none */
  void* total_weight;             /* forward writes it, backward reads it */
} kpdrNllLossArgs;

/* Layer norm of each row of `cols` (rows contiguous, row strides given):
 * forward (backward == 0):
 *   mean[r] = mean(x[r]), rstd[r] = 1 / sqrt(var(x[r]) + eps) (biased var),
 *   out[r][i] = (x[r][i] - mean[r]) * rstd[r] * weight[i] + bias[i]
 *   (weight, bias may be NULL: 1 and 0).
 * backward (backward == 1), with xhat = (x - mean) * rstd from the saved
 * mean and rstd, and gw = grad_out * weight:
 *   grad_input[r][i] = rstd[r] * (gw - mean(gw[r]) - xhat * mean(gw[r] * xhat[r]))
 *   grad_weight[i] = sum_r grad_out[r][i] * xhat[r][i], grad_bias[i] = sum_r grad_out[r][i]
 *   (each output NULL when not wanted; grad_weight/grad_bias are [cols]).
 * x, out, grad_out, grad_input are of `dtype`; weight, bias, grad_weight,
 * grad_bias of weight_dtype; mean and rstd [rows] of stats_dtype. */
typedef struct kpdrLayerNormArgs {
  int32_t backward;
  kpdrDtype dtype, weight_dtype, stats_dtype;
  int64_t rows, cols;
  const void* x;          int64_t x_row_stride;
  const void* weight;
  const void* bias;
  float eps;
  void* mean;
  void* rstd;
  void* out;              int64_t out_row_stride;        /* forward */
  const void* grad_out;   int64_t grad_out_row_stride;   /* backward */
  void* grad_input;       int64_t grad_input_row_stride;
  void* grad_weight;
  void* grad_bias;
} kpdrLayerNormArgs;

/* A 2-D sliding window (convolution's im2col/col2im, pooling). Output
 * position (oh, ow) covers the input pixels
 *   h = oh * stride[0] - padding[0] + i * dilation[0]   (i < kernel[0])
 *   w = ow * stride[1] - padding[1] + j * dilation[1]   (j < kernel[1]);
 * pixels outside the image are zero padding (im2col) or skipped (pooling).
 * Every field is >= 1 except padding (>= 0). A 1-D window has height 1. */
typedef struct kpdrWindow2d {
  int64_t kernel[2], stride[2], padding[2], dilation[2];
} kpdrWindow2d;

typedef enum kpdrIm2colDirection {
  KPDR_IM2COL = 0,  /* image -> columns */
  KPDR_COL2IM = 1   /* columns -> image, summing overlapping windows */
} kpdrIm2colDirection;

/* The columns of a convolution's GEMM. For image n < batch, channel c,
 * kernel offset (i, j) and output position (oh, ow):
 *   col[n * col_batch_stride + ((c * kernel[0] + i) * kernel[1] + j) * col_ld
 *       + oh * out_w + ow]
 * holds image[n][c][h][w] (h, w as in kpdrWindow2d; 0 outside the image).
 * KPDR_IM2COL writes col from image; KPDR_COL2IM writes every pixel of image
 * with the sum of the col elements that KPDR_IM2COL would have read from it
 * (0 where none: the image is overwritten, not accumulated into), summed in
 * float32. image is [batch, channels, height, width] through image_strides
 * (any, in elements); col_ld >= out_h * out_w. image and col never overlap.
 * With the `gemm` entry this is convolution forward and backward (and
 * unfold / fold). */
typedef struct kpdrIm2colArgs {
  int32_t direction;               /* kpdrIm2colDirection */
  kpdrDtype dtype;                 /* of image and col */
  int64_t batch, channels, height, width, out_h, out_w;
  kpdrWindow2d window;
  void* image;  int64_t image_strides[4];
  void* col;    int64_t col_batch_stride, col_ld;
} kpdrIm2colArgs;

typedef enum kpdrMaxPoolDirection {
  KPDR_MAX_POOL_FORWARD = 0,
  KPDR_MAX_POOL_BACKWARD = 1
} kpdrMaxPoolDirection;

/* 2-D max pooling with indices, over [batch, channels, height, width]
 * tensors through strides (any, in elements).
 * KPDR_MAX_POOL_FORWARD: out[n][c][oh][ow] = the largest pixel of the window
 * (skipping pixels outside the image), indices[n][c][oh][ow] = its h * width
 * + w (INT64). Ties keep the first pixel in window order (rows, then
 * columns); a NaN replaces the maximum whenever it is met, as in ATen; a
 * window of -inf keeps its first pixel.
 * KPDR_MAX_POOL_BACKWARD: grad_input[n][c][h][w] = the sum (float32) of
 * grad_output[n][c][oh][ow] over the windows whose index is h * width + w;
 * every pixel of grad_input is written. input/grad_input, out/grad_output
 * and indices never overlap. */
typedef struct kpdrMaxPool2dArgs {
  int32_t direction;               /* kpdrMaxPoolDirection */
  kpdrDtype dtype;                 /* of input/grad_input and out/grad_output */
  int64_t batch, channels, height, width, out_h, out_w;
  kpdrWindow2d window;
  void* input;    int64_t input_strides[4];   /* forward: read; backward: grad_input, written */
  void* out;      int64_t out_strides[4];     /* forward: written; backward: grad_output, read */
  int64_t* indices; int64_t indices_strides[4];
} kpdrMaxPool2dArgs;

/* Gather and scatter (advanced indexing, index_select, embedding, gather,
 * index_put_, index_add, scatter_add, embedding's backward), as ATen's
 * TensorIterator index kernels describe them. For every index i of `sizes`:
 *   p(i) = indexed_strides . i + sum_k wrap(idx_k[i]) * indices[k].stride
 * with idx_k[i] read through indices[k].strides (0 broadcasts) and
 * wrap(v) = v < 0 ? v + size_k : v when `wrap` != 0 (advanced indexing),
 * wrap(v) = v otherwise (index_select, gather, embedding). Then
 *   gather:  dense[i] = indexed[p(i)]
 *   scatter: indexed[p(i)] = alpha * dense[i]    (accumulate == 0)
 *            indexed[p(i)] += alpha * dense[i]   (accumulate == 1)
 * An index outside [-size_k, size_k) ([0, size_k) without wrap) is not
 * used: gather writes 0 there,
 * scatter skips the element, and the runtime sets error[0] = k + 1 and
 * error[1] = the index (one of them when several are bad) in `error`, an
 * int64[2] of device memory the caller zeroed and reads back. Scatter
 * skips the elements whose first index equals skip_value when skip != 0
 * (embedding's padding_idx, a compaction's unselected elements); a skipped
 * element's indices are not checked. dense and indexed share `dtype` (any; scatter
 * with accumulate: a float dtype); the index tensors are INT64 or INT32.
 * Duplicate positions: stores leave one of the values; accumulation adds
 * every value, in an unspecified order (atomics) unless the runtime
 * documents otherwise. dense never overlaps indexed. */
typedef struct kpdrIndexOperand {
  const void* data;
  kpdrDtype dtype;                 /* INT64 or INT32 */
  int64_t strides[KPDR_MAX_DIMS];  /* over `sizes`, in elements */
  int64_t size;                    /* of the indexed dimension */
  int64_t stride;                  /* of the indexed dimension in `indexed` */
} kpdrIndexOperand;

typedef struct kpdrIndexArgs {
  int32_t ndim;
  int64_t sizes[KPDR_MAX_DIMS];
  kpdrDtype dtype;                 /* of dense and indexed */
  void* dense;    int64_t dense_strides[KPDR_MAX_DIMS];
  void* indexed;  int64_t indexed_strides[KPDR_MAX_DIMS];
  int32_t num_indices;             /* 1..KPDR_MAX_DIMS */
  kpdrIndexOperand indices[KPDR_MAX_DIMS];
  int32_t wrap;                    /* negative indices count from the end */
  int32_t accumulate;              /* scatter only */
  double alpha;                    /* scatter only: dense's scale */
  int32_t skip;                    /* scatter only */
  int64_t skip_value;
  int64_t* error;                  /* device memory, int64[2], zeroed by the caller;
                                      NULL: not reported (indices known valid) */
} kpdrIndexArgs;

/* Random fills: out[i] for every index i of `sizes` (row-major linear index
 * i, written through out_strides) from the counter-based generator
 * Philox4x32-10 (Salmon et al., SC'11; Random123's constants and round
 * order) with key = seed (k0 its low, k1 its high 32 bits) and counter
 * (c0, c1, c2, c3) = (low and high 32 bits of i, 0, 0). Of its output words
 * r0..r3, with u = (r0 >> 8) * 2^-24 in [0, 1):
 *   UNIFORM      a + (b - a) * u
 *   NORMAL       a + b * sqrt(-2 ln u1) * cos(2 pi u2),
 *                u1 = ((r0 >> 8) + 1) * 2^-24 in (0, 1], u2 = (r1 >> 8) * 2^-24
 *   BERNOULLI    u < a ? 1 : 0
 *   EXPONENTIAL  -ln(u1) / a                        (u1 as for NORMAL)
 *   INTEGER      low + (r0 | r1 << 32) mod (high - low), in int64 arithmetic
 * computed in float32 (INTEGER in int64) and stored as `dtype` (16-bit types
 * rounded to nearest even; INTEGER into float types converted). The same
 * (seed, i) gives the same value on every runtime up to float rounding of
 * the math functions, so a sequence is reproducible across runtimes; the
 * caller draws a fresh seed per call from its generator. UNIFORM, NORMAL
 * and EXPONENTIAL take float dtypes; BERNOULLI and INTEGER any. */
typedef enum kpdrRandomDistribution {
  KPDR_RANDOM_UNIFORM = 0,
  KPDR_RANDOM_NORMAL = 1,
  KPDR_RANDOM_BERNOULLI = 2,
  KPDR_RANDOM_EXPONENTIAL = 3,
  KPDR_RANDOM_INTEGER = 4
} kpdrRandomDistribution;

typedef struct kpdrRandomArgs {
  int32_t ndim;
  int64_t sizes[KPDR_MAX_DIMS];
  kpdrDtype dtype;
  void* out;  int64_t out_strides[KPDR_MAX_DIMS];
  int32_t distribution;            /* kpdrRandomDistribution */
  double a, b;                     /* the distribution's parameters (above) */
  int64_t low, high;               /* INTEGER: [low, high), high > low */
  uint64_t seed;
} kpdrRandomArgs;

/* Sorting along one dimension (sort, argsort, msort, topk, kthvalue, median).
 * For every slice of the input along `dim` (the input: `sizes`, in_strides,
 * any strides; n = sizes[dim]) the entry orders the slice's elements and
 * writes the first k of that order:
 *   values[..., j, ...]  = the slice's j-th element in order       (j < k)
 *   indices[..., j, ...] = its position in the slice, INT64        (j < k)
 * through values_strides / indices_strides (any strides), the outputs being
 * indexed like the input with sizes[dim] replaced by k. Either output may be
 * NULL (not written). The order is ascending (descending == 0) or
 * descending, with NaN greater than every number (last ascending, first
 * descending, as ATen orders it), -0.0 equal to 0.0, integers compared
 * exactly, bool false < true; and it is always stable: equal elements keep
 * their input order, so ties have one answer on every runtime. k == n is a
 * full sort; k < n the first k elements only (top-k: a runtime may do less
 * work). dtype: any kpdrDtype; values are copied bit for bit (NaN payloads
 * aside). Outputs overlap nothing. */
typedef struct kpdrSortArgs {
  int32_t ndim;                    /* 1..KPDR_MAX_DIMS */
  int32_t dim;                     /* 0..ndim-1: the sorted dimension */
  int64_t sizes[KPDR_MAX_DIMS];    /* of the input */
  int64_t k;                       /* 0..sizes[dim]: elements written per slice */
  kpdrDtype dtype;                 /* of in and values */
  const void* in;     int64_t in_strides[KPDR_MAX_DIMS];
  void* values;       int64_t values_strides[KPDR_MAX_DIMS];   /* may be NULL */
  int64_t* indices;   int64_t indices_strides[KPDR_MAX_DIMS];  /* may be NULL */
  int32_t descending;
} kpdrSortArgs;

/* Scans (prefix combinations) along dimension `dim` of an N-d strided
 * tensor (`sizes`; in and out through their strides, any, in elements).
 * For each line along dim (the other indices fixed) and j < sizes[dim]:
 *   inclusive (exclusive == 0): out[j] = x[0] (+) x[1] (+) ... (+) x[j]
 *   exclusive (exclusive == 1): out[j] = e (+) x[0] (+) ... (+) x[j - 1]
 * with (+) and its identity e:
 *   SUM        a + b                                  e = 0
 *   PROD       a * b                                  e = 1
 *   MAX        max(a, b), a NaN propagates            e = -inf (INT64_MIN)
 *   MIN        min(a, b), a NaN propagates            e = +inf (INT64_MAX)
 *   LOGADDEXP  log(exp(a) + exp(b)), computed stably  e = -inf (float only)
 * Float arithmetic: in and out float dtypes (each its own, in may be BOOL),
 * combined in float32 or wider, in an order the runtime chooses (a parallel
 * scan rounds differently from a serial one). Integer arithmetic: out INT64
 * or INT32 and in BOOL, INT32 or INT64: exact int64 (wrapping), stored to
 * INT32 by truncation; LOGADDEXP answers NOT_SUPPORTED there. A scan from the
 * end of each line (reverse cumsum) is a call whose in and out point at
 * their last element along dim with that stride negated. out may be exactly
 * in (same data, dtype and strides: in-place); otherwise it overlaps nothing.
 * With the `pointwise` and `scatter` entries this is also stream compaction
 * (nonzero, masked_select, boolean-mask indexing): the exclusive SUM of a
 * mask gives each selected element its output position. */
typedef enum kpdrScanOp {
  KPDR_SCAN_SUM = 0,
  KPDR_SCAN_PROD = 1,
  KPDR_SCAN_MAX = 2,
  KPDR_SCAN_MIN = 3,
  KPDR_SCAN_LOGADDEXP = 4
} kpdrScanOp;

typedef struct kpdrScanArgs {
  int32_t op;                      /* kpdrScanOp */
  int32_t exclusive;               /* 0 inclusive, 1 exclusive */
  int32_t ndim;                    /* 1..KPDR_MAX_DIMS */
  int32_t dim;                     /* 0..ndim-1 */
  int64_t sizes[KPDR_MAX_DIMS];
  const void* in;   kpdrDtype in_dtype;   int64_t in_strides[KPDR_MAX_DIMS];
  void* out;        kpdrDtype out_dtype;  int64_t out_strides[KPDR_MAX_DIMS];
} kpdrScanArgs;

/* The runtime's kernels. kernel_pytorch zero-fills the table and sets
 * struct_size to sizeof(kpdrKernelTable) before calling kpdrGetKernels; the
 * runtime fills the entries it implements (leaving the others NULL) and only
 * writes within struct_size, so either side may be newer. */
typedef struct kpdrKernelTable {
  uint32_t struct_size;
  kpdrError_t (*rms_norm)(const kpdrRmsNormArgs* args, kpdrStream_t stream);
  kpdrError_t (*silu)(const kpdrSiluArgs* args, kpdrStream_t stream);
  kpdrError_t (*rope)(const kpdrRopeArgs* args, kpdrStream_t stream);
  kpdrError_t (*softmax)(const kpdrSoftmaxArgs* args, kpdrStream_t stream);
  kpdrError_t (*decode_attention)(const kpdrDecodeAttentionArgs* args, kpdrStream_t stream);
  kpdrError_t (*prefill_attention)(const kpdrPrefillAttentionArgs* args, kpdrStream_t stream);
  kpdrError_t (*matmul_vec)(const kpdrMatmulVecArgs* args, kpdrStream_t stream);
  /* Core ops (appended: a runtime built against an older kpdr.h leaves them
   * NULL through struct_size, and those ops fall back). */
  kpdrError_t (*gemm)(const kpdrGemmArgs* args, kpdrStream_t stream);
  kpdrError_t (*pointwise)(const kpdrPointwiseArgs* args, kpdrStream_t stream);
  kpdrError_t (*reduce)(const kpdrReduceArgs* args, kpdrStream_t stream);
  /* Softmax family over any dim, nll_loss, layer_norm (appended likewise). */
  kpdrError_t (*softmax_dim)(const kpdrSoftmaxDimArgs* args, kpdrStream_t stream);
  kpdrError_t (*nll_loss)(const kpdrNllLossArgs* args, kpdrStream_t stream);
  kpdrError_t (*layer_norm)(const kpdrLayerNormArgs* args, kpdrStream_t stream);
  /* Convolution and pooling (appended after reduce). */
  kpdrError_t (*im2col)(const kpdrIm2colArgs* args, kpdrStream_t stream);
  kpdrError_t (*max_pool2d)(const kpdrMaxPool2dArgs* args, kpdrStream_t stream);
  /* Indexing (appended likewise). kpdrIndexArgs: gather reads `indexed` into `dense`, scatter the reverse. */
  kpdrError_t (*gather)(const kpdrIndexArgs* args, kpdrStream_t stream);
  kpdrError_t (*scatter)(const kpdrIndexArgs* args, kpdrStream_t stream);
  /* Random fills (appended likewise): the device generator's draws. */
  kpdrError_t (*random)(const kpdrRandomArgs* args, kpdrStream_t stream);
  /* Sorting (appended likewise): sort, argsort, topk, kthvalue, median. */
  kpdrError_t (*sort)(const kpdrSortArgs* args, kpdrStream_t stream);
  /* Scans (appended likewise): cumsum/cumprod/cummax-style prefixes and,
   * composed with pointwise and scatter, stream compaction. */
  kpdrError_t (*scan)(const kpdrScanArgs* args, kpdrStream_t stream);
} kpdrKernelTable;

/* Optional. Fills `table` (see kpdrKernelTable); may be called before
 * kpdrInit. */
KPDR_API kpdrError_t kpdrGetKernels(kpdrKernelTable* table);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KPDR_H_ */

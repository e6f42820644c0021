// The pointwise and reduce entries of the OpenCL runtime (kpdr.h's core-op
// section). Each call's OpenCL C is generated for what it needs — the op's
// expression, every operand's dtype (or a scalar in its place) and the number
// of dimensions, unrolled — and built once per device through the kernel
// cache (in memory and on disk), so a training step compiles a few dozen
// small programs on its first iteration and none after.
//
// Dimensions every operand walks as one are merged on the host first.
// Pointwise: contiguous operands take a vectorised grid-stride kernel without
// index arithmetic; others one work-item per output element (grid-stride), the
// linear index decomposed row-major over the sizes. Reduce: contiguous slices
// (rows) and one contiguous kept dimension (columns) take kernels that read
// 16-byte vectors, coalesced, with a second pass over partial results where
// the work is split; other layouts a work-group per output element summing
// (or min/max-ing) a strided slice into local memory, then a tree; small
// reductions one work-item per output instead.
#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "errors.h"
#include "generated.h"
#include "kernel_cache.h"
#include "kpdr.h"
#include "losses.h"
#include "pointwise.h"
#include "runtime.h"

using kpdr_opencl::fail;
using kpdr_opencl::Runtime;

namespace kpdr_opencl {

// ---- generated source -----------------------------------------------------

extern const char* const kPrelude = R"CLC(
#define BUF(n) __global uchar* n##_b, ulong n##_o
#define PTR(n) (n##_b + n##_o)
inline float ld0(const __global uchar* p, long i) { return ((const __global float*)p)[i]; }
inline float ld1(const __global uchar* p, long i) { return vload_half((size_t)i, (const __global half*)p); }
inline float ld2(const __global uchar* p, long i) { return as_float(((uint)((const __global ushort*)p)[i]) << 16); }
inline float ld3(const __global uchar* p, long i) { return p[i] != 0 ? 1.0f : 0.0f; }
inline void st0(__global uchar* p, long i, float v) { ((__global float*)p)[i] = v; }
inline void st1(__global uchar* p, long i, float v) { vstore_half_rte(v, (size_t)i, (__global half*)p); }
inline void st2(__global uchar* p, long i, float v) {
  uint u = as_uint(v);
  __global ushort* q = (__global ushort*)p;
  if ((u & 0x7fffffffu) > 0x7f800000u) { q[i] = (ushort)((u >> 16) | 0x40u); return; }  /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
  q[i] = (ushort)(u >> 16);
}
inline void st3(__global uchar* p, long i, float v) { p[i] = v != 0.0f ? 1 : 0; }
inline float ld4(const __global uchar* p, long i) { return (float)((const __global long*)p)[i]; }
inline float ld5(const __global uchar* p, long i) { return (float)((const __global int*)p)[i]; }
inline void st4(__global uchar* p, long i, float v) { ((__global long*)p)[i] = convert_long_sat_rtz(v); }
inline void st5(__global uchar* p, long i, float v) { ((__global int*)p)[i] = convert_int_sat_rtz(v); }
/* integer arithmetic (kpdr.h): li/si load and store int64 values */
inline long li3(const __global uchar* p, long i) { return p[i] != 0 ? 1 : 0; }
inline long li4(const __global uchar* p, long i) { return ((const __global long*)p)[i]; }
inline long li5(const __global uchar* p, long i) { return (long)((const __global int*)p)[i]; }
inline void si3(__global uchar* p, long i, long v) { p[i] = v != 0 ? 1 : 0; }
inline void si4(__global uchar* p, long i, long v) { ((__global long*)p)[i] = v; }
inline void si5(__global uchar* p, long i, long v) { ((__global int*)p)[i] = (int)v; }
inline float kp_sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
inline float kp_nanmax(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmax(a, b); }
inline float kp_nanmin(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmin(a, b); }
inline float kp_remainder(float a, float b) {
  const float m = fmod(a, b);
  return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m;
}
/* GELU for 16-bit outputs: erf as Abramowitz & Stegun 7.1.26 (absolute error
 * below 1.5e-7, with the approximate reciprocal and exp) is invisible after
 * rounding to bfloat16/float16, and about half the instructions of erf():
 * on an H200 the exact form made bfloat16 GELU compute-bound (0.64 of a copy). */
inline float kp_gelu_lowp(float x) {
  const float a = fabs(x) * 0.70710678118654752440f;
  const float t = native_recip(fma(0.3275911f, a, 1.0f));
  const float p = t * fma(t, fma(t, fma(t, fma(t, 1.061405429f, -1.453152027f), 1.421413741f), -0.284496736f),
                          0.254829592f);
  const float e = copysign(1.0f - p * native_exp(-a * a), x);
  return 0.5f * x * (1.0f + e);
}
inline float kp_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
inline float kp_gelu_bw(float g, float x) {
  return g * (0.5f * (1.0f + erf(x * 0.70710678118654752440f)) + x * 0.39894228040143267794f * exp(-0.5f * x * x));
}
inline float kp_gelu_tanh_bw(float g, float x) {
  const float t = tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x));
  return g * (0.5f * (1.0f + t) +
              0.5f * x * (1.0f - t * t) * 0.79788456080286535588f * (1.0f + 3.0f * 0.044715f * x * x));
}
inline float kp_silu_bw(float g, float x) { const float s = kp_sigmoid(x); return g * s * (1.0f + x * (1.0f - s)); }
inline float kp_pow(float x, float a) { return a == 2.0f ? x * x : a == 0.5f ? sqrt(x) : pow(x, a); }
inline float kp_lerp(float x, float y, float w) {
  return fabs(w) < 0.5f ? x + w * (y - x) : y - (y - x) * (1.0f - w);
}
)CLC";

namespace {

// Vector loads and stores of the contiguous paths (float arithmetic):
// vlD_V / vsD_V move V elements of kpdrDtype D from element i, a multiple of
// V, of a tensor whose byte offset is a multiple of V elements, as one 8- or
// 16-byte access (float32 x8: two). vloadn would promise only element
// alignment, which NVIDIA's compiler splits into element accesses: 2-byte ones
// for 16-bit types, a quarter of a warp's bandwidth per instruction.
const char* const kVectorPrelude = R"CLC(
inline float4 kp_bf4(uint2 w) {
  return (float4)(as_float(w.x << 16), as_float(w.x & 0xffff0000u), as_float(w.y << 16), as_float(w.y & 0xffff0000u));
}
inline uint2 kp_to_bf4(float4 v) {  /* st2's rounding (nearest even, quiet NaN), four at once */
  uint4 u = as_uint4(v);
  const uint4 rounded = (u + (uint4)(0x7fffu) + ((u >> 16) & (uint4)(1u))) >> 16;
  const uint4 nan = (u >> 16) | (uint4)(0x40u);
  u = select(rounded, nan, (u & (uint4)(0x7fffffffu)) > (uint4)(0x7f800000u));
  return (uint2)(u.x | (u.y << 16), u.z | (u.w << 16));
}
inline float4 vl0_4(const __global uchar* p, long i) { return *(const __global float4*)(p + 4 * i); }
inline float8 vl0_8(const __global uchar* p, long i) {
  const __global float4* q = (const __global float4*)(p + 4 * i);
  return (float8)(q[0], q[1]);
}
inline float4 vl1_4(const __global uchar* p, long i) { return vloada_half4(0, (const __global half*)(p + 2 * i)); }
inline float8 vl1_8(const __global uchar* p, long i) { return vloada_half8(0, (const __global half*)(p + 2 * i)); }
inline float4 vl2_4(const __global uchar* p, long i) { return kp_bf4(*(const __global uint2*)(p + 2 * i)); }
inline float8 vl2_8(const __global uchar* p, long i) {
  const uint4 w = *(const __global uint4*)(p + 2 * i);
  return (float8)(kp_bf4(w.xy), kp_bf4(w.zw));
}
inline float4 vl3_4(const __global uchar* p, long i) {
  return select((float4)(0.0f), (float4)(1.0f), convert_int4(*(const __global uchar4*)(p + i)) != (int4)(0));
}
inline float8 vl3_8(const __global uchar* p, long i) {
  return select((float8)(0.0f), (float8)(1.0f), convert_int8(*(const __global uchar8*)(p + i)) != (int8)(0));
}
inline void vs0_4(__global uchar* p, long i, float4 v) { *(__global float4*)(p + 4 * i) = v; }
inline void vs0_8(__global uchar* p, long i, float8 v) {
  __global float4* q = (__global float4*)(p + 4 * i);
  q[0] = v.lo;
  q[1] = v.hi;
}
inline void vs1_4(__global uchar* p, long i, float4 v) { vstorea_half4_rte(v, 0, (__global half*)(p + 2 * i)); }
inline void vs1_8(__global uchar* p, long i, float8 v) { vstorea_half8_rte(v, 0, (__global half*)(p + 2 * i)); }
inline void vs2_4(__global uchar* p, long i, float4 v) { *(__global uint2*)(p + 2 * i) = kp_to_bf4(v); }
inline void vs2_8(__global uchar* p, long i, float8 v) {
  *(__global uint4*)(p + 2 * i) = (uint4)(kp_to_bf4(v.lo), kp_to_bf4(v.hi));
}
inline void vs3_4(__global uchar* p, long i, float4 v) { *(__global uchar4*)(p + i) = convert_uchar4(-(v != (float4)(0.0f))); }
inline void vs3_8(__global uchar* p, long i, float8 v) { *(__global uchar8*)(p + i) = convert_uchar8(-(v != (float8)(0.0f))); }
)CLC";

std::string num(int64_t v) { return std::to_string(v); }

int element_bytes(int dtype) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: case KPDR_DTYPE_INT32: return 4;
    case KPDR_DTYPE_FLOAT16: case KPDR_DTYPE_BFLOAT16: return 2;
    case KPDR_DTYPE_BOOL: return 1;
    default: return 8;
  }
}

// `vec` elements of dtype `d` from element `i` of `p` as a floatV (longV for
// integer arithmetic): one vector access for the float types and bool, the
// scalar loads side by side otherwise.
std::string load_vec(int d, int vec, bool integer, const std::string& p, const std::string& i) {
  if (!integer && d <= KPDR_DTYPE_BOOL) return "vl" + num(d) + "_" + num(vec) + "(" + p + ", " + i + ")";
  std::string code = std::string("(") + (integer ? "long" : "float") + num(vec) + ")(";
  for (int e = 0; e < vec; ++e) {
    code += (e ? ", " : "") + std::string(integer ? "li" : "ld") + num(d) + "(" + p + ", " + i + " + " + num(e) + ")";
  }
  return code + ")";
}

std::string store_vec(int d, int vec, bool integer, const std::string& p, const std::string& i, const std::string& v) {
  if (!integer && d <= KPDR_DTYPE_BOOL) return "vs" + num(d) + "_" + num(vec) + "(" + p + ", " + i + ", " + v + ");";
  std::string code;
  for (int e = 0; e < vec; ++e) {
    code += std::string(integer ? "si" : "st") + num(d) + "(" + p + ", " + i + " + " + num(e) + ", " + v + ".s" + num(e) +
            "); ";
  }
  return code;
}

// Merges neighbouring dimensions that every operand walks as one (stride of
// the outer = stride * size of the inner) and drops those of size 1, in
// place; returns the new count. Row-major order, so an element's linear
// index is unchanged.
int coalesce(int ndim, int64_t* sizes, const std::vector<int64_t*>& strides) {
  int n = 0;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 1) continue;
    bool merge = n > 0;
    for (int64_t* s : strides) merge = merge && s[n - 1] == s[d] * sizes[d];
    if (merge) {
      sizes[n - 1] *= sizes[d];
      for (int64_t* s : strides) s[n - 1] = s[d];
    } else {
      sizes[n] = sizes[d];
      for (int64_t* s : strides) s[n] = s[d];
      ++n;
    }
  }
  return n;
}

// The byte offset of device pointer `ptr` inside its allocation's buffer
// (the kernels' view of alignment); false for memory the runtime does not own.
bool offset_of(Runtime* runtime, const void* ptr, uint64_t* offset) {
  DeviceRange range;
  if (!runtime->device_memory().find(ptr, &range)) return false;
  *offset = range.offset;
  return true;
}

}  // namespace

namespace {

// The op's expression over x, y, z (float) and alpha; NULL for an unknown code.
// A 16-bit output may take a cheaper form whose error its rounding hides.
const char* expression(int32_t op, int out_dtype) {
  const bool lowp = out_dtype == KPDR_DTYPE_FLOAT16 || out_dtype == KPDR_DTYPE_BFLOAT16;
  if (op == KPDR_POINTWISE_GELU && lowp) return "kp_gelu_lowp(x)";
  switch (op) {
    case KPDR_POINTWISE_COPY: return "x";
    case KPDR_POINTWISE_NEG: return "-x";
    case KPDR_POINTWISE_ABS: return "fabs(x)";
    case KPDR_POINTWISE_EXP: return "exp(x)";
    case KPDR_POINTWISE_LOG: return "log(x)";
    case KPDR_POINTWISE_SQRT: return "sqrt(x)";
    case KPDR_POINTWISE_RSQRT: return "1.0f / sqrt(x)";
    case KPDR_POINTWISE_RELU: return "(isnan(x) ? x : fmax(x, 0.0f))";
    case KPDR_POINTWISE_GELU: return "0.5f * x * (1.0f + erf(x * 0.70710678118654752440f))";
    case KPDR_POINTWISE_GELU_TANH: return "kp_gelu_tanh(x)";
    case KPDR_POINTWISE_SILU: return "x / (1.0f + exp(-x))";
    case KPDR_POINTWISE_SIGMOID: return "kp_sigmoid(x)";
    case KPDR_POINTWISE_TANH: return "tanh(x)";
    case KPDR_POINTWISE_POW_SCALAR: return "kp_pow(x, alpha)";
    case KPDR_POINTWISE_SIGN: return "(float)((x > 0.0f) - (x < 0.0f))";
    case KPDR_POINTWISE_ADD: return "x + alpha * y";
    case KPDR_POINTWISE_SUB: return "x - alpha * y";
    case KPDR_POINTWISE_MUL: return "x * y";
    case KPDR_POINTWISE_DIV: return "x / y";
    case KPDR_POINTWISE_MAXIMUM: return "kp_nanmax(x, y)";
    case KPDR_POINTWISE_MINIMUM: return "kp_nanmin(x, y)";
    case KPDR_POINTWISE_EQ: return "(x == y ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_NE: return "(x != y ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_LT: return "(x < y ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_LE: return "(x <= y ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_GT: return "(x > y ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_GE: return "(x >= y ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_LERP: return "kp_lerp(x, y, alpha)";
    case KPDR_POINTWISE_THRESHOLD_BACKWARD: return "(y <= alpha ? 0.0f : x)";
    case KPDR_POINTWISE_SIGMOID_BACKWARD: return "x * (1.0f - y) * y";
    case KPDR_POINTWISE_TANH_BACKWARD: return "x * (1.0f - y * y)";
    case KPDR_POINTWISE_GELU_BACKWARD: return "kp_gelu_bw(x, y)";
    case KPDR_POINTWISE_GELU_TANH_BACKWARD: return "kp_gelu_tanh_bw(x, y)";
    case KPDR_POINTWISE_SILU_BACKWARD: return "kp_silu_bw(x, y)";
    case KPDR_POINTWISE_WHERE: return "(x != 0.0f ? y : z)";
    case KPDR_POINTWISE_ADDCMUL: return "x + alpha * y * z";
    case KPDR_POINTWISE_ADDCDIV: return "x + alpha * y / z";
    case KPDR_POINTWISE_COS: return "cos(x)";
    case KPDR_POINTWISE_SIN: return "sin(x)";
    case KPDR_POINTWISE_LOGICAL_NOT: return "(x == 0.0f ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_LOGICAL_AND: return "(x != 0.0f && y != 0.0f ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_LOGICAL_OR: return "(x != 0.0f || y != 0.0f ? 1.0f : 0.0f)";
    case KPDR_POINTWISE_NAN_TO_NUM: return "(isnan(x) ? alpha : isinf(x) ? (x > 0.0f ? y : z) : x)";
    case KPDR_POINTWISE_ARANGE: return "x + alpha * (float)g";
    case KPDR_POINTWISE_LINSPACE: return "(g < n / 2 ? x + alpha * (float)g : y - alpha * (float)(n - 1 - g))";
    case KPDR_POINTWISE_TRIL: return "((float)(c - r) <= alpha ? x : 0.0f)";
    case KPDR_POINTWISE_TRIU: return "((float)(c - r) >= alpha ? x : 0.0f)";
    case KPDR_POINTWISE_ERF: return "erf(x)";
    case KPDR_POINTWISE_FLOOR: return "floor(x)";
    case KPDR_POINTWISE_CEIL: return "ceil(x)";
    case KPDR_POINTWISE_ROUND: return "rint(x)";
    case KPDR_POINTWISE_TRUNC: return "trunc(x)";
    case KPDR_POINTWISE_HARDSWISH: return "(x * fmin(fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f)";
    case KPDR_POINTWISE_MISH: return "(x * tanh(log1p(exp(x))))";
    case KPDR_POINTWISE_LEAKY_RELU: return "(x > 0.0f ? x : x * alpha)";
    case KPDR_POINTWISE_HARDSWISH_BACKWARD: return "(y <= -3.0f ? 0.0f : y < 3.0f ? x * (y / 3.0f + 0.5f) : x)";
    case KPDR_POINTWISE_ATAN2: return "atan2(x, y)";
    case KPDR_POINTWISE_FMOD: return "fmod(x, y)";
    case KPDR_POINTWISE_REMAINDER: return "kp_remainder(x, y)";
    case KPDR_POINTWISE_LEAKY_RELU_BACKWARD: return "(y > 0.0f ? x : x * alpha)";
    case KPDR_POINTWISE_XLOGY: return "(isnan(y) ? NAN : x == 0.0f ? 0.0f : x * log(y))";
    case KPDR_POINTWISE_LOG1P: return "log1p(x)";
    case KPDR_POINTWISE_EXPM1: return "expm1(x)";
    case KPDR_POINTWISE_LOG_SIGMOID: return "(fmin(x, 0.0f) - log1p(exp(-fabs(x))))";
    case KPDR_POINTWISE_SOFTPLUS: return "(x * alpha > y ? x : log1p(exp(x * alpha)) / alpha)";
    case KPDR_POINTWISE_LOG_SIGMOID_BACKWARD:
      return "(y < 0.0f ? x / (1.0f + exp(y)) : x * exp(-y) / (1.0f + exp(-y)))";
    case KPDR_POINTWISE_CLAMP: return "(isnan(x) ? x : fmin(fmax(x, y), z))";
    case KPDR_POINTWISE_SOFTPLUS_BACKWARD:
      return "(y * alpha > z ? x : x * exp(y * alpha) / (exp(y * alpha) + 1.0f))";
  }
  return nullptr;
}

// The op's expression in integer arithmetic (long x, y, z, alpha); NULL
// where kpdr.h gives the code no integer form.
const char* int_expression(int32_t op) {
  switch (op) {
    case KPDR_POINTWISE_COPY: case KPDR_POINTWISE_FLOOR: case KPDR_POINTWISE_CEIL: case KPDR_POINTWISE_ROUND:
    case KPDR_POINTWISE_TRUNC:
      return "x";
    case KPDR_POINTWISE_NEG: return "(long)(0ul - (ulong)x)";
    case KPDR_POINTWISE_ABS: return "(x < 0 ? (long)(0ul - (ulong)x) : x)";
    case KPDR_POINTWISE_SIGN: return "(long)((x > 0) - (x < 0))";
    case KPDR_POINTWISE_LOGICAL_NOT: return "(long)(x == 0)";
    case KPDR_POINTWISE_BITWISE_NOT: return "~x";
    case KPDR_POINTWISE_ADD: return "(long)((ulong)x + (ulong)alpha * (ulong)y)";
    case KPDR_POINTWISE_SUB: return "(long)((ulong)x - (ulong)alpha * (ulong)y)";
    case KPDR_POINTWISE_MUL: return "(long)((ulong)x * (ulong)y)";
    case KPDR_POINTWISE_MAXIMUM: return "max(x, y)";
    case KPDR_POINTWISE_MINIMUM: return "min(x, y)";
    case KPDR_POINTWISE_EQ: return "(long)(x == y)";
    case KPDR_POINTWISE_NE: return "(long)(x != y)";
    case KPDR_POINTWISE_LT: return "(long)(x < y)";
    case KPDR_POINTWISE_LE: return "(long)(x <= y)";
    case KPDR_POINTWISE_GT: return "(long)(x > y)";
    case KPDR_POINTWISE_GE: return "(long)(x >= y)";
    case KPDR_POINTWISE_LOGICAL_AND: return "(long)(x != 0 && y != 0)";
    case KPDR_POINTWISE_LOGICAL_OR: return "(long)(x != 0 || y != 0)";
    case KPDR_POINTWISE_BITWISE_AND: return "(x & y)";
    case KPDR_POINTWISE_BITWISE_OR: return "(x | y)";
    case KPDR_POINTWISE_BITWISE_XOR: return "(x ^ y)";
    case KPDR_POINTWISE_WHERE: return "(x != 0 ? y : z)";
    case KPDR_POINTWISE_ARANGE: return "(long)((ulong)x + (ulong)alpha * (ulong)g)";
    case KPDR_POINTWISE_TRIL: return "(c - r <= alpha ? x : 0)";
    case KPDR_POINTWISE_TRIU: return "(c - r >= alpha ? x : 0)";
  }
  return nullptr;
}

bool index_op(int32_t op) {
  return op == KPDR_POINTWISE_TRIL || op == KPDR_POINTWISE_TRIU;
}

int arity(int32_t op) {
  if (op >= KPDR_POINTWISE_COPY && op <= KPDR_POINTWISE_LEAKY_RELU) return 1;
  if (op >= KPDR_POINTWISE_ADD && op <= KPDR_POINTWISE_HARDSWISH_BACKWARD) return 2;
  if (op >= KPDR_POINTWISE_THRESHOLD_BACKWARD && op <= KPDR_POINTWISE_XLOGY) return 2;
  if (op >= KPDR_POINTWISE_WHERE && op <= KPDR_POINTWISE_SOFTPLUS_BACKWARD) return 3;
  if (op == KPDR_POINTWISE_ARANGE || op == KPDR_POINTWISE_TRIL || op == KPDR_POINTWISE_TRIU) return 1;
  if (op == KPDR_POINTWISE_LINSPACE) return 2;
  return 0;
}

bool known_dtype(int d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_INT32; }
bool integer_dtype(int d) { return d == KPDR_DTYPE_BOOL || d == KPDR_DTYPE_INT64 || d == KPDR_DTYPE_INT32; }

// kpdr.h: integer arithmetic when the output and every operand read are integer (or bool).
bool integer_call(const kpdrPointwiseArgs& a, int n_in) {
  bool integer = integer_dtype(a.out_dtype);
  for (int k = 0; k < n_in; ++k) integer = integer && integer_dtype(a.in[k].dtype);
  return integer;
}
bool float_dtype(int d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_BFLOAT16; }

}  // namespace

// Decomposes `index` (below the product of the sizes) row-major over `count`
// dimensions of sizes `sz` (a long8 argument) into offsets += i_d * stride for
// each (name, long8) pair.
std::string decompose(const std::string& index, int count, const std::string& sz,
                      const std::vector<std::pair<std::string, std::string>>& offsets) {
  std::string code = "  long rest = " + index + ";\n";
  for (const auto& [name, strides] : offsets) code += "  long " + name + " = 0;\n";
  for (int d = count - 1; d >= 0; --d) {
    const std::string s = ".s" + std::to_string(d);
    // The outermost index is what is left: `index` is below the sizes' product,
    // so its 64-bit modulo (a long software routine on GPUs) is not needed.
    code += d == 0 ? std::string("  { const long i = rest;")
                   : "  { const long i = rest % " + sz + s + "; rest /= " + sz + s + ";";
    for (const auto& [name, strides] : offsets) code += " " + name + " += i * " + strides + s + ";";
    code += " }\n";
  }
  return code;
}

namespace {

std::string pointwise_source(const kpdrPointwiseArgs& a, int n_in, bool integer) {
  std::string src = kPrelude;
  const std::string type = integer ? "long" : "float";
  src += "__kernel void kp_pointwise(BUF(out), long8 os";
  for (int k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k);
    src += ", BUF(x" + n + "), long8 s" + n + ", " + type + " c" + n;
  }
  src += ", long8 sz, long n, " + type + " alpha) {\n";
  src += " for (long g = get_global_id(0); g < n; g += get_global_size(0)) {\n";
  std::vector<std::pair<std::string, std::string>> offsets = {{"o", "os"}};
  for (int k = 0; k < n_in; ++k) {
    if (a.in[k].data != nullptr) offsets.push_back({"a" + std::to_string(k), "s" + std::to_string(k)});
  }
  src += decompose("g", a.ndim, "sz", offsets);
  if (index_op(a.op)) {  // the indices of the last two dimensions (ndim >= 2)
    const std::string last = "sz.s" + std::to_string(a.ndim - 1), before = "sz.s" + std::to_string(a.ndim - 2);
    src += "  const long c = g % " + last + ", r = (g / " + last + ") % " + before + ";\n";
  }
  const char* names[3] = {"x", "y", "z"};
  for (int k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k);
    src += "  const " + type + " " + names[k] + " = ";
    if (k < n_in && a.in[k].data != nullptr) {
      src += (integer ? "li" : "ld") + std::to_string(a.in[k].dtype) + "(PTR(x" + n + "), a" + n + ");\n";
    } else {
      src += "c" + n + ";\n";
    }
  }
  src += std::string("  ") + (integer ? "si" : "st") + std::to_string(a.out_dtype) + "(PTR(out), o, " +
         (integer ? int_expression(a.op) : expression(a.op, a.out_dtype)) + ");\n }\n}\n";
  return src;
}

// Every operand contiguous (or one value for all): no index arithmetic, `vec`
// elements per work-item and step through vector accesses (vec 1: scalar
// accesses, for misaligned tensors). kinds[k]: 'v' a contiguous tensor, 'b'
// a tensor of one element broadcast, 'c' the constant c<k>. The last n % vec
// elements are done one by one.
std::string pointwise_flat_source(const kpdrPointwiseArgs& a, int n_in, bool integer, const char* kinds, int vec) {
  std::string src = std::string(kPrelude) + kVectorPrelude;
  const std::string type = integer ? "long" : "float", vtype = type + num(vec);
  const std::string ld = integer ? "li" : "ld", st = integer ? "si" : "st";
  src += "__kernel void kp_pointwise_flat(BUF(out)";
  for (int k = 0; k < 3; ++k) src += ", BUF(x" + num(k) + "), " + type + " c" + num(k);
  src += ", long n, " + type + " alpha) {\n";
  const char* names[3] = {"x", "y", "z"};
  auto operand = [&](int k, const std::string& lane, const std::string& index) -> std::string {
    if (k >= n_in || kinds[k] == 'c') return "c" + num(k);
    if (kinds[k] == 'b') return "b" + num(k);
    return lane.empty() ? ld + num(a.in[k].dtype) + "(PTR(x" + num(k) + "), " + index + ")" : "v" + num(k) + lane;
  };
  for (int k = 0; k < n_in; ++k) {
    if (kinds[k] == 'b') src += " const " + type + " b" + num(k) + " = " + ld + num(a.in[k].dtype) + "(PTR(x" + num(k) + "), 0);\n";
  }
  const std::string expr = integer ? int_expression(a.op) : expression(a.op, a.out_dtype);
  src += " long first = 0;\n";
  if (vec > 1) {
    src += " const long blocks = n / " + num(vec) + ";\n first = blocks * " + num(vec) + ";\n";
    src += " for (long blk = get_global_id(0); blk < blocks; blk += get_global_size(0)) {\n";
    src += "  const long g0 = blk * " + num(vec) + ";\n";
    for (int k = 0; k < n_in; ++k) {
      if (kinds[k] == 'v') {
        src += "  const " + vtype + " v" + num(k) + " = " +
               load_vec(a.in[k].dtype, vec, integer, "PTR(x" + num(k) + ")", "g0") + ";\n";
      }
    }
    src += "  " + vtype + " res;\n";
    for (int e = 0; e < vec; ++e) {
      src += "  { const long g = g0 + " + num(e) + ";";
      for (int k = 0; k < 3; ++k) src += " const " + type + " " + names[k] + " = " + operand(k, ".s" + num(e), "") + ";";
      src += " res.s" + num(e) + " = " + expr + "; }\n";
    }
    src += "  " + store_vec(a.out_dtype, vec, integer, "PTR(out)", "g0", "res") + "\n }\n";
  }
  src += " for (long g = first + get_global_id(0); g < n; g += get_global_size(0)) {\n";
  for (int k = 0; k < 3; ++k) src += "  const " + type + " " + names[k] + " = " + operand(k, "", "g") + ";\n";
  src += "  " + st + num(a.out_dtype) + "(PTR(out), g, " + expr + ");\n }\n}\n";
  return src;
}

// Reductions: kept dimensions (ks sizes, ki input strides, ko output
// strides) index the outputs, reduced ones (rs sizes, ri strides) the slice.
std::string reduce_source(const kpdrReduceArgs& a, int kept, int reduced) {
  std::string src = kPrelude;
  src += "#define WG KP_WG\n";
  const char* combine = a.op == KPDR_REDUCE_AMAX ? "kp_nanmax(acc, v)"
                        : a.op == KPDR_REDUCE_AMIN ? "kp_nanmin(acc, v)" : "acc + v";
  const char* identity = a.op == KPDR_REDUCE_AMAX ? "-INFINITY" : a.op == KPDR_REDUCE_AMIN ? "INFINITY" : "0.0f";
  const std::string load = "ld" + std::to_string(a.in_dtype) + "(PTR(in), base + r)";
  const std::string finish = std::string(a.op == KPDR_REDUCE_MEAN ? "(count == 0 ? NAN : acc / (float)count)" : "acc");
  const std::string store = "st" + std::to_string(a.out_dtype) + "(PTR(out), obase, " + finish + ");\n";
  const std::string args =
      "(BUF(in), BUF(out), long8 ks, long8 ki, long8 ko, long8 rs, long8 ri, long outputs, long count)";
  auto slice = [&](const std::string& index) {
    return decompose(index, reduced, "rs", {{"r", "ri"}});
  };
  // One work-item per output.
  src += "__kernel void kp_reduce_item" + args + " {\n";
  src += " for (long g = get_global_id(0); g < outputs; g += get_global_size(0)) {\n";
  src += "  long base, obase;\n  {\n" + decompose("g", kept, "ks", {{"b", "ki"}, {"ob", "ko"}}) +
         "  base = b; obase = ob;\n  }\n";
  src += std::string("  float acc = ") + identity + ";\n";
  src += "  for (long j = 0; j < count; ++j) {\n" + slice("j") + "   const float v = " + load + ";\n   acc = " +
         combine + ";\n  }\n  " + store + " }\n}\n";
  // One work-group per output: strided partial results, then a tree.
  src += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void kp_reduce_group" + args + " {\n";
  src += " __local float part[WG];\n const long g = get_group_id(0);\n const int t = get_local_id(0);\n";
  src += " long base, obase;\n {\n" + decompose("g", kept, "ks", {{"b", "ki"}, {"ob", "ko"}}) +
         " base = b; obase = ob;\n }\n";
  src += std::string(" float acc = ") + identity + ";\n";
  src += " for (long j = t; j < count; j += WG) {\n" + slice("j") + "  const float v = " + load + ";\n  acc = " +
         combine + ";\n }\n";
  src += " part[t] = acc;\n barrier(CLK_LOCAL_MEM_FENCE);\n";
  src += " for (int s = WG / 2; s > 0; s >>= 1) {\n  if (t < s) { const float v = part[t + s]; acc = part[t]; part[t] = " +
         std::string(combine) + "; }\n  barrier(CLK_LOCAL_MEM_FENCE);\n }\n";
  src += " if (t == 0) { acc = part[0]; " + store + " }\n}\n";
  return src;
}

// The pieces every reduce kernel shares: the op's identity, how two partial
// results combine (NaN propagates through amax/amin), and the store of a
// finished result (mean divides by the slice's count; empty mean: NaN).
struct ReduceOp {
  std::string identity, finish_store;
  int op;
  std::string combine(const std::string& x, const std::string& y) const {
    if (op == KPDR_REDUCE_AMAX) return "kp_nanmax(" + x + ", " + y + ")";
    if (op == KPDR_REDUCE_AMIN) return "kp_nanmin(" + x + ", " + y + ")";
    return x + " + " + y;
  }
  // One element folded into `acc` in a hot loop (a statement). fmax/fmin
  // ignore NaN, so amax/amin record NaN in the flag kp_nan (declared by
  // nan_flag, folded back by nan_finish) instead of testing both operands
  // per element: 3 instructions for kp_nanmax's 5, which made bfloat16 amax
  // over rows (8 elements per 16-byte load) slower than the sum (0.69 of a
  // copy on an H200 against 0.75).
  std::string fold(const std::string& acc, const std::string& x) const {
    if (op == KPDR_REDUCE_AMAX) return acc + " = fmax(" + acc + ", " + x + "); kp_nan |= isnan(" + x + ");";
    if (op == KPDR_REDUCE_AMIN) return acc + " = fmin(" + acc + ", " + x + "); kp_nan |= isnan(" + x + ");";
    return acc + " += " + x + ";";
  }
  std::string nan_flag() const { return op == KPDR_REDUCE_AMAX || op == KPDR_REDUCE_AMIN ? " int kp_nan = 0;\n" : ""; }
  std::string nan_finish(const std::string& acc) const {
    return op == KPDR_REDUCE_AMAX || op == KPDR_REDUCE_AMIN ? " if (kp_nan) " + acc + " = NAN;\n" : "";
  }
};

ReduceOp reduce_op(const kpdrReduceArgs& a) {
  ReduceOp r;
  r.op = a.op;
  r.identity = a.op == KPDR_REDUCE_AMAX ? "-INFINITY" : a.op == KPDR_REDUCE_AMIN ? "INFINITY" : "0.0f";
  const std::string finish = a.op == KPDR_REDUCE_MEAN ? "(count == 0 ? NAN : acc / (float)count)" : "acc";
  r.finish_store = "st" + num(a.out_dtype) + "(PTR(out), obase, " + finish + ");";
  return r;
}

// Second pass of a split reduction: output o combines parts[p * outputs + o]
// over p (float32 partial results), then is finished and stored through the
// kept dimensions' output strides.
std::string reduce_finish_source(const ReduceOp& r, int kept) {
  std::string src = "__kernel void kp_reduce_finish(BUF(part), BUF(out), long8 ks, long8 ko, long outputs, long parts, "
                    "long count) {\n";
  src += " const __global float* part = (const __global float*)PTR(part);\n";
  src += " for (long g = get_global_id(0); g < outputs; g += get_global_size(0)) {\n";
  src += "  float acc = " + r.identity + ";\n";
  src += "  for (long p = 0; p < parts; ++p) { const float v = part[p * outputs + g]; acc = " + r.combine("acc", "v") +
         "; }\n";
  src += "  long obase;\n  {\n" + decompose("g", kept, "ks", {{"ob", "ko"}}) + "  obase = ob;\n  }\n";
  src += "  " + r.finish_store + "\n }\n}\n";
  return src;
}

// Slices contiguous in memory (the reduced dimensions coalesce into one of
// stride 1: sums over the last dimension, full reductions). `lpr` work-items
// (a power of two up to WG) share a slice, WG / lpr slices per work-group, so
// short rows still fill work-groups; each work-item reads `vec` elements per
// step where the slice is aligned, then a local tree. `splits` > 1 cuts each
// slice into `chunk`-element pieces (a multiple of vec) whose partial results go
// to `part` for kp_reduce_finish: a few long slices still fill the device.
std::string reduce_rows_source(const kpdrReduceArgs& a, int kept, int vec) {
  const ReduceOp r = reduce_op(a);
  std::string src = std::string(kPrelude) + kVectorPrelude + "#define WG KP_WG\n";
  const std::string ld = "ld" + num(a.in_dtype) + "(PTR(in), ";
  src += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void kp_reduce_rows(BUF(in), BUF(out), BUF(part), "
         "long8 ks, long8 ki, long8 ko, long outputs, long count, int lpr, long chunk, long splits) {\n";
  src += " __local float red[WG];\n const int t = get_local_id(0), lane = t & (lpr - 1);\n";
  // 32-bit division: the 64-bit one is a long software routine on GPUs
  src += " const uint grp = (uint)get_group_id(0), nsplit = (uint)splits;\n";
  src += " const long split = grp % nsplit;\n";
  src += " const long g = (long)(grp / nsplit) * (WG / lpr) + t / lpr;\n";
  src += " float acc = " + r.identity + ";\n long obase = 0;\n" + r.nan_flag();
  src += " if (g < outputs) {\n  long base;\n  {\n" + decompose("g", kept, "ks", {{"b", "ki"}, {"ob", "ko"}}) +
         "  base = b; obase = ob;\n  }\n";
  src += "  const long j0 = split * chunk, j1 = min(count, j0 + chunk);\n  long j = j0 + lane;\n";
  if (vec > 1) {
    const std::string v = num(vec);
    src += "  if (((in_o + (ulong)(base + j0) * " + num(element_bytes(a.in_dtype)) + ") & " +
           num(vec * element_bytes(a.in_dtype) - 1) + ") == 0) {\n";
    src += "   const long jv = j0 + (j1 - j0) / " + v + " * " + v + ", step = lpr * " + v + ";\n";
    // Four vectors in flight per work-item before any is used: one at a time
    // left the loads latency-bound (0.74-0.78 of a copy on an H200).
    src += "   for (j = j0 + lane * " + v + "; j + 3 * step < jv; j += 4 * step) {\n";
    for (int u = 0; u < 4; ++u) {
      src += "    const float" + v + " v" + num(u) + " = " +
             load_vec(a.in_dtype, vec, false, "PTR(in)", "base + j + " + num(u) + " * step") + ";\n";
    }
    for (int u = 0; u < 4; ++u) {
      src += "   ";
      for (int e = 0; e < vec; ++e) src += " " + r.fold("acc", "v" + num(u) + ".s" + num(e));
      src += "\n";
    }
    src += "   }\n";
    src += "   for (; j < jv; j += step) {\n";
    src += "    const float" + v + " v = " + load_vec(a.in_dtype, vec, false, "PTR(in)", "base + j") + ";\n   ";
    for (int e = 0; e < vec; ++e) src += " " + r.fold("acc", "v.s" + num(e));
    src += "\n   }\n   j = jv + lane;\n  }\n";
  }
  src += "  for (; j < j1; j += lpr) { const float v = " + ld + "base + j); " + r.fold("acc", "v") + " }\n }\n";
  src += r.nan_finish("acc") + " red[t] = acc;\n barrier(CLK_LOCAL_MEM_FENCE);\n";
  src += " for (int s = lpr / 2; s > 0; s >>= 1) {\n  if (lane < s) { const float v = red[t + s]; acc = red[t]; red[t] = " +
         r.combine("acc", "v") + "; }\n  barrier(CLK_LOCAL_MEM_FENCE);\n }\n";
  src += " if (lane == 0 && g < outputs) {\n  acc = red[t];\n";
  src += "  if (splits == 1) { " + r.finish_store + " }\n";
  src += "  else ((__global float*)PTR(part))[split * outputs + g] = acc;\n }\n}\n";
  return src + reduce_finish_source(r, kept);
}

// Columns: one kept dimension of stride 1 (`cols` outputs, output stride
// ko0), the slice over the reduced dimensions (rs, ri): sums over the first
// dimension. A work-group is `cx` work-items across vec-column vectors by
// WG / cx across rows, so each row's bytes are read in contiguous segments of
// cx vectors (64 bytes and up), coalesced; kColumnRows rows in flight per
// work-item. Group p of `parts` takes rows [p * chunk, (p + 1) * chunk) and,
// when parts > 1, leaves its partial results in `part`; it then counts itself
// done on its column block's counter (`flags`, zeroed: Stream::counters), and
// the block's last group combines the parts, stores the outputs and zeroes
// the counter: rows split over many work-groups in one launch (a second
// launch, kp_reduce_finish, cost about as much as reading 64 MiB on an H200
// through NVIDIA's OpenCL). The partial results are written before a global
// fence and the count, and read back through volatile pointers (not a stale
// cache line).
// Four rows in flight per work-item, not eight: on the H100 (NVIDIA's
// OpenCL) eight read a 4096 x 8192 bfloat16 column sum at 0.69 of a copy and
// four at 0.76 (float32 4096 x 4096: 0.83-0.86 either way); fewer registers
// per work-item, more work-groups resident.
constexpr int kColumnRows = 4;
std::string reduce_cols_source(const kpdrReduceArgs& a, int reduced, int vec) {
  const ReduceOp r = reduce_op(a);
  std::string src = std::string(kPrelude) + kVectorPrelude + "#define WG KP_WG\n";
  const std::string v = num(vec), vt = vec > 1 ? "float" + v : "float", U = num(kColumnRows);
  src += "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void kp_reduce_cols(BUF(in), BUF(out), BUF(part), "
         "BUF(flags), long cols, long ko0, long8 rs, long8 ri, long count, long chunk, long col_blocks, int cx) {\n";
  src += " __local float red[WG * " + v + "];\n __local int last;\n";
  src += " const int t = get_local_id(0), lx = t % cx, ly = t / cx, lys = WG / cx;\n";
  src += " const uint grp = (uint)get_group_id(0), nblock = (uint)col_blocks;\n";  // 32-bit division
  src += " const long p = grp / nblock;\n";
  src += " const long c0 = ((long)(grp % nblock) * cx + lx) * " + v + ";\n";
  src += " " + vt + " acc = (" + vt + ")(" + r.identity + ");\n";
  src += " if (c0 < cols) {\n  const long j1 = min(count, (p + 1) * chunk);\n  long j = p * chunk + ly;\n";
  const std::string load = vec > 1 ? load_vec(a.in_dtype, vec, false, "PTR(in)", "r + c0")
                                   : "ld" + num(a.in_dtype) + "(PTR(in), r + c0)";
  auto fold = [&](const std::string& x) {
    if (vec == 1) return "   acc = " + r.combine("acc", x) + ";\n";
    std::string code = "  ";
    for (int e = 0; e < vec; ++e) code += " acc.s" + num(e) + " = " + r.combine("acc.s" + num(e), x + ".s" + num(e)) + ";";
    return code + "\n";
  };
  // All the block's loads are issued before any is used: one row at a time
  // left the kernel latency-bound.
  src += "  for (; j + " + num(kColumnRows - 1) + " * lys < j1; j += " + U + " * lys) {\n   " + vt + " v[" + U + "];\n";
  for (int u = 0; u < kColumnRows; ++u) {
    src += "   {\n" + decompose("j + " + num(u) + " * lys", reduced, "rs", {{"r", "ri"}}) + "   v[" + num(u) +
           "] = " + load + ";\n   }\n";
  }
  for (int u = 0; u < kColumnRows; ++u) src += fold("v[" + num(u) + "]");
  src += "  }\n";
  src += "  for (; j < j1; j += lys) {\n" + decompose("j", reduced, "rs", {{"r", "ri"}});
  src += "   const " + vt + " w = " + load + ";\n" + fold("w") + "  }\n }\n";
  auto lane = [&](int e) { return vec > 1 ? "acc.s" + num(e) : std::string("acc"); };
  for (int e = 0; e < vec; ++e) src += " red[t * " + v + " + " + num(e) + "] = " + lane(e) + ";\n";
  src += " barrier(CLK_LOCAL_MEM_FENCE);\n";
  src += " for (int s = lys / 2; s > 0; s >>= 1) {\n  if (ly < s) {\n";
  src += "   for (int e = 0; e < " + v + "; ++e) { const float x = red[t * " + v + " + e], y = red[(t + s * cx) * " + v +
         " + e]; red[t * " + v + " + e] = " + r.combine("x", "y") + "; }\n  }\n  barrier(CLK_LOCAL_MEM_FENCE);\n }\n";
  src += " const uint parts = get_num_groups(0) / nblock;\n";
  src += " if (ly == 0 && c0 < cols) {\n  for (int e = 0; e < " + v + "; ++e) {\n";
  src += "   float acc = red[t * " + v + " + e];\n";
  src += "   if (parts == 1) { const long obase = (c0 + e) * ko0; " + r.finish_store + " }\n";
  src += "   else ((__global float*)PTR(part))[p * cols + c0 + e] = acc;\n  }\n }\n";
  // (barriers outside branches, even uniform ones: PoCL)
  src += " mem_fence(CLK_GLOBAL_MEM_FENCE);\n barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);\n";
  src += " if (t == 0) last = parts > 1 && atomic_inc((volatile __global uint*)PTR(flags) + grp % nblock) == parts - 1;\n";
  src += " barrier(CLK_LOCAL_MEM_FENCE);\n";
  src += " if (last) {\n  mem_fence(CLK_GLOBAL_MEM_FENCE);\n";
  src += "  const volatile __global float* q = (const volatile __global float*)PTR(part);\n";
  src += "  if (ly == 0 && c0 < cols) {\n   for (int e = 0; e < " + v + "; ++e) {\n";
  src += "    float acc = q[c0 + e];\n";
  src += "    for (uint k = 1; k < parts; ++k) { const float x = q[k * cols + c0 + e]; acc = " + r.combine("acc", "x") + "; }\n";
  src += "    const long obase = (c0 + e) * ko0; " + r.finish_store + "\n   }\n  }\n";
  src += "  if (t == 0) ((volatile __global uint*)PTR(flags))[grp % nblock] = 0;\n }\n}\n";
  return src;
}

}  // namespace

kpdrError_t pointwise(const kpdrPointwiseArgs* a, kpdrStream_t handle) {
  return guarded("pointwise", [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = stream_of("pointwise", handle, &runtime, &stream)) return error;
    if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "pointwise: args is NULL");
    const int n_in = arity(a->op);
    if (n_in == 0) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, "pointwise: unknown op code " + std::to_string(a->op));
    }
    int64_t n = 0;
    if (kpdrError_t error = check_shape("pointwise", a->ndim, a->sizes, &n)) return error;
    bool known = known_dtype(a->out_dtype);
    for (int k = 0; k < n_in; ++k) known = known && known_dtype(a->in[k].dtype);
    if (!known) return fail(KPDR_ERROR_INVALID_VALUE, "pointwise: unknown kpdrDtype");
    const bool integer = integer_call(*a, n_in);
    if ((integer ? int_expression(a->op) : expression(a->op, a->out_dtype)) == nullptr || (index_op(a->op) && a->ndim < 2)) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, "pointwise: op code " + std::to_string(a->op) +
                                                " does not take these dtypes or this rank");
    }
    if (n == 0) return KPDR_SUCCESS;
    const int device = stream->device();
    if (a->out == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "pointwise: out is NULL");
    // Fewer dimensions, fewer divisions: those every operand walks as one
    // merge (TRIL/TRIU read the last two dimensions' indices: kept as given).
    kpdrPointwiseArgs c = *a;
    if (!index_op(c.op)) {
      std::vector<int64_t*> strides = {c.out_strides};
      for (int k = 0; k < n_in; ++k) {
        if (c.in[k].data != nullptr) strides.push_back(c.in[k].strides);
      }
      c.ndim = coalesce(c.ndim, c.sizes, strides);
    }
    static const char* const names[3] = {"in[0].data", "in[1].data", "in[2].data"};
    const Device& info = runtime->device(device);
    // Every tensor contiguous or a single broadcast element: the flat kernel.
    char kinds[4] = "ccc";
    bool flat = !index_op(c.op) && c.ndim <= 1 && (c.ndim == 0 || c.out_strides[0] == 1);
    for (int k = 0; k < n_in && flat; ++k) {
      if (c.in[k].data == nullptr) continue;
      const int64_t stride = c.ndim == 0 ? 1 : c.in[k].strides[0];
      flat = stride == 0 || stride == 1;
      kinds[k] = stride == 0 ? 'b' : 'v';
    }
    if (flat) {
      int widest = element_bytes(c.out_dtype);
      for (int k = 0; k < n_in; ++k) {
        if (kinds[k] == 'v') widest = std::max(widest, element_bytes(c.in[k].dtype));
      }
      int vec = integer ? 4 : widest <= 2 ? 8 : 4;  // 16 bytes of the widest float type per access
      auto aligned = [&](const void* ptr, int dtype) {
        uint64_t offset = 0;
        return offset_of(runtime, ptr, &offset) && offset % (static_cast<uint64_t>(vec) * element_bytes(dtype)) == 0;
      };
      bool all_aligned = aligned(c.out, c.out_dtype);
      for (int k = 0; k < n_in; ++k) {
        if (kinds[k] == 'v') all_aligned = all_aligned && aligned(c.in[k].data, c.in[k].dtype);
      }
      if (!all_aligned) vec = 1;
      Args args(runtime, device, "pointwise");
      if (kpdrError_t error = args.tensor(c.out, "out")) return error;
      std::string key = "pf" + num(c.op) + "o" + num(c.out_dtype) + "v" + num(vec) + (integer ? "I" : "");
      for (int k = 0; k < 3; ++k) {
        if (kinds[k] != 'c') {
          if (kpdrError_t error = args.tensor(c.in[k].data, names[k])) return error;
          key += std::string(1, kinds[k]) + num(c.in[k].dtype);
        } else {
          args.unused_tensor();
          key += "c";
        }
        if (integer) args.i64(static_cast<int64_t>(c.in[k].value));
        else args.f32(static_cast<float>(c.in[k].value));
      }
      args.i64(n);
      if (integer) args.i64(static_cast<int64_t>(c.alpha));
      else args.f32(static_cast<float>(c.alpha));
      Kernel* kernel = nullptr;
      if (kpdrError_t error = kernel_for(runtime, device, key, "kp_pointwise_flat",
                                         [&] { return pointwise_flat_source(c, n_in, integer, kinds, vec); }, &kernel)) {
        return error;
      }
      const int64_t work = vec > 1 ? std::max(n / vec, n % vec) : n;
      return args.run(kernel, *stream, grid(work, kernel->work_group, info.compute_units), kernel->work_group);
    }
    Args args(runtime, device, "pointwise");
    if (kpdrError_t error = args.tensor(c.out, "out")) return error;
    args.long8(c.out_strides, c.ndim);
    std::string key = "pw" + std::to_string(c.op) + "o" + std::to_string(c.out_dtype) + "d" + std::to_string(c.ndim) +
                      (integer ? "I" : "");
    for (int k = 0; k < 3; ++k) {
      const bool tensor = k < n_in && c.in[k].data != nullptr;
      if (tensor) {
        if (kpdrError_t error = args.tensor(c.in[k].data, names[k])) return error;
      } else {
        args.unused_tensor();
      }
      args.long8(c.in[k].strides, tensor ? c.ndim : 0);
      if (integer) args.i64(static_cast<int64_t>(c.in[k].value));
      else args.f32(static_cast<float>(c.in[k].value));
      key += tensor ? "t" + std::to_string(c.in[k].dtype) : std::string("s");
    }
    args.long8(c.sizes, c.ndim);
    args.i64(n);
    if (integer) args.i64(static_cast<int64_t>(c.alpha));
    else args.f32(static_cast<float>(c.alpha));
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, "kp_pointwise",
                                       [&] { return pointwise_source(c, n_in, integer); }, &kernel)) {
      return error;
    }
    const size_t wg = kernel->work_group;
    return args.run(kernel, *stream, grid(n, wg, info.compute_units), wg);
  });
}

kpdrError_t reduce(const kpdrReduceArgs* a, kpdrStream_t handle) {
  return guarded("reduce", [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = stream_of("reduce", handle, &runtime, &stream)) return error;
    if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "reduce: args is NULL");
    if (a->op < KPDR_REDUCE_SUM || a->op > KPDR_REDUCE_STD) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, "reduce: unknown op code " + std::to_string(a->op));
    }
    int64_t total = 0;
    if (kpdrError_t error = check_shape("reduce", a->ndim, a->sizes, &total)) return error;
    if ((a->reduce_mask >> a->ndim) != 0) {
      return fail(KPDR_ERROR_INVALID_VALUE, "reduce: reduce_mask names a dimension beyond ndim");
    }
    if (a->op >= KPDR_REDUCE_ARGMAX || a->out_dtype == KPDR_DTYPE_INT64) {  // losses.cpp
      return reduce_statistics(a, *stream, runtime);  // argmax/argmin, var/std, integer sums
    }
    if (!known_dtype(a->in_dtype) || !float_dtype(a->out_dtype)) {
      return fail(KPDR_ERROR_INVALID_VALUE, "reduce: unknown kpdrDtype");
    }
    int64_t ks[8], ki[8], ko[8], rs[8], ri[8];
    int kept = 0, reduced = 0;
    int64_t outputs = 1, count = 1;
    for (int d = 0; d < a->ndim; ++d) {
      if (a->reduce_mask & (1u << d)) {
        rs[reduced] = a->sizes[d];
        ri[reduced++] = a->in_strides[d];
        count *= a->sizes[d];
      } else {
        ks[kept] = a->sizes[d];
        ki[kept] = a->in_strides[d];
        ko[kept++] = a->out_strides[d];
        outputs *= a->sizes[d];
      }
    }
    if (outputs == 0) return KPDR_SUCCESS;
    kept = coalesce(kept, ks, {ki, ko});
    reduced = coalesce(reduced, rs, {ri});
    const int device = stream->device();
    if (a->out == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "reduce: out is NULL");
    if (count > 0 && a->in == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "reduce: in is NULL");
    // Empty slices never read `in`: out's buffer stands in for it.
    const void* in = count > 0 ? a->in : a->out;
    const int compute_units = runtime->device(device).compute_units;
    const int64_t target_groups = 8 * static_cast<int64_t>(std::max(1, compute_units));  // enough to fill the device
    const int in_bytes = element_bytes(a->in_dtype);
    // Elements per vector access of the contiguous paths: 16 bytes (8 bool).
    int vec = a->in_dtype <= KPDR_DTYPE_BOOL ? std::min(8, 16 / in_bytes) : 1;
    uint64_t in_offset = 0;
    const bool found = offset_of(runtime, in, &in_offset);
    const std::string key_tail = num(a->op) + "i" + num(a->in_dtype) + "o" + num(a->out_dtype) + "k" + num(kept) + "r" +
                                 num(reduced) + "v";
    const bool rows = reduced == 0 || (reduced == 1 && ri[0] == 1);
    // (the kernels index work-groups in 32 bits)
    if ((rows || (kept == 1 && ki[0] == 1)) && outputs < (int64_t{1} << 31)) {
      if (!rows) {  // vectors of whole aligned column groups only
        bool ok = found && ks[0] % vec == 0 && in_offset % (static_cast<uint64_t>(vec) * in_bytes) == 0;
        for (int d = 0; d < reduced; ++d) ok = ok && ri[d] % vec == 0;
        if (!ok) vec = 1;
      }
      const std::string key = (rows ? "rr" : "rc") + key_tail + num(vec);
      const char* name = rows ? "kp_reduce_rows" : "kp_reduce_cols";
      Kernel* kernel = nullptr;
      Kernel* finish = nullptr;
      auto make = [&] { return rows ? reduce_rows_source(*a, kept, vec) : reduce_cols_source(*a, reduced, vec); };
      if (kpdrError_t error = kernel_for(runtime, device, key, name, make, &kernel)) return error;
      if (rows) {
        if (kpdrError_t error = kernel_for(runtime, device, key, "kp_reduce_finish", make, &finish)) return error;
      }
      const int64_t wg = static_cast<int64_t>(kernel->work_group);
      int64_t parts = 1, chunk = std::max<int64_t>(count, 1), groups = 0, lpr = 1, cx = 1;
      if (rows) {
        // Work-items per slice: about four vectors each, a power of two up to WG.
        const int64_t vectors = (count + vec - 1) / vec;
        while (lpr < wg && lpr * 4 < vectors) lpr *= 2;
        groups = (outputs + wg / lpr - 1) / (wg / lpr);
        if (groups < target_groups && count > lpr * vec * 8) {
          parts = std::min((target_groups + groups - 1) / groups, (count + lpr * vec * 4 - 1) / (lpr * vec * 4));
        }
        chunk = (count + parts - 1) / parts;
        chunk = (chunk + vec - 1) / vec * vec;
      } else {
        // Column segments of 8 vectors (128 bytes), else 4 (64 bytes: still
        // whole 32-byte sectors) where 8 give fewer than two work-groups per
        // compute unit and the rows are too few to split (on the H100 the
        // 64-byte segments read a 4096 x 8192 bfloat16 sum at 0.63 of a copy,
        // 128-byte ones split over rows at 0.69); then the rows are split over `parts` work-groups per
        // column block (one launch: the last group finishes) until about four
        // work-groups per compute unit run, each work-item keeping at least two
        // blocks of kColumnRows rows. On an H200 one work-group per column
        // block (256 of them, 64 rows per work-item for a 4096 x 4096 sum) read
        // at 0.49 of a copy: 16 warps per SM with 8 loads in flight each hid
        // too little of the memory's latency.
        cx = std::min<int64_t>(8, wg);
        groups = (ks[0] + cx * vec - 1) / (cx * vec);
        if (groups < 2 * compute_units && count < 4 * (wg / cx) * kColumnRows) {
          cx = std::min<int64_t>(4, wg);
          groups = (ks[0] + cx * vec - 1) / (cx * vec);
        }
        const int64_t block = (wg / cx) * kColumnRows;  // rows a work-group reads per step
        if (count >= 4 * block && groups <= static_cast<int64_t>(Stream::kCounters)) {
          parts = std::min((4 * static_cast<int64_t>(std::max(1, compute_units)) + groups - 1) / groups,
                           count / (2 * block));
        }
        chunk = (std::max<int64_t>(count, 1) + parts - 1) / parts;
        if (parts > 1) chunk = (chunk + block - 1) / block * block;  // whole steps: no row-by-row tail
      }
      parts = (std::max<int64_t>(count, 1) + chunk - 1) / chunk;
      cl_mem part = nullptr;
      const size_t part_bytes = static_cast<size_t>(parts * outputs) * sizeof(float);
      if (parts > 1) {
        part = stream->borrow_workspace(part_bytes);
        if (part == nullptr) {
          cl_int status = CL_SUCCESS;
          part = runtime->cl().CreateBuffer(runtime->context(), CL_MEM_READ_WRITE, part_bytes, nullptr, &status);
          if (part == nullptr || status != CL_SUCCESS) {
            return fail(KPDR_ERROR_OUT_OF_MEMORY, "reduce: a scratch buffer of " + bytes_text(part_bytes) +
                                                      " for partial results failed (" + cl_error_name(status) + ")");
          }
        }
      }
      // The kernels that use `part` are enqueued before it goes back (the queue is in order).
      struct Give {
        Stream& stream;
        cl_mem mem;
        size_t bytes;
        ~Give() { if (mem != nullptr) stream.return_workspace(mem, bytes); }
      } give{*stream, part, part_bytes};
      Args args(runtime, device, "reduce");
      if (kpdrError_t error = args.tensor(in, "in")) return error;
      if (kpdrError_t error = args.tensor(a->out, "out")) return error;
      if (part != nullptr) args.mem(part, 0);
      else args.unused_tensor();
      if (!rows) {
        cl_mem flags = nullptr;
        if (parts > 1) {
          if (kpdrError_t error = stream->counters(&flags)) return error;
          args.mem(flags, 0);
        } else {
          args.unused_tensor();
        }
      }
      if (rows) {
        args.long8(ks, kept); args.long8(ki, kept); args.long8(ko, kept);
        args.i64(outputs); args.i64(count); args.i32(static_cast<int32_t>(lpr)); args.i64(chunk); args.i64(parts);
      } else {
        args.i64(ks[0]); args.i64(ko[0]); args.long8(rs, reduced); args.long8(ri, reduced);
        args.i64(count); args.i64(chunk); args.i64(groups); args.i32(static_cast<int32_t>(cx));
      }
      if (kpdrError_t error = args.run(kernel, *stream, static_cast<size_t>(groups * parts * wg), wg)) return error;
      if (parts == 1 || !rows) return KPDR_SUCCESS;  // (columns finish in their last work-groups)
      Args second(runtime, device, "reduce");
      second.mem(part, 0);
      if (kpdrError_t error = second.tensor(a->out, "out")) return error;
      second.long8(ks, kept); second.long8(ko, kept);
      second.i64(outputs); second.i64(parts); second.i64(count);
      return second.run(finish, *stream, grid(outputs, finish->work_group, compute_units), finish->work_group);
    }
    Args args(runtime, device, "reduce");
    if (kpdrError_t error = args.tensor(in, "in")) return error;
    if (kpdrError_t error = args.tensor(a->out, "out")) return error;
    args.long8(ks, kept); args.long8(ki, kept); args.long8(ko, kept);
    args.long8(rs, reduced); args.long8(ri, reduced);
    args.i64(outputs); args.i64(count);
    const std::string key = "rd" + key_tail;
    const bool groups = count >= 256;
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, groups ? "kp_reduce_group" : "kp_reduce_item",
                                       [&] { return reduce_source(*a, kept, reduced); }, &kernel)) {
      return error;
    }
    const size_t wg = kernel->work_group;
    if (groups) return args.run(kernel, *stream, static_cast<size_t>(outputs) * wg, wg);
    return args.run(kernel, *stream, grid(outputs, wg, compute_units), wg);
  });
}

}  // namespace kpdr_opencl

// The pointwise and reduce entries of the OpenCL runtime (kpdr.h's core-op
// section). Each call's OpenCL C is generated for what it needs — the op's
// expression, every operand's dtype (or a scalar in its place) and the number
// of dimensions, unrolled — and built once per device through the kernel
// cache (in memory and on disk), so a training step compiles a few dozen
// small programs on its first iteration and none after.
//
// Pointwise: one work-item per output element (grid-stride), the linear
// index decomposed row-major over the sizes. Reduce: a work-group per output
// element summing (or min/max-ing) a strided slice into local memory, then a
// tree; small reductions take one work-item per output instead.
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
inline float kp_sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
inline float kp_nanmax(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmax(a, b); }
inline float kp_nanmin(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : fmin(a, b); }
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

// The op's expression over x, y, z (float) and alpha; NULL for an unknown code.
const char* expression(int32_t op) {
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
  }
  return nullptr;
}

int arity(int32_t op) {
  if (op >= KPDR_POINTWISE_COPY && op <= KPDR_POINTWISE_SIGN) return 1;
  if (op >= KPDR_POINTWISE_ADD && op <= KPDR_POINTWISE_LERP) return 2;
  if (op >= KPDR_POINTWISE_THRESHOLD_BACKWARD && op <= KPDR_POINTWISE_SILU_BACKWARD) return 2;
  if (op >= KPDR_POINTWISE_WHERE && op <= KPDR_POINTWISE_ADDCDIV) return 3;
  return 0;
}

bool known_dtype(int d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_BOOL; }
bool float_dtype(int d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_BFLOAT16; }

}  // namespace

// Decomposes `index` row-major over `count` dimensions of sizes `sz` (a
// long8 argument) into offsets += i_d * stride for each (name, long8) pair.
std::string decompose(const std::string& index, int count, const std::string& sz,
                      const std::vector<std::pair<std::string, std::string>>& offsets) {
  std::string code = "  long rest = " + index + ";\n";
  for (const auto& [name, strides] : offsets) code += "  long " + name + " = 0;\n";
  for (int d = count - 1; d >= 0; --d) {
    const std::string s = ".s" + std::to_string(d);
    code += "  { const long i = rest % " + sz + s + "; rest /= " + sz + s + ";";
    for (const auto& [name, strides] : offsets) code += " " + name + " += i * " + strides + s + ";";
    code += " }\n";
  }
  return code;
}

namespace {

std::string pointwise_source(const kpdrPointwiseArgs& a, int n_in) {
  std::string src = kPrelude;
  src += "__kernel void kp_pointwise(BUF(out), long8 os";
  for (int k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k);
    src += ", BUF(x" + n + "), long8 s" + n + ", float c" + n;
  }
  src += ", long8 sz, long n, float alpha) {\n";
  src += " for (long g = get_global_id(0); g < n; g += get_global_size(0)) {\n";
  std::vector<std::pair<std::string, std::string>> offsets = {{"o", "os"}};
  for (int k = 0; k < n_in; ++k) {
    if (a.in[k].data != nullptr) offsets.push_back({"a" + std::to_string(k), "s" + std::to_string(k)});
  }
  src += decompose("g", a.ndim, "sz", offsets);
  const char* names[3] = {"x", "y", "z"};
  for (int k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k);
    src += std::string("  const float ") + names[k] + " = ";
    if (k < n_in && a.in[k].data != nullptr) {
      src += "ld" + std::to_string(a.in[k].dtype) + "(PTR(x" + n + "), a" + n + ");\n";
    } else {
      src += "c" + n + ";\n";
    }
  }
  src += "  st" + std::to_string(a.out_dtype) + "(PTR(out), o, " + expression(a.op) + ");\n }\n}\n";
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

}  // namespace

kpdrError_t pointwise(const kpdrPointwiseArgs* a, kpdrStream_t handle) {
  return guarded("pointwise", [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = stream_of("pointwise", handle, &runtime, &stream)) return error;
    if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "pointwise: args is NULL");
    const int n_in = arity(a->op);
    if (n_in == 0 || expression(a->op) == nullptr) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, "pointwise: unknown op code " + std::to_string(a->op));
    }
    int64_t n = 0;
    if (kpdrError_t error = check_shape("pointwise", a->ndim, a->sizes, &n)) return error;
    bool known = known_dtype(a->out_dtype);
    for (int k = 0; k < n_in; ++k) known = known && (a->in[k].data == nullptr || known_dtype(a->in[k].dtype));
    if (!known) return fail(KPDR_ERROR_INVALID_VALUE, "pointwise: unknown kpdrDtype");
    if (n == 0) return KPDR_SUCCESS;
    const int device = stream->device();
    Args args(runtime, device, "pointwise");
    if (a->out == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "pointwise: out is NULL");
    if (kpdrError_t error = args.tensor(a->out, "out")) return error;
    args.long8(a->out_strides, a->ndim);
    std::string key = "pw" + std::to_string(a->op) + "o" + std::to_string(a->out_dtype) + "d" + std::to_string(a->ndim);
    for (int k = 0; k < 3; ++k) {
      const bool tensor = k < n_in && a->in[k].data != nullptr;
      if (tensor) {
        static const char* const names[3] = {"in[0].data", "in[1].data", "in[2].data"};
        if (kpdrError_t error = args.tensor(a->in[k].data, names[k])) return error;
      } else {
        args.unused_tensor();
      }
      args.long8(a->in[k].strides, tensor ? a->ndim : 0);
      args.f32(static_cast<float>(a->in[k].value));
      key += tensor ? "t" + std::to_string(a->in[k].dtype) : std::string("s");
    }
    args.long8(a->sizes, a->ndim);
    args.i64(n);
    args.f32(static_cast<float>(a->alpha));
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, "kp_pointwise",
                                       [&] { return pointwise_source(*a, n_in); }, &kernel)) {
      return error;
    }
    const size_t wg = kernel->work_group;
    return args.run(kernel, *stream, grid(n, wg, runtime->device(device).compute_units), wg);
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
    const int device = stream->device();
    Args args(runtime, device, "reduce");
    if (a->out == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "reduce: out is NULL");
    if (count > 0 && a->in == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "reduce: in is NULL");
    // Empty slices never read `in`: out's buffer stands in for it.
    if (kpdrError_t error = args.tensor(count > 0 ? a->in : a->out, "in")) return error;
    if (kpdrError_t error = args.tensor(a->out, "out")) return error;
    args.long8(ks, kept); args.long8(ki, kept); args.long8(ko, kept);
    args.long8(rs, reduced); args.long8(ri, reduced);
    args.i64(outputs); args.i64(count);
    const std::string key = "rd" + std::to_string(a->op) + "i" + std::to_string(a->in_dtype) + "o" +
                            std::to_string(a->out_dtype) + "k" + std::to_string(kept) + "r" + std::to_string(reduced);
    const bool groups = count >= 256;
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, groups ? "kp_reduce_group" : "kp_reduce_item",
                                       [&] { return reduce_source(*a, kept, reduced); }, &kernel)) {
      return error;
    }
    const size_t wg = kernel->work_group;
    if (groups) return args.run(kernel, *stream, static_cast<size_t>(outputs) * wg, wg);
    return args.run(kernel, *stream, grid(outputs, wg, runtime->device(device).compute_units), wg);
  });
}

}  // namespace kpdr_opencl

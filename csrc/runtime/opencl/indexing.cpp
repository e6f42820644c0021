// The gather and scatter entries of the OpenCL runtime (kpdrIndexArgs, kpdr.h's
// core-op section). OpenCL C is generated per call shape — gather or scatter,
// the element dtype, the rank, each index operand's dtype, accumulation —
// and built once per device through the kernel cache, as pointwise.cpp does.
// One work-item per element of `sizes` (grid-stride). Gather copies bits;
// scatter with accumulate adds atomically: float32 through a 32-bit
// compare-and-swap loop, float16/bfloat16 through a compare-and-swap of the
// 32-bit word holding the element (device buffers are whole words), so the
// order of additions to one element, and its rounding, may vary run to run.
// An out-of-range index records (operand + 1, value) in args.error.
#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "generated.h"
#include "indexing.h"
#include "kernel_cache.h"
#include "runtime.h"

namespace kpdr_opencl {
namespace {

const char* const kIndexPrelude = R"CLC(
#define BUF(n) __global uchar* n##_b, ulong n##_o
#define PTR(n) (n##_b + n##_o)
inline float ldf0(const __global uchar* p, long i) { return ((const __global float*)p)[i]; }
inline float ldf1(const __global uchar* p, long i) { return vload_half((size_t)i, (const __global half*)p); }
inline float ldf2(const __global uchar* p, long i) { return as_float(((uint)((const __global ushort*)p)[i]) << 16); }
inline void stf0(__global uchar* p, long i, float v) { ((__global float*)p)[i] = v; }
inline void stf1(__global uchar* p, long i, float v) { vstore_half_rte(v, (size_t)i, (__global half*)p); }
inline ushort bf16_bits(float v) {
  uint u = as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}
inline void stf2(__global uchar* p, long i, float v) { ((__global ushort*)p)[i] = bf16_bits(v); }
inline float half_value(ushort bits) { return vload_half(0, (const __private half*)&bits); }
inline ushort half_bits(float v) { ushort bits; vstore_half_rte(v, 0, (__private half*)&bits); return bits; }
/* atomic adds: b the buffer's base (word aligned), off the element's byte offset */
inline void add0(__global uchar* b, ulong off, float v) {
  volatile __global uint* q = (volatile __global uint*)(b + off);
  uint old = *q, seen;
  do { seen = old; old = atomic_cmpxchg(q, seen, as_uint(as_float(seen) + v)); } while (old != seen);
}
inline void add16(__global uchar* b, ulong off, float v, int bf16) {
  volatile __global uint* q = (volatile __global uint*)(b + (off & ~(ulong)3));
  const uint shift = (off & 2) ? 16u : 0u;
  uint old = *q, seen;
  do {
    seen = old;
    const ushort bits = (ushort)(seen >> shift);
    const float sum = (bf16 ? as_float(((uint)bits) << 16) : half_value(bits)) + v;
    const uint now = (uint)(bf16 ? bf16_bits(sum) : half_bits(sum));
    old = atomic_cmpxchg(q, seen, (seen & ~(0xffffu << shift)) | (now << shift));
  } while (old != seen);
}
)CLC";

int element_size(kpdrDtype dtype) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: case KPDR_DTYPE_INT32: return 4;
    case KPDR_DTYPE_FLOAT16: case KPDR_DTYPE_BFLOAT16: return 2;
    case KPDR_DTYPE_BOOL: return 1;
    case KPDR_DTYPE_INT64: return 8;
  }
  return 0;
}

const char* bits_type(int size) {
  return size == 8 ? "ulong" : size == 4 ? "uint" : size == 2 ? "ushort" : "uchar";
}

// What one generated program depends on.
struct Shape {
  bool scatter;
  kpdrDtype dtype;
  int ndim, num_indices;
  int index_dtypes[KPDR_MAX_DIMS];
  bool accumulate, scale, skip, error, wrap;
  std::string key() const {
    std::string k = std::string(scatter ? "sc" : "ga") + std::to_string(dtype) + "d" + std::to_string(ndim) + "i";
    for (int j = 0; j < num_indices; ++j) k += std::to_string(index_dtypes[j]);
    return k + (accumulate ? "A" : "") + (scale ? "S" : "") + (skip ? "K" : "") + (error ? "E" : "") + (wrap ? "W" : "");
  }
};

std::string source(const Shape& s) {
  const int size = element_size(s.dtype);
  const std::string T = bits_type(size);
  std::string src = kIndexPrelude;
  src += "__kernel void kp_index(BUF(dense), long8 ds, BUF(indexed), long8 xs";
  for (int k = 0; k < s.num_indices; ++k) {
    const std::string n = std::to_string(k);
    src += ", BUF(i" + n + "), long8 is" + n + ", long size" + n + ", long stride" + n;
  }
  src += ", long8 sz, long n, float alpha, long skip_value, BUF(err)) {\n";
  src += " for (long g = get_global_id(0); g < n; g += get_global_size(0)) {\n";
  src += "  long rest = g, d = 0, x = 0";
  for (int k = 0; k < s.num_indices; ++k) src += ", o" + std::to_string(k) + " = 0";
  src += ";\n";
  for (int dim = s.ndim - 1; dim >= 0; --dim) {
    const std::string c = ".s" + std::to_string(dim);
    src += "  { const long i = rest % sz" + c + "; rest /= sz" + c + "; d += i * ds" + c + "; x += i * xs" + c + ";";
    for (int k = 0; k < s.num_indices; ++k) {
      const std::string n = std::to_string(k);
      src += " o" + n + " += i * is" + n + c + ";";
    }
    src += " }\n";
  }
  src += "  int bad = 0;\n  long first = 0;\n";
  for (int k = 0; k < s.num_indices; ++k) {
    const std::string n = std::to_string(k);
    const std::string type = s.index_dtypes[k] == KPDR_DTYPE_INT32 ? "int" : "long";
    src += "  if (!bad) {\n   long v = (long)((const __global " + type + "*)PTR(i" + n + "))[o" + n + "];\n";
    if (k == 0) src += "   first = v;\n";
    if (k == 0 && s.skip) src += "   if (v == skip_value) continue;  /* skipped: not checked (kpdr.h) */\n";
    src += "   if (v < " + std::string(s.wrap ? "-size" + n : "0") + " || v >= size" + n + ") {\n    bad = 1;\n";
    if (s.error) {
      src += "    ((__global long*)PTR(err))[1] = v;\n    ((__global long*)PTR(err))[0] = " + std::to_string(k + 1) + ";\n";
    }
    src += "   } else {\n    x += (v < 0 ? v + size" + n + " : v) * stride" + n + ";\n   }\n  }\n";
  }
  if (!s.scatter) {
    src += "  ((__global " + T + "*)PTR(dense))[d] = bad ? (" + T + ")0 : ((const __global " + T + "*)PTR(indexed))[x];\n";
  } else {
    src += "  if (bad";
    if (s.skip) src += " || first == skip_value";
    src += ") continue;\n";
    const std::string dt = std::to_string(s.dtype);
    if (s.accumulate) {
      src += "  const float v = alpha * ldf" + dt + "(PTR(dense), d);\n";
      if (s.dtype == KPDR_DTYPE_FLOAT32) src += "  add0(indexed_b, indexed_o + (ulong)x * 4, v);\n";
      else src += "  add16(indexed_b, indexed_o + (ulong)x * 2, v, " + std::string(s.dtype == KPDR_DTYPE_BFLOAT16 ? "1" : "0") + ");\n";
    } else if (s.scale) {
      src += "  stf" + dt + "(PTR(indexed), x, alpha * ldf" + dt + "(PTR(dense), d));\n";
    } else {
      src += "  ((__global " + T + "*)PTR(indexed))[x] = ((const __global " + T + "*)PTR(dense))[d];\n";
    }
  }
  src += " }\n}\n";
  return src;
}

kpdrError_t run_index(const char* api, bool scatter, const kpdrIndexArgs* a, kpdrStream_t handle) {
  return guarded(api, [&]() -> kpdrError_t {
    const std::string name(api);
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    int64_t n = 0;
    if (kpdrError_t error = check_shape(api, a->ndim, a->sizes, &n)) return error;
    if (a->num_indices < 1 || a->num_indices > KPDR_MAX_DIMS) {
      return fail(KPDR_ERROR_INVALID_VALUE, name + ": num_indices " + std::to_string(a->num_indices) +
                                                " is outside 1.." + std::to_string(KPDR_MAX_DIMS));
    }
    if (element_size(a->dtype) == 0) return fail(KPDR_ERROR_INVALID_VALUE, name + ": unknown kpdrDtype");
    Shape shape{};
    shape.scatter = scatter;
    shape.dtype = a->dtype;
    shape.ndim = a->ndim;
    shape.num_indices = a->num_indices;
    for (int k = 0; k < a->num_indices; ++k) {
      const int t = a->indices[k].dtype;
      if (t != KPDR_DTYPE_INT64 && t != KPDR_DTYPE_INT32) {
        return fail(KPDR_ERROR_INVALID_VALUE, name + ": indices[" + std::to_string(k) + "] must be INT64 or INT32");
      }
      shape.index_dtypes[k] = t;
    }
    shape.accumulate = scatter && a->accumulate != 0;
    shape.scale = scatter && a->alpha != 1.0;
    shape.skip = scatter && a->skip != 0;
    shape.error = a->error != nullptr;
    shape.wrap = a->wrap != 0;
    if ((shape.accumulate || shape.scale) && !is_float_dtype(a->dtype)) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, name + ": accumulating or scaling integers is not supported here");
    }
    if (n == 0) return KPDR_SUCCESS;
    const int device = stream->device();
    // NULL is checked here: Args::tensor would only say "not device memory".
    if (a->dense == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, name + ": dense is NULL");
    if (a->indexed == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, name + ": indexed is NULL");
    Args args(runtime, device, api);
    if (kpdrError_t e = args.tensor(a->dense, "dense")) return e;
    args.long8(a->dense_strides, a->ndim);
    if (kpdrError_t e = args.tensor(a->indexed, "indexed")) return e;
    args.long8(a->indexed_strides, a->ndim);
    for (int k = 0; k < a->num_indices; ++k) {
      const std::string operand = "indices[" + std::to_string(k) + "].data";
      if (a->indices[k].data == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, name + ": " + operand + " is NULL");
      if (kpdrError_t e = args.tensor(a->indices[k].data, operand.c_str())) return e;
      args.long8(a->indices[k].strides, a->ndim);
      args.i64(a->indices[k].size);
      args.i64(a->indices[k].stride);
    }
    args.long8(a->sizes, a->ndim);
    args.i64(n);
    args.f32(static_cast<float>(a->alpha));
    args.i64(a->skip_value);
    // Without an error buffer, dense's stands in (the kernel then never writes it).
    if (kpdrError_t e = args.tensor(a->error != nullptr ? static_cast<const void*>(a->error) : a->dense, "error")) {
      return e;
    }
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, shape.key(), "kp_index", [&] { return source(shape); },
                                       &kernel)) {
      return error;
    }
    return args.run_grid(kernel, *stream, n);
  });
}

}  // namespace

kpdrError_t gather(const kpdrIndexArgs* args, kpdrStream_t stream) {
  return run_index("gather", false, args, stream);
}

kpdrError_t scatter(const kpdrIndexArgs* args, kpdrStream_t stream) {
  return run_index("scatter", true, args, stream);
}

}  // namespace kpdr_opencl

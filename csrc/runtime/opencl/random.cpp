// The random entry of the OpenCL runtime (kpdrRandomArgs, kpdr.h): one
// work-item per element (grid-stride), each computing Philox4x32-10 of its own
// linear index under the call's seed, so the values depend on neither the
// launch shape nor the device. OpenCL C is generated per (distribution, dtype,
// rank) and built once per device through the kernel cache, as indexing.cpp
// does; the stores are the shared prelude's (generated.h).
#include <string>

#include "errors.h"
#include "generated.h"
#include "random.h"
#include "runtime.h"

namespace kpdr_opencl {
namespace {

const char* const kPhilox = R"CLC(
/* Philox4x32-10 (Random123's constants): counter (lo, hi, 0, 0), key = seed. */
inline uint4 kp_philox(ulong counter, ulong seed) {
  uint c0 = (uint)counter, c1 = (uint)(counter >> 32), c2 = 0u, c3 = 0u;
  uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const uint h0 = mul_hi(0xD2511F53u, c0), l0 = 0xD2511F53u * c0;
    const uint h1 = mul_hi(0xCD9E8D57u, c2), l1 = 0xCD9E8D57u * c2;
    const uint n0 = h1 ^ c1 ^ k0, n2 = h0 ^ c3 ^ k1;
    c1 = l1; c3 = l0; c0 = n0; c2 = n2;
  }
  return (uint4)(c0, c1, c2, c3);
}
)CLC";

std::string source(const kpdrRandomArgs& a) {
  const std::string dt = std::to_string(a.dtype);
  std::string src = std::string(kPrelude) + kPhilox;
  src += "__kernel void kp_random(BUF(out), long8 os, long8 sz, long n, float a, float b, long low, ulong range, "
         "ulong seed) {\n for (long g = get_global_id(0); g < n; g += get_global_size(0)) {\n";
  src += decompose("g", a.ndim, "sz", {{"o", "os"}});
  src += "  const uint4 r = kp_philox((ulong)g, seed);\n";
  src += "  const float u = (float)(r.s0 >> 8) * 5.9604644775390625e-8f;\n";
  src += "  const float u1 = (float)((r.s0 >> 8) + 1u) * 5.9604644775390625e-8f;\n";
  // Integer results go through the integer stores where the dtype has them.
  const std::string store_int = is_integer_dtype(a.dtype) ? "si" + dt + "(PTR(out), o, " : "st" + dt + "(PTR(out), o, (float)";
  switch (a.distribution) {
    case KPDR_RANDOM_UNIFORM:
      src += "  st" + dt + "(PTR(out), o, a + (b - a) * u);\n";
      break;
    case KPDR_RANDOM_NORMAL:
      src += "  const float u2 = (float)(r.s1 >> 8) * 5.9604644775390625e-8f;\n";
      src += "  st" + dt + "(PTR(out), o, a + b * (sqrt(-2.0f * log(u1)) * cos(6.28318530717958647692f * u2)));\n";
      break;
    case KPDR_RANDOM_BERNOULLI:
      src += "  " + store_int + "(u < a ? 1 : 0));\n";
      break;
    case KPDR_RANDOM_EXPONENTIAL:
      src += "  st" + dt + "(PTR(out), o, -log(u1) / a);\n";
      break;
    default:  // INTEGER
      src += "  const ulong bits = (ulong)r.s0 | ((ulong)r.s1 << 32);\n";
      src += "  " + store_int + "((long)((ulong)low + bits % range)));\n";
      break;
  }
  src += " }\n}\n";
  return src;
}

}  // namespace

kpdrError_t random_fill(const kpdrRandomArgs* a, kpdrStream_t handle) {
  const char* api = "random";
  return guarded(api, [&]() -> kpdrError_t {
    const std::string name(api);
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    int64_t n = 0;
    if (kpdrError_t error = check_shape(api, a->ndim, a->sizes, &n)) return error;
    if (a->distribution < KPDR_RANDOM_UNIFORM || a->distribution > KPDR_RANDOM_INTEGER) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, name + ": unknown distribution " + std::to_string(a->distribution));
    }
    if (!is_known_dtype(a->dtype)) return fail(KPDR_ERROR_INVALID_VALUE, name + ": unknown kpdrDtype");
    const bool any = a->distribution == KPDR_RANDOM_BERNOULLI || a->distribution == KPDR_RANDOM_INTEGER;
    if (!any && !is_float_dtype(a->dtype)) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, name + ": this distribution takes float dtypes only");
    }
    if (a->distribution == KPDR_RANDOM_INTEGER && a->high <= a->low) {
      return fail(KPDR_ERROR_INVALID_VALUE, name + ": INTEGER needs high > low");
    }
    if (n == 0) return KPDR_SUCCESS;
    if (a->out == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, name + ": out is NULL");
    const int device = stream->device();
    Args args(runtime, device, api);
    if (kpdrError_t e = args.tensor(a->out, "out")) return e;
    args.long8(a->out_strides, a->ndim);
    args.long8(a->sizes, a->ndim);
    args.i64(n);
    args.f32(static_cast<float>(a->a));
    args.f32(static_cast<float>(a->b));
    args.i64(a->low);
    args.i64(static_cast<int64_t>(static_cast<uint64_t>(a->high) - static_cast<uint64_t>(a->low)));
    args.i64(static_cast<int64_t>(a->seed));
    const std::string key = "rnd" + std::to_string(a->distribution) + "t" + std::to_string(a->dtype) + "d" +
                            std::to_string(a->ndim);
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, "kp_random", [&] { return source(*a); }, &kernel)) {
      return error;
    }
    return args.run_grid(kernel, *stream, n);
  });
}

}  // namespace kpdr_opencl

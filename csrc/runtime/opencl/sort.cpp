// The sort entry of the OpenCL runtime (kpdrSortArgs, kpdr.h): a bitonic sort
// of each slice, padded to P = the next power of two (padding orders last).
// Elements are compared as (value, position) pairs, a total order, so the
// network gives kpdr.h's stable order without a stable algorithm.
//
// - P <= kTile (2048): one launch. A work-group loads whole slices (several
//   per group when they are short) into local memory, sorts them there and
//   writes the first k of each to the outputs.
// - Longer slices: the same kernel sorts tiles of kTile into a global scratch
//   (alternating directions, as the network needs), then for each merge size
//   kb = 2 * kTile .. P the compare-exchange passes of stride >= kTile run as
//   one global launch each, and the passes below kTile in local memory again
//   (the last merge writing the outputs): about log2(P / kTile)^2 / 2 global
//   and log2(P / kTile) local launches, e.g. 21 + 6 for a 128k vocabulary.
//   The scratch holds each slice's P keys and int32 positions.
//
// OpenCL C is generated per (dtype, rank) and built once per device through
// the kernel cache; keys are float for the float dtypes (16-bit ones widened
// exactly) and long for the integers and bool, loaded with the shared
// prelude's ld and li (generated.h); values are copied from the input as raw
// elements, so they keep their bits.
#include <string>

#include "errors.h"
#include "generated.h"
#include "runtime.h"
#include "sort.h"

namespace kpdr_opencl {
namespace {

constexpr int64_t kTile = 2048;             // elements a work-group sorts in local memory
constexpr int64_t kMaxSlice = int64_t{1} << 30;  // int32 positions in the scratch

std::string source(kpdrDtype dtype, int outer) {
  const bool fl = is_float_dtype(dtype);
  const std::string dt = std::to_string(dtype), kt = fl ? "float" : "long";
  std::string src = kPrelude;
  const char* raw = dtype == KPDR_DTYPE_INT64 ? "ulong" : dtype == KPDR_DTYPE_BOOL ? "uchar"
                     : (dtype == KPDR_DTYPE_FLOAT16 || dtype == KPDR_DTYPE_BFLOAT16) ? "ushort" : "uint";
  src += "#define TILE " + std::to_string(kTile) + "\ntypedef " + kt + " KT;\ntypedef " + raw + " RT;\n";
  src += fl ? "inline KT kp_key(const __global uchar* p, long i) { return ld" + dt + "(p, i); }\n"
              "inline int kp_gt(KT a, KT b) { return (isnan(a) && !isnan(b)) || a > b; }\n"
            : "inline KT kp_key(const __global uchar* p, long i) { return li" + dt + "(p, i); }\n"
              "inline int kp_gt(KT a, KT b) { return a > b; }\n";
  src += R"CLC(
/* a (key, position) before b in the output order; positions >= n (padding) last. */
inline int kp_before(KT ka, int ia, KT kb, int ib, int n, int desc) {
  if (ia >= n) return 0;
  if (ib >= n) return 1;
  if (kp_gt(ka, kb)) return desc;
  if (kp_gt(kb, ka)) return !desc;
  return ia < ib;
}
/* One compare-exchange pass of stride j in merge size kb over `len` local
 * elements in segments of t (segment `seg` starts at position base[seg] of
 * its slice): the pair's direction follows the global position. */
inline void kp_pass(__local KT* lk, __local int* li, int len, int t, int kb, int j, long base0, int n, int desc) {
  for (int q = get_local_id(0); q < len / 2; q += get_local_size(0)) {
    const int i = 2 * q - (q & (j - 1)), l = i + j;
    const long p = base0 + (i % t);
    const int up = (p & kb) == 0;
    const KT ka = lk[i], kb2 = lk[l];
    const int ia = li[i], ib = li[l];
    if (up ? kp_before(kb2, ib, ka, ia, n, desc) : kp_before(ka, ia, kb2, ib, n, desc)) {
      lk[i] = kb2; lk[l] = ka; li[i] = ib; li[l] = ia;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
)CLC";
  // Tile kernel: work-group g holds `group` tile units of t elements; unit u
  // is tile (u % tps) of slice (u / tps). stage 0 sorts the tiles; stage kb
  // runs merge kb's passes of stride < t. from_input: load the input (else the
  // scratch); to_output: write the first k (else the scratch).
  src += "__kernel void kp_sort_tile(BUF(in), long8 is, long isd, BUF(val), long8 vs, long vsd, BUF(ind), long8 xs, "
         "long xsd, BUF(sk), BUF(si), long8 sz, long slices, int n, long P, int t, int tps, int group, int stage, "
         "int from_input, int to_output, long k, int desc, int has_values, int has_indices) {\n"
         "  __local KT lk[TILE];\n  __local int li[TILE];\n"
         "  __global KT* skey = (__global KT*)PTR(sk);\n  __global int* spos = (__global int*)PTR(si);\n"
         "  const int len = group * t;\n"
         "  const long u0 = (long)get_group_id(0) * group;\n"
         "  for (int i = get_local_id(0); i < len; i += get_local_size(0)) {\n"
         "    const long u = u0 + i / t, s = u / tps;\n"
         "    const long p = (u % tps) * t + (i % t);\n"
         "    KT key = 0; int pos = n;  /* beyond the last slice: padding */\n"
         "    if (s < slices) {\n"
         "      if (from_input) {\n";
  src += "        " + decompose("s", outer, "sz", {{"io", "is"}}).substr(2);
  src += "        if (p < n) key = kp_key(PTR(in), io + p * isd);\n"
         "        pos = (int)p;\n"
         "      } else { key = skey[s * P + p]; pos = spos[s * P + p]; }\n"
         "    }\n"
         "    lk[i] = key; li[i] = pos;\n"
         "  }\n"
         "  barrier(CLK_LOCAL_MEM_FENCE);\n"
         "  const long base0 = (u0 % tps) * t;  /* group > 1 only when tps == 1: base 0 */\n"
         "  if (stage == 0) {\n"
         "    for (int kb = 2; kb <= t; kb <<= 1)\n"
         "      for (int j = kb >> 1; j > 0; j >>= 1) kp_pass(lk, li, len, t, kb, j, base0, n, desc);\n"
         "  } else {\n"
         "    for (int j = t >> 1; j > 0; j >>= 1) kp_pass(lk, li, len, t, stage, j, base0, n, desc);\n"
         "  }\n"
         "  for (int i = get_local_id(0); i < len; i += get_local_size(0)) {\n"
         "    const long u = u0 + i / t, s = u / tps;\n"
         "    const long p = (u % tps) * t + (i % t);\n"
         "    if (s >= slices) continue;\n"
         "    if (!to_output) { skey[s * P + p] = lk[i]; spos[s * P + p] = li[i]; continue; }\n"
         "    if (p >= k) continue;\n";
  src += "    " + decompose("s", outer, "sz", {{"io", "is"}, {"vo", "vs"}, {"xo", "xs"}}).substr(2);
  // Values are the input's elements, copied bit for bit (NaN payloads included).
  src += "    if (has_values) ((__global RT*)PTR(val))[vo + p * vsd] = ((const __global RT*)PTR(in))[io + (long)li[i] * isd];\n"
         "    if (has_indices) ((__global long*)PTR(ind))[xo + p * xsd] = li[i];\n"
         "  }\n"
         "}\n";
  // One compare-exchange pass of stride j >= TILE over the scratch.
  src += R"CLC(
__kernel void kp_sort_global(BUF(sk), BUF(si), long slices, int n, long P, long kb, long j, int desc) {
  __global KT* skey = (__global KT*)PTR(sk);
  __global int* spos = (__global int*)PTR(si);
  const long pairs = P / 2;
  for (long g = get_global_id(0); g < slices * pairs; g += get_global_size(0)) {
    const long s = g / pairs, q = g % pairs;
    const long i = 2 * q - (q & (j - 1)), l = i + j;
    const int up = (i & kb) == 0;
    __global KT* key = skey + s * P;
    __global int* pos = spos + s * P;
    const KT ka = key[i], kb2 = key[l];
    const int ia = pos[i], ib = pos[l];
    if (up ? kp_before(kb2, ib, ka, ia, n, desc) : kp_before(ka, ia, kb2, ib, n, desc)) {
      key[i] = kb2; key[l] = ka; pos[i] = ib; pos[l] = ia;
    }
  }
}
)CLC";
  return src;
}

}  // namespace

kpdrError_t sort(const kpdrSortArgs* a, kpdrStream_t handle) {
  const char* api = "sort";
  return guarded(api, [&]() -> kpdrError_t {
    const std::string name(api);
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    if (a->ndim < 1) return fail(KPDR_ERROR_INVALID_VALUE, name + ": ndim " + std::to_string(a->ndim) + " is below 1");
    int64_t count = 0;
    if (kpdrError_t error = check_shape(api, a->ndim, a->sizes, &count)) return error;
    if (a->dim < 0 || a->dim >= a->ndim) return fail(KPDR_ERROR_INVALID_VALUE, name + ": dim outside 0..ndim-1");
    const int64_t n = a->sizes[a->dim];
    if (a->k < 0 || a->k > n) {
      return fail(KPDR_ERROR_INVALID_VALUE, name + ": k " + std::to_string(a->k) + " is outside 0.." + std::to_string(n));
    }
    if (!is_known_dtype(a->dtype)) return fail(KPDR_ERROR_INVALID_VALUE, name + ": unknown kpdrDtype");
    if (n > kMaxSlice) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, name + ": slices of " + std::to_string(n) + " elements (at most 2^30)");
    }
    // The other dimensions, in order: the slices.
    int64_t sz[KPDR_MAX_DIMS], is[KPDR_MAX_DIMS], vs[KPDR_MAX_DIMS], xs[KPDR_MAX_DIMS];
    int outer = 0;
    int64_t slices = 1;
    for (int d = 0; d < a->ndim; ++d) {
      if (d == a->dim) continue;
      sz[outer] = a->sizes[d];
      is[outer] = a->in_strides[d];
      vs[outer] = a->values_strides[d];
      xs[outer] = a->indices_strides[d];
      slices *= a->sizes[d];
      ++outer;
    }
    if (a->k == 0 || slices == 0 || (a->values == nullptr && a->indices == nullptr)) return KPDR_SUCCESS;
    int64_t P = 1;
    while (P < n) P *= 2;
    const int64_t t = std::min(P, kTile), tps = P / t;
    const int64_t group = tps == 1 ? std::max<int64_t>(1, std::min(kTile / P, slices)) : 1;
    const int device = stream->device();
    const std::string key = "sort" + std::to_string(a->dtype) + "d" + std::to_string(outer);
    auto make = [&] { return source(a->dtype, outer); };
    Kernel* tile = nullptr;
    Kernel* pass = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, "kp_sort_tile", make, &tile)) return error;
    if (tps > 1) {
      if (kpdrError_t error = kernel_for(runtime, device, key, "kp_sort_global", make, &pass)) return error;
    }
    // The scratch (longer slices only): keys, then int32 positions.
    const size_t key_bytes = is_float_dtype(a->dtype) ? 4 : 8;
    const size_t elements = tps > 1 ? static_cast<size_t>(slices * P) : 0;
    Scratch scratch_buffer(*stream);
    if (tps > 1) {
      if (kpdrError_t e = scratch_buffer.acquire(runtime, api, elements * (key_bytes + 4))) return e;
    }
    const cl_mem scratch = scratch_buffer.mem();
    const int64_t units = slices * tps, groups = (units + group - 1) / group;
    auto run_tile = [&](int64_t stage, bool from_input, bool to_output) -> kpdrError_t {
      Args args(runtime, device, api);
      if (kpdrError_t e = args.tensor(a->in, "in")) return e;
      args.long8(is, outer); args.i64(a->in_strides[a->dim]);
      if (a->values != nullptr) { if (kpdrError_t e = args.tensor(a->values, "values")) return e; }
      else args.unused_tensor();
      args.long8(vs, outer); args.i64(a->values_strides[a->dim]);
      if (a->indices != nullptr) { if (kpdrError_t e = args.tensor(a->indices, "indices")) return e; }
      else args.unused_tensor();
      args.long8(xs, outer); args.i64(a->indices_strides[a->dim]);
      if (scratch != nullptr) {
        args.mem(scratch, 0);
        args.mem(scratch, elements * key_bytes);
      } else {
        args.unused_tensor();
        args.unused_tensor();
      }
      args.long8(sz, outer); args.i64(slices); args.i32(static_cast<int32_t>(n)); args.i64(P);
      args.i32(static_cast<int32_t>(t)); args.i32(static_cast<int32_t>(tps)); args.i32(static_cast<int32_t>(group));
      args.i32(static_cast<int32_t>(stage)); args.i32(from_input ? 1 : 0); args.i32(to_output ? 1 : 0);
      args.i64(a->k); args.i32(a->descending ? 1 : 0);
      args.i32(a->values != nullptr ? 1 : 0); args.i32(a->indices != nullptr ? 1 : 0);
      const size_t wg = tile->work_group;
      return args.run(tile, *stream, static_cast<size_t>(groups) * wg, wg);
    };
    if (tps == 1) return run_tile(0, true, true);
    if (kpdrError_t e = run_tile(0, true, false)) return e;
    for (int64_t kb = 2 * t; kb <= P; kb *= 2) {
      for (int64_t j = kb / 2; j >= t; j /= 2) {
        Args args(runtime, device, api);
        args.mem(scratch, 0);
        args.mem(scratch, elements * key_bytes);
        args.i64(slices); args.i32(static_cast<int32_t>(n)); args.i64(P); args.i64(kb); args.i64(j);
        args.i32(a->descending ? 1 : 0);
        if (kpdrError_t e = args.run_grid(pass, *stream, slices * (P / 2))) return e;
      }
      if (kpdrError_t e = run_tile(kb, false, kb == P)) return e;
    }
    return KPDR_SUCCESS;
  });
}

}  // namespace kpdr_opencl

// The scan entry of the OpenCL runtime (kpdrScanArgs, kpdr.h). OpenCL C is
// generated per (op, dtypes, arithmetic, rank) and built once per device
// through the kernel cache, as the other entries are. Three kernels share one
// program:
//  - kp_scan_serial: one work-item per line, scanning it in order (short
//    lines, or so many lines that they fill the device; neighbouring lines
//    are neighbours in memory when the scanned dimension is not innermost).
//  - kp_scan_wg: one work-group per (line, block): chunks of WG * ITEMS
//    elements are loaded coalesced into local memory, each work-item combines
//    ITEMS consecutive ones, a Hillis-Steele scan of the work-items' totals
//    gives each its prefix, and a running carry links the chunks.
//  - kp_scan_reduce: the total of each block, for a few long lines (one
//    nonzero over millions of elements): block totals (reduce), their
//    exclusive scan per line (kp_scan_wg of a second program over the totals),
//    then kp_scan_wg of every block from its total's prefix.
// Float scans combine in float32, integer scans in int64 (wrapping).
#include <algorithm>
#include <string>

#include "errors.h"
#include "generated.h"
#include "runtime.h"
#include "scan.h"

namespace kpdr_opencl {
namespace {

constexpr int kItems = 8;  // elements per work-item and chunk

// What one generated program depends on.
struct Shape {
  int op;
  kpdrDtype in, out;
  bool integer;
  int outer;  // dimensions other than the scanned one
  std::string key() const {
    return "scan" + std::to_string(op) + "i" + std::to_string(in) + "o" + std::to_string(out) + (integer ? "I" : "F") +
           "d" + std::to_string(outer);
  }
};

std::string source(const Shape& s) {
  const std::string acc = s.integer ? "long" : "float";
  std::string src = std::string(kPrelude) + kGroupHead + "#define ITEMS " + std::to_string(kItems) + "\n";
  src += "typedef " + acc + " ACC;\n";
  if (s.integer) {
    static const char* const ops[] = {"(long)((ulong)a + (ulong)b)", "(long)((ulong)a * (ulong)b)", "max(a, b)",
                                      "min(a, b)"};
    static const char* const ids[] = {"0L", "1L", "LONG_MIN", "LONG_MAX"};
    src += "#define IDENT " + std::string(ids[s.op]) + "\n";
    src += "inline ACC kp_op(ACC a, ACC b) { return " + std::string(ops[s.op]) + "; }\n";
    src += "inline ACC kp_in(const __global uchar* p, long i) { return li" + std::to_string(s.in) + "(p, i); }\n";
    src += "inline void kp_out(__global uchar* p, long i, ACC v) { si" + std::to_string(s.out) + "(p, i, v); }\n";
  } else {
    static const char* const ops[] = {"a + b", "a * b", "kp_nanmax(a, b)", "kp_nanmin(a, b)", "kp_logaddexp(a, b)"};
    static const char* const ids[] = {"0.0f", "1.0f", "(-INFINITY)", "INFINITY", "(-INFINITY)"};
    src += "#define IDENT " + std::string(ids[s.op]) + "\n";
    src += R"CLC(
inline float kp_logaddexp(float a, float b) {
  if (isnan(a) || isnan(b)) return NAN;
  const float hi = fmax(a, b), lo = fmin(a, b);
  if (hi == lo && isinf(hi)) return hi;
  return hi + log1p(exp(lo - hi));
}
)CLC";
    src += "inline ACC kp_op(ACC a, ACC b) { return " + std::string(ops[s.op]) + "; }\n";
    src += "inline ACC kp_in(const __global uchar* p, long i) { return ld" + std::to_string(s.in) + "(p, i); }\n";
    src += "inline void kp_out(__global uchar* p, long i, ACC v) { st" + std::to_string(s.out) + "(p, i, v); }\n";
  }
  const std::string args = "BUF(in), BUF(out), long8 sz, long8 si, long8 so, long n, long sin, long sout";
  const std::string line = decompose("line", s.outer, "sz", {{"bi", "si"}, {"bo", "so"}});
  // One work-item per line.
  src += "__kernel void kp_scan_serial(" + args + ", long lines, int excl) {\n";
  src += " for (long line = get_global_id(0); line < lines; line += get_global_size(0)) {\n" + line;
  src += "  ACC acc = IDENT;\n"
         "  for (long j = 0; j < n; ++j) {\n"
         "   const ACC next = kp_op(acc, kp_in(PTR(in), bi + j * sin));\n"
         "   kp_out(PTR(out), bo + j * sout, excl ? acc : next);\n"
         "   acc = next;\n  }\n }\n}\n";
  // The total of each block of `span` elements: part[group].
  src += std::string(kGroupAttr) + "kp_scan_reduce(" + args + ", long span, long blocks, BUF(part)) {\n";
  src += " __local ACC s[WG];\n const long group = get_group_id(0), line = group / blocks;\n"
         " const int t = get_local_id(0);\n" + line;
  src += " const long start = (group % blocks) * span, end = min(n, start + span);\n"
         " ACC acc = IDENT;\n"
         " for (long j = start + t; j < end; j += WG) acc = kp_op(acc, kp_in(PTR(in), bi + j * sin));\n"
         " s[t] = acc;\n barrier(CLK_LOCAL_MEM_FENCE);\n";
  src += group_tree("s", [](const std::string& a, const std::string& b) { return "kp_op(" + a + ", " + b + ")"; });
  src += " if (t == 0) ((__global ACC*)PTR(part))[group] = s[0];\n}\n";
  // One work-group per (line, block); carry: part[group] when has_carry.
  src += std::string(kGroupAttr) + "kp_scan_wg(" + args +
         ", long span, long blocks, BUF(part), int has_carry, int excl) {\n";
  src += " __local ACC buf[WG * ITEMS];\n __local ACC s[WG];\n"
         " const long group = get_group_id(0), line = group / blocks;\n const int t = get_local_id(0);\n" + line;
  src += R"CLC( const long start = (group % blocks) * span, end = min(n, start + span);
 ACC carry = has_carry ? ((const __global ACC*)PTR(part))[group] : IDENT;
 for (long base = start; base < end; base += WG * ITEMS) {
  for (int k = 0; k < ITEMS; ++k) {
   const long j = base + k * WG + t;
   buf[k * WG + t] = j < end ? kp_in(PTR(in), bi + j * sin) : IDENT;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  ACC total = IDENT;
  for (int k = 0; k < ITEMS; ++k) total = kp_op(total, buf[t * ITEMS + k]);
  s[t] = total;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = 1; h < WG; h <<= 1) {
   const ACC before = t >= h ? s[t - h] : IDENT;
   barrier(CLK_LOCAL_MEM_FENCE);
   s[t] = kp_op(before, s[t]);
   barrier(CLK_LOCAL_MEM_FENCE);
  }
  ACC run = t > 0 ? kp_op(carry, s[t - 1]) : carry;
  for (int k = 0; k < ITEMS; ++k) {
   const ACC next = kp_op(run, buf[t * ITEMS + k]);
   buf[t * ITEMS + k] = excl ? run : next;
   run = next;
  }
  carry = kp_op(carry, s[WG - 1]);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 0; k < ITEMS; ++k) {
   const long j = base + k * WG + t;
   if (j < end) kp_out(PTR(out), bo + j * sout, buf[k * WG + t]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
 }
}
)CLC";
  return src;
}

kpdrError_t check(const kpdrScanArgs& a, bool* integer) {
  const std::string name = "scan";
  if (a.op < KPDR_SCAN_SUM || a.op > KPDR_SCAN_LOGADDEXP) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, name + ": unknown op code " + std::to_string(a.op));
  }
  if (a.ndim < 1) return fail(KPDR_ERROR_INVALID_VALUE, name + ": ndim must be at least 1");
  if (a.dim < 0 || a.dim >= a.ndim) return fail(KPDR_ERROR_INVALID_VALUE, name + ": dim outside 0..ndim-1");
  if (a.exclusive != 0 && a.exclusive != 1) return fail(KPDR_ERROR_INVALID_VALUE, name + ": exclusive is not 0 or 1");
  *integer = a.out_dtype == KPDR_DTYPE_INT64 || a.out_dtype == KPDR_DTYPE_INT32;
  if (*integer) {
    if (!is_integer_dtype(a.in_dtype)) return fail(KPDR_ERROR_INVALID_VALUE, name + ": unknown kpdrDtype");
    if (a.op == KPDR_SCAN_LOGADDEXP) return fail(KPDR_ERROR_NOT_SUPPORTED, name + ": LOGADDEXP takes float dtypes only");
    return KPDR_SUCCESS;
  }
  if (!is_float_dtype(a.out_dtype) || !(is_float_dtype(a.in_dtype) || a.in_dtype == KPDR_DTYPE_BOOL)) {
    return fail(KPDR_ERROR_INVALID_VALUE, name + ": unknown kpdrDtype");
  }
  return KPDR_SUCCESS;
}

// The launch arguments every kernel starts with; in/out either tensors or a
// scratch buffer (mem != nullptr).
struct Operands {
  const void* in;
  const void* out;
  cl_mem mem;
  int64_t sz[8], si[8], so[8];
  int outer;
  int64_t n, sin, sout;
};

kpdrError_t add_operands(Args& args, const Operands& o) {
  if (o.mem != nullptr) {
    args.mem(o.mem, 0);
    args.mem(o.mem, 0);
  } else {
    if (kpdrError_t e = args.tensor(o.in, "in")) return e;
    if (kpdrError_t e = args.tensor(o.out, "out")) return e;
  }
  args.long8(o.sz, o.outer);
  args.long8(o.si, o.outer);
  args.long8(o.so, o.outer);
  args.i64(o.n);
  args.i64(o.sin);
  args.i64(o.sout);
  return KPDR_SUCCESS;
}

}  // namespace

kpdrError_t scan(const kpdrScanArgs* a, kpdrStream_t handle) {
  const char* api = "scan";
  return guarded(api, [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    int64_t count = 0;
    if (kpdrError_t error = check_shape(api, a->ndim, a->sizes, &count)) return error;
    bool integer = false;
    if (kpdrError_t error = check(*a, &integer)) return error;
    if (count == 0) return KPDR_SUCCESS;
    if (a->in == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "scan: in is NULL");
    if (a->out == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "scan: out is NULL");
    Operands ops{};
    ops.in = a->in;
    ops.out = a->out;
    for (int d = 0; d < a->ndim; ++d) {
      if (d == a->dim) continue;
      ops.sz[ops.outer] = a->sizes[d];
      ops.si[ops.outer] = a->in_strides[d];
      ops.so[ops.outer++] = a->out_strides[d];
    }
    ops.n = a->sizes[a->dim];
    ops.sin = a->in_strides[a->dim];
    ops.sout = a->out_strides[a->dim];
    const int64_t lines = count / ops.n;
    const int device = stream->device();
    const int compute_units = std::max(1, runtime->device(device).compute_units);
    const Shape shape{a->op, a->in_dtype, a->out_dtype, integer, ops.outer};
    auto kernel = [&](const Shape& s, const char* name, Kernel** k) {
      return kernel_for(runtime, device, s.key(), name, [&] { return source(s); }, k);
    };
    Kernel* wg_kernel = nullptr;
    if (kpdrError_t e = kernel(shape, "kp_scan_wg", &wg_kernel)) return e;
    const int64_t wg = static_cast<int64_t>(wg_kernel->work_group);
    const int64_t chunk = wg * kItems;
    // Short lines, or lines enough to fill the device one work-item each.
    if (ops.n <= 32 || lines >= 4 * compute_units * wg || (ops.sin != 1 && lines >= compute_units * wg)) {
      Kernel* serial = nullptr;
      if (kpdrError_t e = kernel(shape, "kp_scan_serial", &serial)) return e;
      Args args(runtime, device, api);
      if (kpdrError_t e = add_operands(args, ops)) return e;
      args.i64(lines);
      args.i32(a->exclusive);
      return args.run_grid(serial, *stream, lines);
    }
    // Blocks per line: one, unless a few long lines would leave the device idle.
    int64_t blocks = 1, span = ops.n;
    if (lines < 2 * compute_units && ops.n > 4 * chunk) {
      const int64_t want = (4 * compute_units + lines - 1) / lines;
      span = std::max<int64_t>(chunk, ((ops.n + want - 1) / want + chunk - 1) / chunk * chunk);
      blocks = (ops.n + span - 1) / span;
    }
    if (lines * blocks >= (int64_t{1} << 31)) return fail(KPDR_ERROR_NOT_SUPPORTED, "scan: too many lines");
    if (blocks == 1) {
      Args args(runtime, device, api);
      if (kpdrError_t e = add_operands(args, ops)) return e;
      args.i64(span);
      args.i64(1);
      args.unused_tensor();
      args.i32(0);
      args.i32(a->exclusive);
      return args.run(wg_kernel, *stream, static_cast<size_t>(lines * wg), static_cast<size_t>(wg));
    }
    // Block totals, their exclusive scan per line, then every block from its prefix.
    Scratch totals_buffer(*stream);
    const size_t part_bytes = static_cast<size_t>(lines * blocks) * (integer ? 8 : 4);
    if (kpdrError_t e = totals_buffer.acquire(runtime, api, part_bytes, "for block totals")) return e;
    const cl_mem part = totals_buffer.mem();
    Kernel* reduce = nullptr;
    if (kpdrError_t e = kernel(shape, "kp_scan_reduce", &reduce)) return e;
    const size_t groups = static_cast<size_t>(lines * blocks);
    {
      Args args(runtime, device, api);
      if (kpdrError_t e = add_operands(args, ops)) return e;
      args.i64(span);
      args.i64(blocks);
      args.mem(part, 0);
      if (kpdrError_t e = args.run(reduce, *stream, groups * wg, wg)) return e;
    }
    {
      const kpdrDtype acc = integer ? KPDR_DTYPE_INT64 : KPDR_DTYPE_FLOAT32;
      const Shape totals{a->op, acc, acc, integer, 1};
      Kernel* scan_totals = nullptr;
      if (kpdrError_t e = kernel(totals, "kp_scan_wg", &scan_totals)) return e;
      Operands p{};
      p.mem = part;
      p.outer = 1;
      p.sz[0] = lines;
      p.si[0] = p.so[0] = blocks;
      p.n = blocks;
      p.sin = p.sout = 1;
      Args args(runtime, device, api);
      if (kpdrError_t e = add_operands(args, p)) return e;
      args.i64(blocks);
      args.i64(1);
      args.mem(part, 0);
      args.i32(0);
      args.i32(1);
      const size_t twg = scan_totals->work_group;
      if (kpdrError_t e = args.run(scan_totals, *stream, static_cast<size_t>(lines) * twg, twg)) return e;
    }
    Args args(runtime, device, api);
    if (kpdrError_t e = add_operands(args, ops)) return e;
    args.i64(span);
    args.i64(blocks);
    args.mem(part, 0);
    args.i32(1);
    args.i32(a->exclusive);
    return args.run(wg_kernel, *stream, groups * wg, wg);
  });
}

}  // namespace kpdr_opencl

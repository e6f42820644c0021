// The softmax_dim, nll_loss and layer_norm entries of the OpenCL runtime and
// the reduce entry's statistics (ARGMAX/ARGMIN/VAR/STD), as generated OpenCL
// C (generated.h): one program per op and set of dtypes (and number of outer
// dimensions), built once per device and cached like the pointwise ones.
//
// Row-wise work (a softmax row, a layer-norm row, one reduction output) is a
// work-group striding over the row, then a tree in local memory; float32
// accumulation whatever the storage dtype. nll_loss's reductions are one
// work-group (the loss of a batch is one number); its backward writes every
// element of grad_input, one work-item each.
#include <string>

#include "generated.h"
#include "losses.h"

namespace kpdr_opencl {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

std::string plus(const std::string& a, const std::string& b) { return a + " + " + b; }
std::string nanmax(const std::string& a, const std::string& b) { return "kp_nanmax(" + a + ", " + b + ")"; }

// `acc` combined over the work-group with `combine` (group_tree); every
// work-item then reads the result into `result`.
template <typename Combine>
std::string tree(Combine&& combine, const std::string& result) {
  return "  part[t] = acc;\n  barrier(CLK_LOCAL_MEM_FENCE);\n" + group_tree("part", combine) + "  const float " +
         result + " = part[0];\n  barrier(CLK_LOCAL_MEM_FENCE);\n";
}

std::string ld(int dtype, const std::string& buffer, const std::string& index) {
  return "ld" + num(dtype) + "(PTR(" + buffer + "), " + index + ")";
}
std::string st(int dtype, const std::string& buffer, const std::string& index, const std::string& value) {
  return "st" + num(dtype) + "(PTR(" + buffer + "), " + index + ", " + value + ");";
}

// ---- softmax_dim -------------------------------------------------------------

std::string softmax_source(const kpdrSoftmaxDimArgs& a, int outer) {
  const bool backward = a.op >= KPDR_SOFTMAX_BACKWARD;
  std::string src = std::string(kPrelude) + kGroupHead + kGroupAttr;
  src += "kp_softmax_dim(BUF(out), BUF(x), BUF(gr), long8 os, long8 so, long8 sx, long8 sg, long n, long dso, "
         "long dsx, long dsg) {\n";
  src += " __local float part[WG];\n const long g = get_group_id(0);\n const int t = get_local_id(0);\n";
  src += " long bo, bx, bg;\n {\n" + decompose("g", outer, "os", {{"o", "so"}, {"a", "sx"}, {"b", "sg"}}) +
         "  bo = o; bx = a; bg = b;\n }\n";
  const std::string x = ld(a.x.dtype, "x", "bx + j * dsx");
  const std::string put = "st" + num(a.out_dtype) + "(PTR(out), bo + j * dso, ";
  src += " {\n";
  if (!backward) {
    src += "  float acc = -INFINITY;\n  for (long j = t; j < n; j += WG) acc = kp_nanmax(acc, " + x + ");\n";
    src += tree(nanmax, "mx");
    src += "  acc = 0.0f;\n  for (long j = t; j < n; j += WG) acc += exp(" + x + " - mx);\n";
    src += tree(plus, "sum");
    if (a.op == KPDR_LOG_SOFTMAX) {
      src += "  const float ls = log(sum);\n  for (long j = t; j < n; j += WG) " + put + x + " - mx - ls);\n";
    } else {
      src += "  const float inv = 1.0f / sum;\n  for (long j = t; j < n; j += WG) " + put + "exp(" + x +
             " - mx) * inv);\n";
    }
  } else {
    const std::string gr = ld(a.grad.dtype, "gr", "bg + j * dsg");
    const bool soft = a.op == KPDR_SOFTMAX_BACKWARD;
    src += "  float acc = 0.0f;\n  for (long j = t; j < n; j += WG) acc += " + (soft ? gr + " * " + x : gr) + ";\n";
    src += tree(plus, "sum");
    src += "  for (long j = t; j < n; j += WG) " + put +
           (soft ? x + " * (" + gr + " - sum)" : gr + " - exp(" + x + ") * sum") + ");\n";
  }
  src += " }\n}\n";
  return src;
}

// ---- nll_loss ------------------------------------------------------------------

std::string nll_source(const kpdrNllLossArgs& a) {
  std::string src = std::string(kPrelude) + kGroupHead;
  src += std::string("inline long tgt(const __global uchar* p, long i) { return ((const __global ") +
         (a.target_dtype == KPDR_DTYPE_INT32 ? "int" : "long") + "*)p)[i]; }\n";
  const std::string D = num(a.dtype);
  src += "inline float wt(const __global uchar* p, long i, int has) { return has ? ld" + D + "(p, i) : 1.0f; }\n";
  const std::string common =
      "BUF(in), BUF(tg), BUF(w), BUF(out), BUF(tw), long N, long C, long S, long is0, long is1, long is2, "
      "long ts0, long ts1, long ws, long os0, long os1, long ignore, int has_w, int reduction";
  // loss and weight of element e (n, s)
  const std::string element =
      "   const long n = e / S, s = e % S, c = tgt(PTR(tg), n * ts0 + s * ts1);\n"
      "   float loss = 0.0f, wsum = 0.0f;\n"
      "   if (c != ignore) {\n"
      "    if (c >= 0 && c < C) { wsum = wt(PTR(w), c * ws, has_w); loss = -wsum * ld" + D +
      "(PTR(in), n * is0 + c * is1 + s * is2); }\n"
      "    else loss = NAN;\n   }\n";
  src += "__kernel void kp_nll_none(" + common + ") {\n";
  src += " for (long e = get_global_id(0); e < N * S; e += get_global_size(0)) {\n" + element +
         "   st" + D + "(PTR(out), n * os0 + s * os1, loss);\n }\n";
  src += " if (get_global_id(0) == 0) st" + D + "(PTR(tw), 0, 0.0f);\n}\n";
  src += std::string(kGroupAttr) + "kp_nll_reduce(" + common + ") {\n";
  src += " __local float part[WG];\n __local float wpart[WG];\n const int t = get_local_id(0);\n";
  src += " float acc = 0.0f, wacc = 0.0f;\n";
  src += " for (long e = t; e < N * S; e += WG) {\n" + element + "   acc += loss; wacc += wsum;\n }\n";
  src += " part[t] = acc; wpart[t] = wacc;\n barrier(CLK_LOCAL_MEM_FENCE);\n";
  src += " for (int s = WG / 2; s > 0; s >>= 1) {\n"
         "  if (t < s) { part[t] += part[t + s]; wpart[t] += wpart[t + s]; }\n"
         "  barrier(CLK_LOCAL_MEM_FENCE);\n }\n";
  src += " if (t == 0) {\n  st" + D + "(PTR(out), 0, reduction == 1 ? part[0] / wpart[0] : part[0]);\n  st" + D +
         "(PTR(tw), 0, wpart[0]);\n }\n}\n";
  src += "__kernel void kp_nll_backward(BUF(gi), BUF(tg), BUF(w), BUF(go), BUF(tw), long N, long C, long S, "
         "long gs0, long gs1, long gs2, long ts0, long ts1, long ws, long os0, long os1, long ignore, int has_w, "
         "int reduction) {\n";
  src += " for (long i = get_global_id(0); i < N * C * S; i += get_global_size(0)) {\n"
         "  const long s = i % S, k = (i / S) % C, n = i / (S * C);\n"
         "  const long c = tgt(PTR(tg), n * ts0 + s * ts1);\n"
         "  float v = 0.0f;\n"
         "  if (c == k && c != ignore) {\n"
         "   const float g = reduction == 0 ? ld" + D + "(PTR(go), n * os0 + s * os1)\n"
         "                 : reduction == 1 ? ld" + D + "(PTR(go), 0) / ld" + D + "(PTR(tw), 0) : ld" + D +
         "(PTR(go), 0);\n"
         "   v = -wt(PTR(w), c * ws, has_w) * g;\n  }\n"
         "  st" + D + "(PTR(gi), n * gs0 + k * gs1 + s * gs2, v);\n }\n}\n";
  return src;
}

// ---- layer_norm ------------------------------------------------------------------

std::string layer_norm_source(const kpdrLayerNormArgs& a) {
  const std::string D = num(a.dtype), W = num(a.weight_dtype), M = num(a.stats_dtype);
  std::string src = std::string(kPrelude) + kGroupHead;
  src += "inline float wt(const __global uchar* p, long i, int has) { return has ? ld" + W + "(p, i) : 1.0f; }\n";
  src += std::string(kGroupAttr) +
         "kp_ln_forward(BUF(x), BUF(w), BUF(b), BUF(out), BUF(mean), BUF(rstd), long N, long xs, long os, "
         "float eps, int has_w, int has_b, int has_mean, int has_rstd) {\n";
  src += " __local float part[WG];\n const long r = get_group_id(0);\n const int t = get_local_id(0);\n";
  src += " const long xr = r * xs;\n {\n";
  src += "  float acc = 0.0f;\n  for (long i = t; i < N; i += WG) acc += ld" + D + "(PTR(x), xr + i);\n";
  src += tree(plus, "sum");
  src += "  const float mu = sum / (float)N;\n";
  src += "  acc = 0.0f;\n  for (long i = t; i < N; i += WG) { const float d = ld" + D +
         "(PTR(x), xr + i) - mu; acc += d * d; }\n";
  src += tree(plus, "sq");
  src += "  const float rs = 1.0f / sqrt(sq / (float)N + eps);\n";
  src += "  for (long i = t; i < N; i += WG) {\n"
         "   const float y = (ld" + D + "(PTR(x), xr + i) - mu) * rs * wt(PTR(w), i, has_w) + (has_b ? ld" + W +
         "(PTR(b), i) : 0.0f);\n   st" + D + "(PTR(out), r * os + i, y);\n  }\n";
  src += "  if (t == 0) { if (has_mean) st" + M + "(PTR(mean), r, mu); if (has_rstd) st" + M +
         "(PTR(rstd), r, rs); }\n }\n}\n";
  // grad_input: one work-group per row.
  src += std::string(kGroupAttr) +
         "kp_ln_grad_input(BUF(x), BUF(w), BUF(mean), BUF(rstd), BUF(go), BUF(gi), long N, long xs, long gos, "
         "long gis, int has_w) {\n";
  src += " __local float part[WG];\n const long r = get_group_id(0);\n const int t = get_local_id(0);\n";
  src += " const float mu = ld" + M + "(PTR(mean), r), rs = ld" + M + "(PTR(rstd), r);\n {\n";
  const std::string gw = "(ld" + D + "(PTR(go), r * gos + i) * wt(PTR(w), i, has_w))";
  const std::string xhat = "((ld" + D + "(PTR(x), r * xs + i) - mu) * rs)";
  src += "  float acc = 0.0f;\n  for (long i = t; i < N; i += WG) acc += " + gw + ";\n";
  src += tree(plus, "s1");
  src += "  acc = 0.0f;\n  for (long i = t; i < N; i += WG) acc += " + gw + " * " + xhat + ";\n";
  src += tree(plus, "s2");
  src += "  const float m1 = s1 / (float)N, m2 = s2 / (float)N;\n";
  src += "  for (long i = t; i < N; i += WG) st" + D + "(PTR(gi), r * gis + i, rs * (" + gw + " - m1 - " + xhat +
         " * m2));\n }\n}\n";
  // grad_weight / grad_bias: one work-item per column, rows in order.
  src += "__kernel void kp_ln_grad_params(BUF(x), BUF(mean), BUF(rstd), BUF(go), BUF(gw), BUF(gb), long R, long N, "
         "long xs, long gos, int want_w, int want_b) {\n";
  src += " for (long i = get_global_id(0); i < N; i += get_global_size(0)) {\n"
         "  float aw = 0.0f, ab = 0.0f;\n"
         "  for (long r = 0; r < R; ++r) {\n"
         "   const float g = ld" + D + "(PTR(go), r * gos + i);\n"
         "   ab += g;\n"
         "   if (want_w) aw += g * (ld" + D + "(PTR(x), r * xs + i) - ld" + M + "(PTR(mean), r)) * ld" + M +
         "(PTR(rstd), r);\n  }\n"
         "  if (want_w) st" + W + "(PTR(gw), i, aw);\n  if (want_b) st" + W + "(PTR(gb), i, ab);\n }\n}\n";
  return src;
}

// ---- reduce statistics -------------------------------------------------------------

std::string statistics_source(const kpdrReduceArgs& a, int kept, int reduced) {
  std::string src = std::string(kPrelude) + kGroupHead + kGroupAttr;
  src += "kp_statistics(BUF(in), BUF(out), long8 ks, long8 ki, long8 ko, long8 rs, long8 ri, long count, "
         "float correction) {\n";
  src += " const long g = get_group_id(0);\n const int t = get_local_id(0);\n";
  src += " long base, obase;\n {\n" + decompose("g", kept, "ks", {{"b", "ki"}, {"ob", "ko"}}) +
         "  base = b; obase = ob;\n }\n";
  const std::string x = "ld" + num(a.in_dtype) + "(PTR(in), base + r)";
  const std::string slice = decompose("j", reduced, "rs", {{"r", "ri"}});
  if (a.out_dtype == KPDR_DTYPE_INT64 && (a.op == KPDR_REDUCE_SUM || a.op == KPDR_REDUCE_AMAX ||
                                           a.op == KPDR_REDUCE_AMIN)) {  // bool or integers into int64, exact
    const char* type = a.in_dtype == KPDR_DTYPE_INT64 ? "long" : a.in_dtype == KPDR_DTYPE_INT32 ? "int" : "uchar";
    const char* init = a.op == KPDR_REDUCE_AMAX ? "LONG_MIN" : a.op == KPDR_REDUCE_AMIN ? "LONG_MAX" : "0";
    auto combine = [&](const std::string& x, const std::string& y) {
      return a.op == KPDR_REDUCE_AMAX ? "max(" + x + ", " + y + ")"
             : a.op == KPDR_REDUCE_AMIN ? "min(" + x + ", " + y + ")" : x + " + " + y;
    };
    src += std::string(" __local long part[WG];\n long acc = ") + init + ";\n";
    src += " for (long j = t; j < count; j += WG) {\n" + slice + "  acc = " +
           combine("acc", std::string("(long)(((const __global ") + type + "*)PTR(in))[base + r]" +
                              (a.in_dtype == KPDR_DTYPE_BOOL ? " != 0)" : ")")) + ";\n }\n";
    src += " part[t] = acc;\n barrier(CLK_LOCAL_MEM_FENCE);\n" + group_tree("part", combine);
    src += " if (t == 0) ((__global long*)PTR(out))[obase] = part[0];\n}\n";
    return src;
  }
  if (a.op == KPDR_REDUCE_ARGMAX || a.op == KPDR_REDUCE_ARGMIN) {
    const char* better = a.op == KPDR_REDUCE_ARGMAX ? ">" : "<";
    // (value, index) pairs: a NaN beats any number, then the better value,
    // then the lower index.
    src += " __local float pv[WG];\n __local long pi[WG];\n";
    src += " float bv = NAN; long bi = -1;\n";
    src += " for (long j = t; j < count; j += WG) {\n" + slice + "  const float v = " + x + ";\n" +
           "  if (bi < 0 || (!isnan(bv) && (isnan(v) || v " + better + " bv))) { bv = v; bi = j; }\n }\n";
    src += " pv[t] = bv; pi[t] = bi;\n barrier(CLK_LOCAL_MEM_FENCE);\n";
    src += " for (int s = WG / 2; s > 0; s >>= 1) {\n"
           "  if (t < s) {\n"
           "   const float v = pv[t + s]; const long i = pi[t + s]; bv = pv[t]; bi = pi[t];\n"
           "   if (i >= 0 && (bi < 0 || (isnan(v) && (!isnan(bv) || i < bi)) ||\n"
           "       (!isnan(v) && !isnan(bv) && (v " + std::string(better) + " bv || (v == bv && i < bi))))) {\n"
           "    pv[t] = v; pi[t] = i;\n   }\n  }\n"
           "  barrier(CLK_LOCAL_MEM_FENCE);\n }\n";
    src += " if (t == 0) ((__global long*)PTR(out))[obase] = pi[0] < 0 ? 0 : pi[0];\n}\n";
    return src;
  }
  src += " __local float part[WG];\n {\n";
  src += "  float acc = 0.0f;\n  for (long j = t; j < count; j += WG) {\n" + slice + "   acc += " + x + ";\n  }\n";
  src += tree(plus, "sum");
  src += "  const float mu = sum / (float)count;\n";
  src += "  acc = 0.0f;\n  for (long j = t; j < count; j += WG) {\n" + slice + "   const float d = " + x +
         " - mu;\n   acc += d * d;\n  }\n";
  src += tree(plus, "sq");
  src += "  const float var = sq / fmax(0.0f, (float)count - correction);\n";
  src += "  if (t == 0) st" + num(a.out_dtype) + "(PTR(out), obase, " +
         (a.op == KPDR_REDUCE_STD ? "sqrt(var)" : "var") + ");\n }\n}\n";
  return src;
}

kpdrError_t bad(const char* api, const std::string& what) {
  return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": " + what);
}

}  // namespace

kpdrError_t softmax_dim(const kpdrSoftmaxDimArgs* a, kpdrStream_t handle) {
  const char* api = "softmax_dim";
  return guarded(api, [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    if (a->op < KPDR_SOFTMAX || a->op > KPDR_LOG_SOFTMAX_BACKWARD) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown op code " + num(a->op));
    }
    int64_t total = 0;
    if (kpdrError_t error = check_shape(api, a->ndim, a->sizes, &total)) return error;
    if (a->dim < 0 || a->dim >= a->ndim) return bad(api, "dim outside 0..ndim-1");
    const bool backward = a->op >= KPDR_SOFTMAX_BACKWARD;
    if (!is_float_dtype(a->out_dtype) || !is_float_dtype(a->x.dtype) ||
        (backward && !is_float_dtype(a->grad.dtype))) {
      return bad(api, "unknown kpdrDtype");
    }
    if (total == 0) return KPDR_SUCCESS;
    int64_t os[8], so[8], sx[8], sg[8];
    int outer = 0;
    for (int d = 0; d < a->ndim; ++d) {
      if (d == a->dim) continue;
      os[outer] = a->sizes[d];
      so[outer] = a->out_strides[d];
      sx[outer] = a->x.strides[d];
      sg[outer++] = a->grad.strides[d];
    }
    const int device = stream->device();
    Args args(runtime, device, api);
    if (a->out == nullptr || a->x.data == nullptr || (backward && a->grad.data == nullptr)) {
      return bad(api, "a tensor pointer is NULL");
    }
    if (kpdrError_t error = args.tensor(a->out, "out")) return error;
    if (kpdrError_t error = args.tensor(a->x.data, "x.data")) return error;
    if (backward) {
      if (kpdrError_t error = args.tensor(a->grad.data, "grad.data")) return error;
    } else {
      args.unused_tensor();
    }
    args.long8(os, outer); args.long8(so, outer); args.long8(sx, outer); args.long8(sg, outer);
    args.i64(a->sizes[a->dim]);
    args.i64(a->out_strides[a->dim]); args.i64(a->x.strides[a->dim]); args.i64(a->grad.strides[a->dim]);
    const std::string key = "smd" + num(a->op) + "o" + num(a->out_dtype) + "x" + num(a->x.dtype) + "g" +
                            num(backward ? a->grad.dtype : 0) + "k" + num(outer);
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, "kp_softmax_dim",
                                       [&] { return softmax_source(*a, outer); }, &kernel)) {
      return error;
    }
    const size_t wg = kernel->work_group;
    return args.run(kernel, *stream, static_cast<size_t>(total / a->sizes[a->dim]) * wg, wg);
  });
}

kpdrError_t nll_loss(const kpdrNllLossArgs* a, kpdrStream_t handle) {
  const char* api = "nll_loss";
  return guarded(api, [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    if (a->reduction < 0 || a->reduction > 2) return bad(api, "reduction not 0, 1 or 2");
    if (a->batch < 0 || a->classes < 0 || a->spatial < 0) return bad(api, "negative size");
    if (!is_float_dtype(a->dtype) || (a->target_dtype != KPDR_DTYPE_INT64 && a->target_dtype != KPDR_DTYPE_INT32)) {
      return bad(api, "unknown kpdrDtype");
    }
    const int64_t elements = a->batch * a->spatial;
    const int device = stream->device();
    Args args(runtime, device, api);
    const bool has_w = a->weight != nullptr;
    auto bind = [&](const void* ptr, const char* name, bool wanted) -> kpdrError_t {
      if (!wanted || ptr == nullptr) {
        if (wanted) return bad(api, std::string(name) + " is NULL");
        args.unused_tensor();
        return KPDR_SUCCESS;
      }
      return args.tensor(ptr, name);
    };
    const std::string key = "nll" + num(a->dtype) + "t" + num(a->target_dtype);
    auto tail = [&](const int64_t* strides3) {
      args.i64(a->batch); args.i64(a->classes); args.i64(a->spatial);
      args.i64(strides3[0]); args.i64(strides3[1]); args.i64(strides3[2]);
      args.i64(a->target_strides[0]); args.i64(a->target_strides[1]);
      args.i64(a->weight_stride);
      args.i64(a->out_strides[0]); args.i64(a->out_strides[1]);
      args.i64(a->ignore_index);
      args.i32(has_w ? 1 : 0);
      args.i32(a->reduction);
    };
    Kernel* kernel = nullptr;
    if (a->backward) {
      if (elements == 0 || a->classes == 0) return KPDR_SUCCESS;
      if (kpdrError_t e = bind(a->grad_input, "grad_input", true)) return e;
      if (kpdrError_t e = bind(a->target, "target", true)) return e;
      if (kpdrError_t e = bind(a->weight, "weight", has_w)) return e;
      if (kpdrError_t e = bind(a->grad_output, "grad_output", true)) return e;
      if (kpdrError_t e = bind(a->total_weight, "total_weight", a->reduction == 1)) return e;
      tail(a->grad_input_strides);
      if (kpdrError_t error = kernel_for(runtime, device, key, "kp_nll_backward",
                                         [&] { return nll_source(*a); }, &kernel)) {
        return error;
      }
      return args.run_grid(kernel, *stream, elements * a->classes);
    }
    if (a->total_weight == nullptr) return bad(api, "total_weight is NULL");
    const bool any = elements > 0;
    // In the kernel's order (in, tg, w, out, tw); what is not read is bound
    // to total_weight, which every call has.
    auto bind_forward = [&](const void* ptr, const char* name, bool wanted) -> kpdrError_t {
      if (wanted && ptr == nullptr) return bad(api, std::string(name) + " is NULL");
      return args.tensor(wanted ? ptr : a->total_weight, wanted ? name : "total_weight");
    };
    if (kpdrError_t e = bind_forward(a->input, "input", any)) return e;
    if (kpdrError_t e = bind_forward(a->target, "target", any)) return e;
    if (kpdrError_t e = bind_forward(a->weight, "weight", has_w)) return e;
    if (kpdrError_t e = bind_forward(a->out, "out", a->reduction != 0 || any)) return e;
    if (kpdrError_t e = bind_forward(a->total_weight, "total_weight", true)) return e;
    tail(a->input_strides);
    const bool reduce = a->reduction != 0;
    if (kpdrError_t error = kernel_for(runtime, device, key, reduce ? "kp_nll_reduce" : "kp_nll_none",
                                       [&] { return nll_source(*a); }, &kernel)) {
      return error;
    }
    if (reduce) return args.run(kernel, *stream, kernel->work_group, kernel->work_group);
    return args.run_grid(kernel, *stream, std::max<int64_t>(elements, 1));
  });
}

kpdrError_t layer_norm(const kpdrLayerNormArgs* a, kpdrStream_t handle) {
  const char* api = "layer_norm";
  return guarded(api, [&]() -> kpdrError_t {
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> stream;
    if (kpdrError_t error = entry_stream(api, handle, a, &runtime, &stream)) return error;
    if (a->rows < 0 || a->cols < 0) return bad(api, "negative size");
    if (!is_float_dtype(a->dtype) || !is_float_dtype(a->weight_dtype) || !is_float_dtype(a->stats_dtype)) {
      return bad(api, "unknown kpdrDtype");
    }
    const int device = stream->device();
    const std::string key = "ln" + num(a->dtype) + "w" + num(a->weight_dtype) + "m" + num(a->stats_dtype);
    auto make = [&] { return layer_norm_source(*a); };
    const int cus = runtime->device(device).compute_units;
    // Binds ptr, or `fallback` (a buffer of this call the kernel never reads) when not wanted.
    auto bind = [&](Args& args, const void* ptr, const char* name, bool required, const void* fallback) {
      if (ptr == nullptr && required) return bad(api, std::string(name) + " is NULL");
      return args.tensor(ptr != nullptr ? ptr : fallback, ptr != nullptr ? name : "a placeholder");
    };
    if (!a->backward) {
      if (a->rows == 0 || a->cols == 0) return KPDR_SUCCESS;
      Args args(runtime, device, api);
      const void* any = a->x;
      if (kpdrError_t e = bind(args, a->x, "x", true, any)) return e;
      if (kpdrError_t e = bind(args, a->weight, "weight", false, any)) return e;
      if (kpdrError_t e = bind(args, a->bias, "bias", false, any)) return e;
      if (kpdrError_t e = bind(args, a->out, "out", true, any)) return e;
      if (kpdrError_t e = bind(args, a->mean, "mean", false, any)) return e;
      if (kpdrError_t e = bind(args, a->rstd, "rstd", false, any)) return e;
      args.i64(a->cols); args.i64(a->x_row_stride); args.i64(a->out_row_stride);
      args.f32(a->eps);
      args.i32(a->weight != nullptr); args.i32(a->bias != nullptr);
      args.i32(a->mean != nullptr); args.i32(a->rstd != nullptr);
      Kernel* kernel = nullptr;
      if (kpdrError_t error = kernel_for(runtime, device, key, "kp_ln_forward", make, &kernel)) return error;
      return args.run(kernel, *stream, static_cast<size_t>(a->rows) * kernel->work_group, kernel->work_group);
    }
    if (a->cols == 0) return KPDR_SUCCESS;
    if (a->rows > 0 && a->grad_input != nullptr) {
      Args args(runtime, device, api);
      const void* any = a->x;
      if (kpdrError_t e = bind(args, a->x, "x", true, any)) return e;
      if (kpdrError_t e = bind(args, a->weight, "weight", false, any)) return e;
      if (kpdrError_t e = bind(args, a->mean, "mean", true, any)) return e;
      if (kpdrError_t e = bind(args, a->rstd, "rstd", true, any)) return e;
      if (kpdrError_t e = bind(args, a->grad_out, "grad_out", true, any)) return e;
      if (kpdrError_t e = bind(args, a->grad_input, "grad_input", true, any)) return e;
      args.i64(a->cols); args.i64(a->x_row_stride); args.i64(a->grad_out_row_stride);
      args.i64(a->grad_input_row_stride);
      args.i32(a->weight != nullptr);
      Kernel* kernel = nullptr;
      if (kpdrError_t error = kernel_for(runtime, device, key, "kp_ln_grad_input", make, &kernel)) return error;
      if (kpdrError_t error = args.run(kernel, *stream, static_cast<size_t>(a->rows) * kernel->work_group,
                                       kernel->work_group)) {
        return error;
      }
    }
    if (a->grad_weight == nullptr && a->grad_bias == nullptr) return KPDR_SUCCESS;
    Args args(runtime, device, api);
    const void* any = a->grad_weight != nullptr ? a->grad_weight : a->grad_bias;
    const bool rows = a->rows > 0;  // no row: the sums are 0 and x, mean, rstd, grad_out are never read
    if (kpdrError_t e = bind(args, rows ? a->x : nullptr, "x", rows, any)) return e;
    if (kpdrError_t e = bind(args, rows ? a->mean : nullptr, "mean", rows, any)) return e;
    if (kpdrError_t e = bind(args, rows ? a->rstd : nullptr, "rstd", rows, any)) return e;
    if (kpdrError_t e = bind(args, rows ? a->grad_out : nullptr, "grad_out", rows, any)) return e;
    if (kpdrError_t e = bind(args, a->grad_weight, "grad_weight", false, any)) return e;
    if (kpdrError_t e = bind(args, a->grad_bias, "grad_bias", false, any)) return e;
    args.i64(a->rows); args.i64(a->cols); args.i64(a->x_row_stride); args.i64(a->grad_out_row_stride);
    args.i32(a->grad_weight != nullptr); args.i32(a->grad_bias != nullptr);
    Kernel* kernel = nullptr;
    if (kpdrError_t error = kernel_for(runtime, device, key, "kp_ln_grad_params", make, &kernel)) return error;
    const size_t wg = kernel->work_group;
    return args.run(kernel, *stream, grid(a->cols, wg, cus), wg);
  });
}

kpdrError_t reduce_statistics(const kpdrReduceArgs* a, Stream& stream, Runtime* runtime) {
  const char* api = "reduce";
  const bool arg = a->op == KPDR_REDUCE_ARGMAX || a->op == KPDR_REDUCE_ARGMIN;
  const bool integer_sum = (a->op == KPDR_REDUCE_SUM || a->op == KPDR_REDUCE_AMAX || a->op == KPDR_REDUCE_AMIN) &&
                           a->out_dtype == KPDR_DTYPE_INT64 &&
                           (a->in_dtype == KPDR_DTYPE_BOOL || a->in_dtype == KPDR_DTYPE_INT32 ||
                            a->in_dtype == KPDR_DTYPE_INT64);
  const bool known = integer_sum || ((is_float_dtype(a->in_dtype) || a->in_dtype == KPDR_DTYPE_BOOL) &&
                                     (arg ? a->out_dtype == KPDR_DTYPE_INT64 : is_float_dtype(a->out_dtype)));
  if (!known) return bad(api, "unknown kpdrDtype");
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
  const int device = stream.device();
  Args args(runtime, device, api);
  if (a->out == nullptr || (count > 0 && a->in == nullptr)) return bad(api, "out or in is NULL");
  if (kpdrError_t error = args.tensor(count > 0 ? a->in : a->out, "in")) return error;
  if (kpdrError_t error = args.tensor(a->out, "out")) return error;
  args.long8(ks, kept); args.long8(ki, kept); args.long8(ko, kept);
  args.long8(rs, reduced); args.long8(ri, reduced);
  args.i64(count);
  args.f32(static_cast<float>(a->correction));
  const std::string key = "st" + num(a->op) + "i" + num(a->in_dtype) + "o" + num(a->out_dtype) + "k" + num(kept) +
                          "r" + num(reduced);
  Kernel* kernel = nullptr;
  if (kpdrError_t error = kernel_for(runtime, device, key, "kp_statistics",
                                     [&] { return statistics_source(*a, kept, reduced); }, &kernel)) {
    return error;
  }
  return args.run(kernel, stream, static_cast<size_t>(outputs) * kernel->work_group, kernel->work_group);
}

}  // namespace kpdr_opencl

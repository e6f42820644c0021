#include "ops/op_args.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace kernel_pytorch::ops {
namespace {

void check_defined(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "kernel_pytorch.ops.", op, ": ", name, " is None; pass a tensor");
}

void check_same(const char* op, const char* name, const at::Tensor& t, const char* ref_name,
                const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), "kernel_pytorch.ops.", op, ": ", name, " is on ",
              t.device(), " but ", ref_name, " is on ", ref.device(),
              "; move both to one device (e.g. ", name, ".to(", ref_name, ".device))");
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "kernel_pytorch.ops.", op, ": ", name,
              " has dtype ", t.scalar_type(), " but ", ref_name, " has dtype ",
              ref.scalar_type(), "; convert one of them (e.g. ", name, ".to(", ref_name,
              ".dtype))");
}

// A tensor whose last dimension is contiguous and whose leading dimensions
// collapse into rows of one stride; anything else is copied once.
at::Tensor row_major(const at::Tensor& t) {
  if (t.dim() == 0) return t.reshape({1});
  if (t.size(-1) > 1 && t.stride(-1) != 1) return t.contiguous();
  int64_t expected = -1;
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected != -1 && t.stride(d) != expected) return t.contiguous();
    expected = t.stride(d) * t.size(d);
  }
  return t;
}

// Stride between consecutive rows of a row_major tensor.
int64_t row_stride(const at::Tensor& t) {
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) != 1) return t.stride(d);
  }
  return t.size(-1);
}

int64_t rows_of(const at::Tensor& t) { return t.dim() == 0 ? 1 : t.numel() / std::max<int64_t>(1, t.size(-1)); }

// Innermost dimension contiguous (other strides arbitrary).
at::Tensor inner_contiguous(const at::Tensor& t) {
  return (t.size(-1) <= 1 || t.stride(-1) == 1) ? t : t.contiguous();
}

}  // namespace

kpdrDtype kernel_dtype(const char* op, const char* name, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return KPDR_DTYPE_FLOAT32;
    case at::kBFloat16: return KPDR_DTYPE_BFLOAT16;
    case at::kHalf: return KPDR_DTYPE_FLOAT16;
    default:
      TORCH_CHECK(false, "kernel_pytorch.ops.", op, ": ", name, " has dtype ", t.scalar_type(),
                  ", but the kernels support float32, bfloat16 and float16; convert it "
                  "(e.g. ", name, ".float())");
  }
}

bool all_double(std::initializer_list<at::Tensor> ts) {
  for (const auto& t : ts) {
    if (t.defined() && t.scalar_type() != at::kDouble) return false;
  }
  return true;
}

at::Tensor stand_in(const at::Tensor& t) {
  if (!t.defined()) return t;
  const auto dtype = at::isFloatingType(t.scalar_type()) ? at::kFloat : t.scalar_type();
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta).dtype(dtype));
}

RmsNormCall prepare_rms_norm(const char* op, const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& weight, double eps) {
  check_defined(op, "x", x);
  check_defined(op, "weight", weight);
  RmsNormCall c;
  c.args.dtype = kernel_dtype(op, "x", x);
  check_same(op, "weight", weight, "x", x);
  TORCH_CHECK(x.dim() >= 1, "kernel_pytorch.ops.", op, ": x must have at least one dimension "
              "(the normalised one); got a 0-d tensor");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), "kernel_pytorch.ops.", op,
              ": weight must have shape [", x.size(-1), "] (x's last dimension), got ",
              weight.sizes());
  TORCH_CHECK(std::isfinite(eps) && eps >= 0, "kernel_pytorch.ops.", op,
              ": eps must be a finite number >= 0, got ", eps);
  c.x = row_major(x);
  c.weight = weight.contiguous();
  c.out = at::empty(x.sizes(), x.options());
  c.args.rows = rows_of(x);
  c.args.cols = x.size(-1);
  c.args.x = c.x.data_ptr();
  c.args.x_row_stride = row_stride(c.x);
  c.args.weight = c.weight.data_ptr();
  c.args.out = c.out.data_ptr();
  c.args.out_row_stride = c.args.cols;
  c.args.eps = static_cast<float>(eps);
  if (residual.defined()) {
    check_same(op, "residual", residual, "x", x);
    TORCH_CHECK(residual.sizes() == x.sizes(), "kernel_pytorch.ops.", op,
                ": residual must have x's shape ", x.sizes(), ", got ", residual.sizes());
    c.residual = row_major(residual);
    c.residual_out = at::empty(x.sizes(), x.options());
    c.args.residual = c.residual.data_ptr();
    c.args.residual_row_stride = row_stride(c.residual);
    c.args.residual_out = c.residual_out.data_ptr();
    c.args.residual_out_row_stride = c.args.cols;
  }
  return c;
}

SiluCall prepare_silu(const char* op, const at::Tensor& x, bool gated) {
  check_defined(op, "x", x);
  SiluCall c;
  c.args.dtype = kernel_dtype(op, "x", x);
  c.args.gated = gated ? 1 : 0;
  if (gated) {
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, "kernel_pytorch.ops.", op,
                ": the last dimension of x must be even (gate and up halves, 2 * d), got ",
                x.dim() == 0 ? at::IntArrayRef{} : x.sizes());
    auto sizes = x.sizes().vec();
    sizes.back() /= 2;
    c.x = row_major(x);
    c.out = at::empty(sizes, x.options());
    c.args.rows = rows_of(x);
    c.args.cols = x.size(-1) / 2;
    c.args.x_row_stride = row_stride(c.x);
  } else {
    // Elementwise: any contiguous tensor is one long row.
    c.x = x.contiguous();
    c.out = at::empty(x.sizes(), x.options());
    c.args.rows = 1;
    c.args.cols = x.numel();
    c.args.x_row_stride = c.args.cols;
  }
  c.args.x = c.x.data_ptr();
  c.args.out = c.out.data_ptr();
  c.args.out_row_stride = c.args.cols;
  return c;
}

RopeCall prepare_rope(const char* op, const at::Tensor& x, const at::Tensor& cos,
                      const at::Tensor& sin, bool interleaved, bool inverse) {
  check_defined(op, "x", x);
  check_defined(op, "cos", cos);
  check_defined(op, "sin", sin);
  RopeCall c;
  c.args.dtype = kernel_dtype(op, "x", x);
  c.args.cs_dtype = kernel_dtype(op, "cos", cos);
  TORCH_CHECK(x.dim() == 4, "kernel_pytorch.ops.", op,
              ": x must be [batch, seq, heads, head_dim], got shape ", x.sizes());
  const int64_t B = x.size(0), S = x.size(1), H = x.size(2), D = x.size(3);
  TORCH_CHECK(D % 2 == 0, "kernel_pytorch.ops.", op,
              ": head_dim (x's last dimension) must be even to rotate pairs, got ", D);
  TORCH_CHECK(cos.device() == x.device() && sin.device() == x.device(), "kernel_pytorch.ops.", op,
              ": cos and sin must be on x's device ", x.device(), ", got ", cos.device(), " and ",
              sin.device());
  TORCH_CHECK(sin.scalar_type() == cos.scalar_type(), "kernel_pytorch.ops.", op,
              ": cos and sin must have one dtype, got ", cos.scalar_type(), " and ",
              sin.scalar_type());
  TORCH_CHECK(cos.sizes() == sin.sizes(), "kernel_pytorch.ops.", op,
              ": cos and sin must have one shape, got ", cos.sizes(), " and ", sin.sizes());
  const bool shared = cos.dim() == 2;
  TORCH_CHECK((shared && cos.size(0) == S && cos.size(1) == D / 2) ||
                  (cos.dim() == 3 && cos.size(0) == B && cos.size(1) == S && cos.size(2) == D / 2),
              "kernel_pytorch.ops.", op, ": cos and sin must be [seq, head_dim // 2] = [", S, ", ",
              D / 2, "] or [batch, seq, head_dim // 2] = [", B, ", ", S, ", ", D / 2, "], got ",
              cos.sizes());
  c.x = inner_contiguous(x);
  c.cos = inner_contiguous(cos);
  c.sin = inner_contiguous(sin);
  if (c.cos.strides() != c.sin.strides()) {
    c.cos = c.cos.contiguous();
    c.sin = c.sin.contiguous();
  }
  c.out = at::empty(x.sizes(), x.options());
  c.args.batch = B; c.args.seq = S; c.args.heads = H; c.args.head_dim = D;
  c.args.x = c.x.data_ptr();
  for (int i = 0; i < 3; ++i) {
    c.args.x_stride[i] = c.x.stride(i);
    c.args.out_stride[i] = c.out.stride(i);
  }
  c.args.out = c.out.data_ptr();
  c.args.cos = c.cos.data_ptr();
  c.args.sin = c.sin.data_ptr();
  c.args.cs_batch_stride = shared ? 0 : c.cos.stride(0);
  c.args.cs_seq_stride = c.cos.stride(shared ? 0 : 1);
  c.args.interleaved = interleaved ? 1 : 0;
  c.args.inverse = inverse ? 1 : 0;
  return c;
}

at::Tensor SoftmaxCall::result() const { return out.dim() == 0 ? out : out.movedim(-1, dim); }

SoftmaxCall prepare_softmax(const char* op, const at::Tensor& x, int64_t dim) {
  check_defined(op, "x", x);
  SoftmaxCall c;
  c.args.dtype = kernel_dtype(op, "x", x);
  const int64_t ndim = std::max<int64_t>(1, x.dim());
  TORCH_CHECK(dim >= -ndim && dim < ndim, "kernel_pytorch.ops.", op, ": dim ", dim,
              " is out of range for a tensor of ", x.dim(), " dimensions; use a value in [",
              -ndim, ", ", ndim - 1, "]");
  c.dim = x.dim() == 0 ? 0 : (dim < 0 ? dim + ndim : dim);
  at::Tensor moved = x.dim() == 0 ? x.reshape({1}) : x.movedim(c.dim, -1);
  c.x = row_major(moved);
  c.out = at::empty(moved.sizes(), x.options());
  c.args.rows = rows_of(moved);
  c.args.cols = moved.size(-1);
  c.args.x = c.x.data_ptr();
  c.args.x_row_stride = row_stride(c.x);
  c.args.out = c.out.data_ptr();
  c.args.out_row_stride = c.args.cols;
  if (x.dim() == 0) c.out = c.out.reshape({});
  return c;
}

namespace {

double default_scale(const c10::optional<double>& scale, int64_t head_dim, const char* op) {
  if (!scale.has_value()) return 1.0 / std::sqrt(static_cast<double>(head_dim));
  TORCH_CHECK(std::isfinite(*scale), "kernel_pytorch.ops.", op, ": scale must be finite, got ",
              *scale);
  return *scale;
}

void check_heads(const char* op, int64_t heads, int64_t kv_heads) {
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, "kernel_pytorch.ops.", op,
              ": the number of query heads (", heads, ") must be a multiple of the number of "
              "key/value heads (", kv_heads, ") for grouped-query attention");
}

}  // namespace

DecodeAttentionCall prepare_decode_attention(const char* op, const at::Tensor& q,
                                             const at::Tensor& k_cache, const at::Tensor& v_cache,
                                             const c10::optional<at::Tensor>& lengths,
                                             const at::Tensor& host_lengths,
                                             c10::optional<double> scale) {
  check_defined(op, "q", q);
  DecodeAttentionCall c;
  c.args.dtype = kernel_dtype(op, "q", q);
  check_same(op, "k_cache", k_cache, "q", q);
  check_same(op, "v_cache", v_cache, "q", q);
  TORCH_CHECK(q.dim() == 3, "kernel_pytorch.ops.", op,
              ": q must be [batch, heads, head_dim] (one token per sequence), got ", q.sizes());
  TORCH_CHECK(k_cache.dim() == 4, "kernel_pytorch.ops.", op,
              ": k_cache must be [batch, kv_heads, T, head_dim], got ", k_cache.sizes());
  TORCH_CHECK(v_cache.sizes() == k_cache.sizes(), "kernel_pytorch.ops.", op,
              ": v_cache must have k_cache's shape ", k_cache.sizes(), ", got ", v_cache.sizes());
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2);
  const int64_t Hkv = k_cache.size(1), T = k_cache.size(2);
  TORCH_CHECK(k_cache.size(0) == B && k_cache.size(3) == D, "kernel_pytorch.ops.", op,
              ": k_cache must be [batch=", B, ", kv_heads, T, head_dim=", D, "], got ",
              k_cache.sizes());
  check_heads(op, H, Hkv);
  TORCH_CHECK(T >= 1, "kernel_pytorch.ops.", op, ": the cache must hold at least one position");
  if (lengths.has_value() && lengths->defined()) {
    const at::Tensor& len = *lengths;
    TORCH_CHECK(len.device() == q.device(), "kernel_pytorch.ops.", op, ": lengths is on ",
                len.device(), " but q is on ", q.device(), "; move it to q's device");
    TORCH_CHECK(len.dim() == 1 && len.size(0) == B, "kernel_pytorch.ops.", op,
                ": lengths must be [batch] = [", B, "], got ", len.sizes());
    TORCH_CHECK(!at::isFloatingType(len.scalar_type()) && len.scalar_type() != at::kBool,
                "kernel_pytorch.ops.", op, ": lengths must be an integer tensor, got ",
                len.scalar_type());
    if (B > 0 && host_lengths.defined()) {  // undefined: the backend checks on the device
      const auto hl = host_lengths.to(at::kLong);
      const int64_t lo = hl.min().item<int64_t>(), hi = hl.max().item<int64_t>();
      TORCH_CHECK(lo >= 1 && hi <= T, "kernel_pytorch.ops.", op,
                  ": every length must lie in 1..T = 1..", T, " (the cache length), got values in ",
                  lo, "..", hi);
    }
    c.lengths = len.to(at::kLong).contiguous();
    c.args.lengths = static_cast<const int64_t*>(c.lengths.data_ptr());
  }
  c.q = inner_contiguous(q);
  c.k = inner_contiguous(k_cache);
  c.v = inner_contiguous(v_cache);
  c.out = at::empty(q.sizes(), q.options());
  c.args.batch = B; c.args.heads = H; c.args.kv_heads = Hkv; c.args.cache_len = T; c.args.head_dim = D;
  c.args.q = c.q.data_ptr();
  c.args.k = c.k.data_ptr();
  c.args.v = c.v.data_ptr();
  c.args.out = c.out.data_ptr();
  for (int i = 0; i < 2; ++i) {
    c.args.q_stride[i] = c.q.stride(i);
    c.args.out_stride[i] = c.out.stride(i);
  }
  for (int i = 0; i < 3; ++i) {
    c.args.k_stride[i] = c.k.stride(i);
    c.args.v_stride[i] = c.v.stride(i);
  }
  c.args.scale = static_cast<float>(default_scale(scale, D, op));
  return c;
}

PrefillAttentionCall prepare_prefill_attention(const char* op, const at::Tensor& q,
                                               const at::Tensor& k, const at::Tensor& v,
                                               bool causal, c10::optional<double> scale) {
  check_defined(op, "q", q);
  PrefillAttentionCall c;
  c.args.dtype = kernel_dtype(op, "q", q);
  check_same(op, "k", k, "q", q);
  check_same(op, "v", v, "q", q);
  TORCH_CHECK(q.dim() == 4, "kernel_pytorch.ops.", op,
              ": q must be [batch, heads, T, head_dim], got ", q.sizes());
  TORCH_CHECK(k.dim() == 4, "kernel_pytorch.ops.", op,
              ": k must be [batch, kv_heads, T, head_dim], got ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), "kernel_pytorch.ops.", op, ": v must have k's shape ",
              k.sizes(), ", got ", v.sizes());
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  TORCH_CHECK(k.size(0) == B && k.size(3) == D, "kernel_pytorch.ops.", op,
              ": k must be [batch=", B, ", kv_heads, T, head_dim=", D, "], got ", k.sizes());
  check_heads(op, H, k.size(1));
  c.q = inner_contiguous(q);
  c.k = inner_contiguous(k);
  c.v = inner_contiguous(v);
  c.out = at::empty(q.sizes(), q.options());
  c.args.batch = B; c.args.heads = H; c.args.kv_heads = k.size(1);
  c.args.seq_q = Tq; c.args.seq_kv = k.size(2); c.args.head_dim = D;
  c.args.q = c.q.data_ptr();
  c.args.k = c.k.data_ptr();
  c.args.v = c.v.data_ptr();
  c.args.out = c.out.data_ptr();
  for (int i = 0; i < 3; ++i) {
    c.args.q_stride[i] = c.q.stride(i);
    c.args.k_stride[i] = c.k.stride(i);
    c.args.v_stride[i] = c.v.stride(i);
    c.args.out_stride[i] = c.out.stride(i);
  }
  c.args.scale = static_cast<float>(default_scale(scale, D, op));
  c.args.causal = causal ? 1 : 0;
  return c;
}

MatmulVecCall prepare_matmul_vec(const char* op, const at::Tensor& w, const at::Tensor& x) {
  check_defined(op, "w", w);
  check_defined(op, "x", x);
  MatmulVecCall c;
  c.args.dtype = kernel_dtype(op, "w", w);
  check_same(op, "x", x, "w", w);
  TORCH_CHECK(w.dim() == 2, "kernel_pytorch.ops.", op, ": w must be [N, K], got ", w.sizes());
  TORCH_CHECK(x.dim() == 1 && x.size(0) == w.size(1), "kernel_pytorch.ops.", op,
              ": x must be [K] = [", w.size(1), "] (w's second dimension), got ", x.sizes());
  c.w = inner_contiguous(w);
  c.x = x.contiguous();
  c.out = at::empty({w.size(0)}, w.options());
  c.args.n = w.size(0);
  c.args.k = w.size(1);
  c.args.w = c.w.data_ptr();
  c.args.w_row_stride = c.w.size(0) > 1 ? c.w.stride(0) : c.w.size(1);
  c.args.x = c.x.data_ptr();
  c.args.out = c.out.data_ptr();
  return c;
}

}  // namespace kernel_pytorch::ops

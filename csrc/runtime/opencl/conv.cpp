// The im2col and max_pool2d entries of the OpenCL runtime (kpdr.h's core-op
// section). One program per storage dtype (KP_DTYPE, float accumulation),
// built through the kernel cache like the generated pointwise programs.
// Every kernel is a gather with one work-item per element it writes
// (grid-stride): col2im and the pooling backward visit, for each pixel, the
// windows that cover it, so no two work-items write one element, no atomics
// are needed and sums come out in a fixed order.
#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "conv.h"
#include "errors.h"
#include "generated.h"
#include "kernel_cache.h"
#include "runtime.h"

namespace kpdr_opencl {
namespace {

const char* const kConvSource = R"CLC(
#define BUF(n) __global uchar* n##_b, ulong n##_o
#define AT(ty, n) ((__global ty*)(n##_b + n##_o))
#if KP_DTYPE == 0
typedef float T;
inline float ld(const __global float* p, long i) { return p[i]; }
inline void st(__global float* p, long i, float v) { p[i] = v; }
#elif KP_DTYPE == 1
typedef half T;
inline float ld(const __global half* p, long i) { return vload_half((size_t)i, p); }
inline void st(__global half* p, long i, float v) { vstore_half_rte(v, (size_t)i, p); }
#else
typedef ushort T;
inline float ld(const __global ushort* p, long i) { return as_float(((uint)p[i]) << 16); }
inline void st(__global ushort* p, long i, float v) {
  uint u = as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) { p[i] = (ushort)((u >> 16) | 0x40u); return; }  /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
  p[i] = (ushort)(u >> 16);
}
#endif
/* g: (batch, channels, height, width, out_h, out_w); w: (kernel h, w,
 * stride h, w, padding h, w, dilation h, w); strides (n, c, h, w). */
#define AT4(s, n, c, h, x) ((n) * (s).s0 + (c) * (s).s1 + (h) * (s).s2 + (x) * (s).s3)

/* One work-item per col element, output position fastest. */
__kernel void kp_im2col(long8 g, long8 w, BUF(image), long4 is, BUF(col), long cbs, long cld, long total) {
  const __global T* image = AT(T, image);
  __global T* col = AT(T, col);
  const long positions = g.s4 * g.s5;
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long p = e % positions, r = e / positions;
    const long ow = p % g.s5, oh = p / g.s5;
    const long j = r % w.s1, i = (r / w.s1) % w.s0, c = (r / (w.s1 * w.s0)) % g.s1, n = r / (w.s1 * w.s0 * g.s1);
    const long h = oh * w.s2 - w.s4 + i * w.s6, x = ow * w.s3 - w.s5 + j * w.s7;
    const float v = (h >= 0 && h < g.s2 && x >= 0 && x < g.s3) ? ld(image, AT4(is, n, c, h, x)) : 0.0f;
    st(col, n * cbs + ((c * w.s0 + i) * w.s1 + j) * cld + p, v);
  }
}

/* One work-item per pixel: the sum of the col elements im2col read from it. */
__kernel void kp_col2im(long8 g, long8 w, BUF(image), long4 is, BUF(col), long cbs, long cld, long total) {
  __global T* image = AT(T, image);
  const __global T* col = AT(T, col);
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long x = e % g.s3, h = (e / g.s3) % g.s2, c = (e / (g.s3 * g.s2)) % g.s1, n = e / (g.s3 * g.s2 * g.s1);
    float sum = 0.0f;
    for (long i = 0; i < w.s0; ++i) {
      const long th = h + w.s4 - i * w.s6;
      if (th < 0 || th % w.s2 != 0 || th / w.s2 >= g.s4) continue;
      const long oh = th / w.s2;
      for (long j = 0; j < w.s1; ++j) {
        const long tw = x + w.s5 - j * w.s7;
        if (tw < 0 || tw % w.s3 != 0 || tw / w.s3 >= g.s5) continue;
        sum += ld(col, n * cbs + ((c * w.s0 + i) * w.s1 + j) * cld + oh * g.s5 + tw / w.s3);
      }
    }
    st(image, AT4(is, n, c, h, x), sum);
  }
}

/* One work-item per output: the window's maximum and its index. */
__kernel void kp_max_pool2d(long8 g, long8 w, BUF(input), long4 is, BUF(out), long4 os, BUF(indices), long4 xs,
                            long total) {
  const __global T* input = AT(T, input);
  __global T* out = AT(T, out);
  __global long* indices = AT(long, indices);
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long ow = e % g.s5, oh = (e / g.s5) % g.s4, c = (e / (g.s5 * g.s4)) % g.s1, n = e / (g.s5 * g.s4 * g.s1);
    float best = -INFINITY;
    long where = -1;
    for (long i = 0; i < w.s0; ++i) {
      const long h = oh * w.s2 - w.s4 + i * w.s6;
      if (h < 0 || h >= g.s2) continue;
      for (long j = 0; j < w.s1; ++j) {
        const long x = ow * w.s3 - w.s5 + j * w.s7;
        if (x < 0 || x >= g.s3) continue;
        const float v = ld(input, AT4(is, n, c, h, x));
        if (where < 0) where = h * g.s3 + x;  /* a window of -inf keeps its first pixel */
        if (v > best || isnan(v)) { best = v; where = h * g.s3 + x; }
      }
    }
    st(out, AT4(os, n, c, oh, ow), best);
    indices[AT4(xs, n, c, oh, ow)] = where;
  }
}

/* One work-item per input pixel: the gradients of the windows whose maximum it was. */
__kernel void kp_max_pool2d_backward(long8 g, long8 w, BUF(input), long4 is, BUF(out), long4 os, BUF(indices),
                                     long4 xs, long total) {
  __global T* grad_in = AT(T, input);
  const __global T* grad_out = AT(T, out);
  const __global long* indices = AT(long, indices);
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long x = e % g.s3, h = (e / g.s3) % g.s2, c = (e / (g.s3 * g.s2)) % g.s1, n = e / (g.s3 * g.s2 * g.s1);
    const long self = h * g.s3 + x;
    float sum = 0.0f;
    for (long i = 0; i < w.s0; ++i) {
      const long th = h + w.s4 - i * w.s6;
      if (th < 0 || th % w.s2 != 0 || th / w.s2 >= g.s4) continue;
      const long oh = th / w.s2;
      for (long j = 0; j < w.s1; ++j) {
        const long tw = x + w.s5 - j * w.s7;
        if (tw < 0 || tw % w.s3 != 0 || tw / w.s3 >= g.s5) continue;
        const long ow = tw / w.s3;
        if (indices[AT4(xs, n, c, oh, ow)] == self) sum += ld(grad_out, AT4(os, n, c, oh, ow));
      }
    }
    st(grad_in, AT4(is, n, c, h, x), sum);
  }
}
)CLC";

// The launch of one kernel of this dtype's program over `total` elements
// (grid-stride), built on first use (kernel cache: memory and disk).
kpdrError_t run_conv_kernel(Runtime* runtime, Stream& stream, Args& args, kpdrDtype dtype, const char* name,
                            int64_t total) {
  Kernel* kernel = nullptr;
  const std::string key = "convolution and pooling, kpdrDtype " + std::to_string(dtype);
  if (kpdrError_t error = kernel_for(runtime, stream.device(), key, name, [&] {
        return "#define KP_DTYPE " + std::to_string(dtype) + "\n" + kConvSource;
      }, &kernel)) {
    return error;
  }
  return args.run_grid(kernel, stream, total);
}

// The stream, and a dtype the program is built for.
kpdrError_t begin(const char* api, kpdrStream_t handle, kpdrDtype dtype, Runtime** runtime,
                  std::shared_ptr<Stream>* stream) {
  if (kpdrError_t error = stream_of(api, handle, runtime, stream)) return error;
  if (dtype != KPDR_DTYPE_FLOAT32 && dtype != KPDR_DTYPE_FLOAT16 && dtype != KPDR_DTYPE_BFLOAT16) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype " + std::to_string(dtype));
  }
  return KPDR_SUCCESS;
}

// Args::tensor, with NULL named as such (Args would only say "not device memory").
kpdrError_t tensor(Args& args, const char* api, const void* ptr, const char* name) {
  if (ptr == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": " + name + " is NULL");
  return args.tensor(ptr, name);
}

kpdrError_t check_window(const char* api, int32_t direction, const int64_t* geometry, const kpdrWindow2d& w) {
  if (direction != 0 && direction != 1) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown direction " + std::to_string(direction));
  }
  for (int d = 0; d < 6; ++d) {
    if (geometry[d] < 0) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": negative size");
  }
  for (int d = 0; d < 2; ++d) {
    if (w.kernel[d] < 1 || w.stride[d] < 1 || w.dilation[d] < 1 || w.padding[d] < 0) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  std::string(api) + ": window kernel, stride and dilation must be >= 1 and padding >= 0");
    }
  }
  return KPDR_SUCCESS;
}

void window_args(Args& l, const int64_t* geometry, const kpdrWindow2d& w) {
  const int64_t g[8] = {geometry[0], geometry[1], geometry[2], geometry[3], geometry[4], geometry[5], 0, 0};
  const int64_t v[8] = {w.kernel[0], w.kernel[1], w.stride[0], w.stride[1],
                        w.padding[0], w.padding[1], w.dilation[0], w.dilation[1]};
  l.long8(g, 8);
  l.long8(v, 8);
}

}  // namespace

kpdrError_t im2col(const kpdrIm2colArgs* a, kpdrStream_t stream) {
  return guarded("im2col", [&]() -> kpdrError_t {
    if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "im2col: args is NULL");
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> s;
    if (kpdrError_t error = begin("im2col", stream, a->dtype, &runtime, &s)) return error;
    const int64_t geometry[6] = {a->batch, a->channels, a->height, a->width, a->out_h, a->out_w};
    if (kpdrError_t error = check_window("im2col", a->direction, geometry, a->window)) return error;
    if (a->col_ld < a->out_h * a->out_w) return fail(KPDR_ERROR_INVALID_VALUE, "im2col: col_ld < out_h * out_w");
    const int64_t pixels = a->batch * a->channels * a->height * a->width;
    const int64_t columns = a->batch * a->channels * a->window.kernel[0] * a->window.kernel[1] * a->out_h * a->out_w;
    const bool forward = a->direction == KPDR_IM2COL;
    if (forward ? columns == 0 : pixels == 0) return KPDR_SUCCESS;
    Args l(runtime, s->device(), "im2col");
    window_args(l, geometry, a->window);
    // An empty side is never read: the written tensor's buffer stands in for it.
    if (kpdrError_t error = tensor(l, "im2col", pixels > 0 ? a->image : a->col, "image")) return error;
    l.long4(a->image_strides);
    if (kpdrError_t error = tensor(l, "im2col", columns > 0 ? a->col : a->image, "col")) return error;
    l.i64(a->col_batch_stride);
    l.i64(a->col_ld);
    l.i64(forward ? columns : pixels);
    return run_conv_kernel(runtime, *s, l, a->dtype, forward ? "kp_im2col" : "kp_col2im", forward ? columns : pixels);
  });
}

kpdrError_t max_pool2d(const kpdrMaxPool2dArgs* a, kpdrStream_t stream) {
  return guarded("max_pool2d", [&]() -> kpdrError_t {
    if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "max_pool2d: args is NULL");
    Runtime* runtime = nullptr;
    std::shared_ptr<Stream> s;
    if (kpdrError_t error = begin("max_pool2d", stream, a->dtype, &runtime, &s)) return error;
    const int64_t geometry[6] = {a->batch, a->channels, a->height, a->width, a->out_h, a->out_w};
    if (kpdrError_t error = check_window("max_pool2d", a->direction, geometry, a->window)) return error;
    const int64_t pixels = a->batch * a->channels * a->height * a->width;
    const int64_t outputs = a->batch * a->channels * a->out_h * a->out_w;
    const bool forward = a->direction == KPDR_MAX_POOL_FORWARD;
    if (forward ? outputs == 0 : pixels == 0) return KPDR_SUCCESS;
    if (forward && pixels == 0) return fail(KPDR_ERROR_INVALID_VALUE, "max_pool2d: an empty input has no maximum");
    Args l(runtime, s->device(), "max_pool2d");
    window_args(l, geometry, a->window);
    if (kpdrError_t error = tensor(l, "max_pool2d", a->input, "input")) return error;
    l.long4(a->input_strides);
    if (kpdrError_t error = tensor(l, "max_pool2d", outputs > 0 ? a->out : a->input, "out")) return error;
    l.long4(a->out_strides);
    if (kpdrError_t error = tensor(l, "max_pool2d", outputs > 0 ? static_cast<const void*>(a->indices) : a->input,
                                   "indices")) {
      return error;
    }
    l.long4(a->indices_strides);
    l.i64(forward ? outputs : pixels);
    return run_conv_kernel(runtime, *s, l, a->dtype, forward ? "kp_max_pool2d" : "kp_max_pool2d_backward",
                           forward ? outputs : pixels);
  });
}

}  // namespace kpdr_opencl

// kpdrIm2colArgs and kpdrMaxPool2dArgs on the CPU: the simulator's
// convolution and pooling entries (kpdr.h's core-op section). Both
// directions of each are gathers: every output element is written by
// exactly one iteration (col2im and the pooling backward visit, for each
// pixel, the windows that cover it), so threads never write the same element
// and the sums come out in one fixed order.
#include <algorithm>
#include <cmath>
#include <limits>

#include "element_access.h"
#include "kernels/kernels.h"
#include "scalar.h"

namespace kp {
namespace {

// The window offset i (< kernel) and output position o (< outs) with
// o * stride - padding + i * dilation == p, visited for each i.
template <typename F>
void windows_covering(int64_t p, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, int64_t outs,
                      F&& visit) {
  for (int64_t i = 0; i < kernel; ++i) {
    const int64_t t = p + padding - i * dilation;
    if (t < 0 || t % stride != 0) continue;
    const int64_t o = t / stride;
    if (o < outs) visit(i, o);
  }
}

}  // namespace

void im2col(const kpdrIm2colArgs& a) {
  const kpdrWindow2d& w = a.window;
  const int64_t kh = w.kernel[0], kw = w.kernel[1], positions = a.out_h * a.out_w;
  const int64_t* is = a.image_strides;
  if (a.direction == KPDR_IM2COL) {
    // One (image, channel, kernel offset) row of col per task.
    const int64_t rows = a.batch * a.channels * kh * kw;
    parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, positions)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t j = r % kw, i = (r / kw) % kh, c = (r / (kw * kh)) % a.channels, n = r / (kw * kh * a.channels);
        const int64_t row = n * a.col_batch_stride + ((c * kh + i) * kw + j) * a.col_ld;
        for (int64_t oh = 0; oh < a.out_h; ++oh) {
          const int64_t h = oh * w.stride[0] - w.padding[0] + i * w.dilation[0];
          for (int64_t ow = 0; ow < a.out_w; ++ow) {
            const int64_t x = ow * w.stride[1] - w.padding[1] + j * w.dilation[1];
            const bool inside = h >= 0 && h < a.height && x >= 0 && x < a.width;
            store(a.col, a.dtype, row + oh * a.out_w + ow,
                  inside ? load(a.image, a.dtype, n * is[0] + c * is[1] + h * is[2] + x * is[3]) : 0.0f);
          }
        }
      }
    });
    return;
  }
  // col2im: one image row (n, c, h) per task.
  const int64_t rows = a.batch * a.channels * a.height;
  parallel_for(0, rows, std::max<int64_t>(1, 1024 / std::max<int64_t>(1, a.width)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t h = r % a.height, c = (r / a.height) % a.channels, n = r / (a.height * a.channels);
      for (int64_t x = 0; x < a.width; ++x) {
        float sum = 0.0f;
        windows_covering(h, kh, w.stride[0], w.padding[0], w.dilation[0], a.out_h, [&](int64_t i, int64_t oh) {
          windows_covering(x, kw, w.stride[1], w.padding[1], w.dilation[1], a.out_w, [&](int64_t j, int64_t ow) {
            sum += load(a.col, a.dtype,
                        n * a.col_batch_stride + ((c * kh + i) * kw + j) * a.col_ld + oh * a.out_w + ow);
          });
        });
        store(a.image, a.dtype, n * is[0] + c * is[1] + h * is[2] + x * is[3], sum);
      }
    }
  });
}

void max_pool2d(const kpdrMaxPool2dArgs& a) {
  const kpdrWindow2d& w = a.window;
  const int64_t *is = a.input_strides, *os = a.out_strides, *xs = a.indices_strides;
  if (a.direction == KPDR_MAX_POOL_FORWARD) {
    const int64_t planes = a.batch * a.channels;
    parallel_for(0, planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t n = p / a.channels, c = p % a.channels;
        for (int64_t oh = 0; oh < a.out_h; ++oh) {
          for (int64_t ow = 0; ow < a.out_w; ++ow) {
            float best = -std::numeric_limits<float>::infinity();
            int64_t where = -1;
            for (int64_t i = 0; i < w.kernel[0]; ++i) {
              const int64_t h = oh * w.stride[0] - w.padding[0] + i * w.dilation[0];
              if (h < 0 || h >= a.height) continue;
              for (int64_t j = 0; j < w.kernel[1]; ++j) {
                const int64_t x = ow * w.stride[1] - w.padding[1] + j * w.dilation[1];
                if (x < 0 || x >= a.width) continue;
                const float v = load(a.input, a.dtype, n * is[0] + c * is[1] + h * is[2] + x * is[3]);
                if (where < 0) where = h * a.width + x;  // a window of -inf keeps its first pixel
                if (v > best || std::isnan(v)) {
                  best = v;
                  where = h * a.width + x;
                }
              }
            }
            store(a.out, a.dtype, n * os[0] + c * os[1] + oh * os[2] + ow * os[3], best);
            a.indices[n * xs[0] + c * xs[1] + oh * xs[2] + ow * xs[3]] = where;
          }
        }
      }
    });
    return;
  }
  const int64_t rows = a.batch * a.channels * a.height;
  parallel_for(0, rows, std::max<int64_t>(1, 1024 / std::max<int64_t>(1, a.width)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t h = r % a.height, c = (r / a.height) % a.channels, n = r / (a.height * a.channels);
      for (int64_t x = 0; x < a.width; ++x) {
        float sum = 0.0f;
        const int64_t self = h * a.width + x;
        windows_covering(h, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0], a.out_h, [&](int64_t, int64_t oh) {
          windows_covering(x, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1], a.out_w, [&](int64_t, int64_t ow) {
            if (a.indices[n * xs[0] + c * xs[1] + oh * xs[2] + ow * xs[3]] == self) {
              sum += load(a.out, a.dtype, n * os[0] + c * os[1] + oh * os[2] + ow * os[3]);
            }
          });
        });
        store(a.input, a.dtype, n * is[0] + c * is[1] + h * is[2] + x * is[3], sum);
      }
    }
  });
}

}  // namespace kp

// kpdrGetKernels of the simulator: its "device" kernels are kernel_pytorch's
// CPU kernel library (csrc/kernels), enqueued on the stream so they run in
// stream order with copies, as a real device's kernels would. Device
// addresses (disguised when host_addressable=0) are resolved to the host
// memory backing them at launch; the backing stays alive until the kernel ran.
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "device_indexing.h"
#include "error_reporting.h"
#include "kernels/kernels.h"
#include "kpdr.h"
#include "runtime.h"

using myasic::fail;
using myasic::Runtime;

namespace {

// Resolves the device pointers of one launch and keeps their memory alive.
class Resolver {
 public:
  Resolver(Runtime& runtime, int device, const char* api)
      : runtime_(runtime), device_(device), api_(api) {}

  // Replaces *ptr (a device address, or NULL when optional) by its host address.
  template <typename P>
  kpdrError_t resolve(P** ptr, const char* name, bool optional = false) {
    if (*ptr == nullptr) {
      if (optional) return KPDR_SUCCESS;
      return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": " + name + " is NULL");
    }
    myasic::DeviceAllocationView view;
    if (!runtime_.device_memory().find(*ptr, &view)) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": " + name +
                                                " is not device memory of this runtime");
    }
    if (view.device != device_) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  std::string(api_) + ": " + name + " lives on device " + std::to_string(view.device) +
                      " but the stream belongs to device " + std::to_string(device_));
    }
    *ptr = static_cast<P*>(myasic::DeviceMemory::host_address(view, *ptr));
    backings_.push_back(std::move(view.backing));
    return KPDR_SUCCESS;
  }
  std::vector<std::shared_ptr<myasic::HostBacking>> take_backings() { return std::move(backings_); }

 private:
  Runtime& runtime_;
  int device_;
  const char* api_;
  std::vector<std::shared_ptr<myasic::HostBacking>> backings_;
};

bool float_dtype(kpdrDtype d) {
  return d == KPDR_DTYPE_FLOAT32 || d == KPDR_DTYPE_BFLOAT16 || d == KPDR_DTYPE_FLOAT16;
}

template <typename Args>
kpdrError_t check_dtypes(const char* api, const Args& a) {
  if (float_dtype(a.dtype)) return KPDR_SUCCESS;
  return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
}

// Pointwise and reduce operands may also be BOOL; their shapes are checked here too.
kpdrError_t check_dims(const char* api, int32_t ndim, const int64_t* sizes) {
  if (ndim < 0 || ndim > KPDR_MAX_DIMS) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": ndim " + std::to_string(ndim) +
                                              " is outside 0.." + std::to_string(KPDR_MAX_DIMS));
  }
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": negative size");
  }
  return KPDR_SUCCESS;
}

kpdrError_t check_dtypes(const char* api, const kpdrPointwiseArgs& a) {
  const int arity = kp::pointwise_arity(a.op);
  if (arity == 0) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown op code " + std::to_string(a.op));
  }
  if (kpdrError_t error = check_dims(api, a.ndim, a.sizes)) return error;
  auto known_dtype = [](kpdrDtype d) {
    return float_dtype(d) || d == KPDR_DTYPE_BOOL || d == KPDR_DTYPE_INT64 || d == KPDR_DTYPE_INT32;
  };
  bool known = known_dtype(a.out_dtype);
  for (int k = 0; k < arity; ++k) known = known && known_dtype(a.in[k].dtype);
  if (!known) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  if (!kp::pointwise_supported(a)) {  // a float-only op in integer arithmetic, bitwise on floats, TRIL of 1-d
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": op code " + std::to_string(a.op) +
                                              " does not take these dtypes or this rank");
  }
  return KPDR_SUCCESS;
}

kpdrError_t check_dtypes(const char* api, const kpdrReduceArgs& a) {
  if (a.op < KPDR_REDUCE_SUM || a.op > KPDR_REDUCE_STD) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown op code " + std::to_string(a.op));
  }
  if (kpdrError_t error = check_dims(api, a.ndim, a.sizes)) return error;
  if ((a.reduce_mask >> a.ndim) != 0) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": reduce_mask names a dimension beyond ndim");
  }
  const bool arg = a.op == KPDR_REDUCE_ARGMAX || a.op == KPDR_REDUCE_ARGMIN;
  const bool integer_sum = (a.op == KPDR_REDUCE_SUM || a.op == KPDR_REDUCE_AMAX || a.op == KPDR_REDUCE_AMIN) &&
                           a.out_dtype == KPDR_DTYPE_INT64 &&
                           (a.in_dtype == KPDR_DTYPE_BOOL || a.in_dtype == KPDR_DTYPE_INT32 ||
                            a.in_dtype == KPDR_DTYPE_INT64);
  const bool known = integer_sum || ((float_dtype(a.in_dtype) || a.in_dtype == KPDR_DTYPE_BOOL) &&
                                     (arg ? a.out_dtype == KPDR_DTYPE_INT64 : float_dtype(a.out_dtype)));
  if (!known) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  return KPDR_SUCCESS;
}

kpdrError_t check_dtypes(const char* api, const kpdrSoftmaxDimArgs& a) {
  if (a.op < KPDR_SOFTMAX || a.op > KPDR_LOG_SOFTMAX_BACKWARD) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown op code " + std::to_string(a.op));
  }
  if (kpdrError_t error = check_dims(api, a.ndim, a.sizes)) return error;
  if (a.dim < 0 || a.dim >= a.ndim) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": dim outside 0..ndim-1");
  const bool backward = a.op >= KPDR_SOFTMAX_BACKWARD;
  if (!float_dtype(a.out_dtype) || !float_dtype(a.x.dtype) || (backward && !float_dtype(a.grad.dtype))) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  }
  return KPDR_SUCCESS;
}

kpdrError_t check_dtypes(const char* api, const kpdrNllLossArgs& a) {
  if (a.reduction < 0 || a.reduction > 2) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": reduction not 0, 1 or 2");
  if (a.batch < 0 || a.classes < 0 || a.spatial < 0) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": negative size");
  if (!float_dtype(a.dtype) || (a.target_dtype != KPDR_DTYPE_INT64 && a.target_dtype != KPDR_DTYPE_INT32)) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  }
  return KPDR_SUCCESS;
}

kpdrError_t check_dtypes(const char* api, const kpdrLayerNormArgs& a) {
  if (a.rows < 0 || a.cols < 0) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": negative size");
  if (!float_dtype(a.dtype) || !float_dtype(a.weight_dtype) || !float_dtype(a.stats_dtype)) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  }
  return KPDR_SUCCESS;
}

// The distribution and the dtypes it takes (kpdr.h); the INTEGER range.
kpdrError_t check_dtypes(const char* api, const kpdrRandomArgs& a) {
  if (a.distribution < KPDR_RANDOM_UNIFORM || a.distribution > KPDR_RANDOM_INTEGER) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown distribution " + std::to_string(a.distribution));
  }
  if (kpdrError_t error = check_dims(api, a.ndim, a.sizes)) return error;
  const bool any = a.distribution == KPDR_RANDOM_BERNOULLI || a.distribution == KPDR_RANDOM_INTEGER;
  const bool known = float_dtype(a.dtype) || a.dtype == KPDR_DTYPE_BOOL || a.dtype == KPDR_DTYPE_INT64 ||
                     a.dtype == KPDR_DTYPE_INT32;
  if (!known) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  if (!any && !float_dtype(a.dtype)) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": this distribution takes float dtypes only");
  }
  if (a.distribution == KPDR_RANDOM_INTEGER && a.high <= a.low) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": INTEGER needs high > low");
  }
  return KPDR_SUCCESS;
}

// The sorted dimension, k and the dtype (kpdr.h: any kpdrDtype).
kpdrError_t check_dtypes(const char* api, const kpdrSortArgs& a) {
  if (a.ndim < 1 || a.ndim > KPDR_MAX_DIMS) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": ndim " + std::to_string(a.ndim) + " is outside 1.." +
                                              std::to_string(KPDR_MAX_DIMS));
  }
  if (kpdrError_t error = check_dims(api, a.ndim, a.sizes)) return error;
  if (a.dim < 0 || a.dim >= a.ndim) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": dim outside 0..ndim-1");
  if (a.k < 0 || a.k > a.sizes[a.dim]) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": k " + std::to_string(a.k) + " is outside 0.." +
                                              std::to_string(a.sizes[a.dim]));
  }
  const bool known = float_dtype(a.dtype) || a.dtype == KPDR_DTYPE_BOOL || a.dtype == KPDR_DTYPE_INT64 ||
                     a.dtype == KPDR_DTYPE_INT32;
  if (!known) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  return KPDR_SUCCESS;
}

// The op, the dims and the dtypes the arithmetic takes (kpdr.h).
kpdrError_t check_dtypes(const char* api, const kpdrScanArgs& a) {
  if (a.op < KPDR_SCAN_SUM || a.op > KPDR_SCAN_LOGADDEXP) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown op code " + std::to_string(a.op));
  }
  if (a.ndim < 1) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": ndim must be at least 1");
  if (kpdrError_t error = check_dims(api, a.ndim, a.sizes)) return error;
  if (a.dim < 0 || a.dim >= a.ndim) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": dim outside 0..ndim-1");
  if (a.exclusive != 0 && a.exclusive != 1) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": exclusive is not 0 or 1");
  auto integer = [](kpdrDtype d) { return d == KPDR_DTYPE_BOOL || d == KPDR_DTYPE_INT32 || d == KPDR_DTYPE_INT64; };
  if (a.out_dtype == KPDR_DTYPE_INT64 || a.out_dtype == KPDR_DTYPE_INT32) {
    if (!integer(a.in_dtype)) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
    if (a.op == KPDR_SCAN_LOGADDEXP) {
      return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": LOGADDEXP takes float dtypes only");
    }
    return KPDR_SUCCESS;
  }
  if (!float_dtype(a.out_dtype) || !(float_dtype(a.in_dtype) || a.in_dtype == KPDR_DTYPE_BOOL)) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": unknown kpdrDtype");
  }
  return KPDR_SUCCESS;
}

int64_t element_count(int32_t ndim, const int64_t* sizes) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

// Validates the stream, resolves the pointers (`resolve_all` names them) and
// enqueues `kernel` on a copy of the arguments.
template <typename Args, typename ResolveAll>
kpdrError_t launch(const char* api, const Args* args, kpdrStream_t handle,
                   void (*kernel)(const Args&), ResolveAll resolve_all) {
  try {
    Runtime* runtime = nullptr;
    if (kpdrError_t error = Runtime::acquire(&runtime)) return error;
    if (args == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": args is NULL");
    if (handle == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": stream is NULL");
    std::shared_ptr<myasic::Stream> stream = runtime->streams().find(handle);
    if (stream == nullptr) {
      return fail(KPDR_ERROR_INVALID_HANDLE, std::string(api) + ": unknown stream handle");
    }
    if (kpdrError_t error = check_dtypes(api, *args)) return error;
    Args resolved = *args;
    Resolver resolver(*runtime, stream->device(), api);
    if (kpdrError_t error = resolve_all(resolver, resolved)) return error;
    auto backings = std::make_shared<std::vector<std::shared_ptr<myasic::HostBacking>>>(resolver.take_backings());
    return stream->enqueue([resolved, backings, kernel] { kernel(resolved); });
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string(api) + ": internal error: " + error.what());
  }
}

#define KP_RESOLVE(field, ...) \
  if (kpdrError_t e = r.resolve(&a.field, #field, ##__VA_ARGS__)) return e

kpdrError_t rms_norm(const kpdrRmsNormArgs* args, kpdrStream_t stream) {
  return launch("rms_norm", args, stream, &kp::rms_norm, [](Resolver& r, kpdrRmsNormArgs& a) {
    KP_RESOLVE(x); KP_RESOLVE(weight); KP_RESOLVE(out);
    KP_RESOLVE(residual, true); KP_RESOLVE(residual_out, a.residual == nullptr);
    KP_RESOLVE(rstd, true);
    return KPDR_SUCCESS;
  });
}

kpdrError_t silu(const kpdrSiluArgs* args, kpdrStream_t stream) {
  return launch("silu", args, stream, &kp::silu, [](Resolver& r, kpdrSiluArgs& a) {
    KP_RESOLVE(x); KP_RESOLVE(out);
    return KPDR_SUCCESS;
  });
}

kpdrError_t rope(const kpdrRopeArgs* args, kpdrStream_t stream) {
  return launch("rope", args, stream, &kp::rope, [](Resolver& r, kpdrRopeArgs& a) {
    KP_RESOLVE(x); KP_RESOLVE(out); KP_RESOLVE(cos); KP_RESOLVE(sin);
    return KPDR_SUCCESS;
  });
}

kpdrError_t softmax(const kpdrSoftmaxArgs* args, kpdrStream_t stream) {
  return launch("softmax", args, stream, &kp::softmax, [](Resolver& r, kpdrSoftmaxArgs& a) {
    KP_RESOLVE(x); KP_RESOLVE(out);
    return KPDR_SUCCESS;
  });
}

kpdrError_t decode_attention(const kpdrDecodeAttentionArgs* args, kpdrStream_t stream) {
  return launch("decode_attention", args, stream, &kp::decode_attention,
                [](Resolver& r, kpdrDecodeAttentionArgs& a) {
                  KP_RESOLVE(q); KP_RESOLVE(k); KP_RESOLVE(v); KP_RESOLVE(out);
                  KP_RESOLVE(lengths, true);
                  return KPDR_SUCCESS;
                });
}

kpdrError_t prefill_attention(const kpdrPrefillAttentionArgs* args, kpdrStream_t stream) {
  return launch("prefill_attention", args, stream, &kp::prefill_attention,
                [](Resolver& r, kpdrPrefillAttentionArgs& a) {
                  KP_RESOLVE(q); KP_RESOLVE(k); KP_RESOLVE(v); KP_RESOLVE(out);
                  return KPDR_SUCCESS;
                });
}

kpdrError_t matmul_vec(const kpdrMatmulVecArgs* args, kpdrStream_t stream) {
  return launch("matmul_vec", args, stream, &kp::matmul_vec, [](Resolver& r, kpdrMatmulVecArgs& a) {
    KP_RESOLVE(w); KP_RESOLVE(x); KP_RESOLVE(out);
    return KPDR_SUCCESS;
  });
}

kpdrError_t gemm(const kpdrGemmArgs* args, kpdrStream_t stream) {
  if (args != nullptr && (args->batch < 0 || args->m < 0 || args->n < 0 || args->k < 0)) {
    return fail(KPDR_ERROR_INVALID_VALUE, "gemm: negative size");
  }
  return launch("gemm", args, stream, &kp::gemm, [](Resolver& r, kpdrGemmArgs& a) {
    if (a.batch == 0 || a.m == 0 || a.n == 0) return KPDR_SUCCESS;
    if (a.k > 0) { KP_RESOLVE(a); KP_RESOLVE(b); }
    KP_RESOLVE(c);
    return KPDR_SUCCESS;
  });
}

kpdrError_t pointwise(const kpdrPointwiseArgs* args, kpdrStream_t stream) {
  return launch("pointwise", args, stream, &kp::pointwise, [](Resolver& r, kpdrPointwiseArgs& a) {
    if (element_count(a.ndim, a.sizes) == 0) {
      a.ndim = 1;  // nothing to compute: the kernel visits no element
      a.sizes[0] = 0;
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(out);
    const int arity = kp::pointwise_arity(a.op);
    for (int k = 0; k < arity; ++k) {
      if (a.in[k].data == nullptr) continue;  // a scalar operand
      static const char* const names[3] = {"in[0].data", "in[1].data", "in[2].data"};
      if (kpdrError_t e = r.resolve(&a.in[k].data, names[k])) return e;
    }
    for (int k = arity; k < 3; ++k) a.in[k].data = nullptr;  // never read
    return KPDR_SUCCESS;
  });
}

kpdrError_t reduce(const kpdrReduceArgs* args, kpdrStream_t stream) {
  return launch("reduce", args, stream, &kp::reduce, [](Resolver& r, kpdrReduceArgs& a) {
    int64_t outputs = 1;
    for (int d = 0; d < a.ndim; ++d) {
      if (!(a.reduce_mask & (1u << d))) outputs *= a.sizes[d];
    }
    if (outputs == 0) {
      a.ndim = 1;  // no output element: nothing is read or written
      a.sizes[0] = 0;
      a.reduce_mask = 0;
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(out);
    if (element_count(a.ndim, a.sizes) > 0) KP_RESOLVE(in);
    return KPDR_SUCCESS;
  });
}

kpdrError_t softmax_dim(const kpdrSoftmaxDimArgs* args, kpdrStream_t stream) {
  return launch("softmax_dim", args, stream, &kp::softmax_dim, [](Resolver& r, kpdrSoftmaxDimArgs& a) {
    if (element_count(a.ndim, a.sizes) == 0) {
      a.ndim = 1;  // no row: nothing is read or written
      a.dim = 0;
      a.sizes[0] = 0;
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(out); KP_RESOLVE(x.data);
    if (a.op >= KPDR_SOFTMAX_BACKWARD) KP_RESOLVE(grad.data);
    return KPDR_SUCCESS;
  });
}

// Convolution and pooling (kpdr.h): a window geometry and sizes a kernel
// can index without running past its tensors.
kpdrError_t check_window(const char* api, int32_t direction, int64_t batch, int64_t channels, int64_t height,
                         int64_t width, int64_t out_h, int64_t out_w, const kpdrWindow2d& w) {
  if (direction != 0 && direction != 1) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, std::string(api) + ": unknown direction " + std::to_string(direction));
  }
  if (batch < 0 || channels < 0 || height < 0 || width < 0 || out_h < 0 || out_w < 0) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": negative size");
  }
  for (int d = 0; d < 2; ++d) {
    if (w.kernel[d] < 1 || w.stride[d] < 1 || w.dilation[d] < 1 || w.padding[d] < 0) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  std::string(api) + ": window kernel, stride and dilation must be >= 1 and padding >= 0");
    }
  }
  return KPDR_SUCCESS;
}

kpdrError_t im2col(const kpdrIm2colArgs* args, kpdrStream_t stream) {
  if (args != nullptr) {
    const kpdrIm2colArgs& a = *args;
    if (kpdrError_t e = check_window("im2col", a.direction, a.batch, a.channels, a.height, a.width, a.out_h,
                                     a.out_w, a.window)) {
      return e;
    }
    if (a.col_ld < a.out_h * a.out_w) return fail(KPDR_ERROR_INVALID_VALUE, "im2col: col_ld < out_h * out_w");
  }
  return launch("im2col", args, stream, &kp::im2col, [](Resolver& r, kpdrIm2colArgs& a) {
    const bool no_image = a.batch * a.channels * a.height * a.width == 0;
    const bool no_col = a.batch * a.channels * a.out_h * a.out_w == 0;
    if (a.direction == KPDR_IM2COL ? no_col : no_image) {
      a.batch = 0;  // nothing to write
      return KPDR_SUCCESS;
    }
    if (!no_image) KP_RESOLVE(image);
    if (!no_col) KP_RESOLVE(col);
    return KPDR_SUCCESS;
  });
}

kpdrError_t nll_loss(const kpdrNllLossArgs* args, kpdrStream_t stream) {
  return launch("nll_loss", args, stream, &kp::nll_loss, [](Resolver& r, kpdrNllLossArgs& a) {
    const bool empty = a.batch * a.spatial == 0;
    if (a.backward) {
      if (empty || a.classes == 0) {
        a.batch = a.spatial = 0;  // grad_input has no element
        return KPDR_SUCCESS;
      }
      KP_RESOLVE(grad_input); KP_RESOLVE(grad_output); KP_RESOLVE(target);
      KP_RESOLVE(weight, true);
      KP_RESOLVE(total_weight, a.reduction != 1);
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(out, empty && a.reduction == 0);
    KP_RESOLVE(total_weight);
    if (!empty) { KP_RESOLVE(input); KP_RESOLVE(target); }
    KP_RESOLVE(weight, true);
    return KPDR_SUCCESS;
  });
}

kpdrError_t layer_norm(const kpdrLayerNormArgs* args, kpdrStream_t stream) {
  return launch("layer_norm", args, stream, &kp::layer_norm, [](Resolver& r, kpdrLayerNormArgs& a) {
    KP_RESOLVE(weight, true); KP_RESOLVE(bias, true);
    if (a.rows == 0 || a.cols == 0) {
      if (a.backward && a.cols > 0) {  // rows == 0: the parameter gradients are sums of nothing
        KP_RESOLVE(grad_weight, true); KP_RESOLVE(grad_bias, true);
        a.grad_input = nullptr;
        return KPDR_SUCCESS;
      }
      a.rows = a.cols = 0;
      a.grad_input = a.grad_weight = a.grad_bias = a.mean = a.rstd = nullptr;
      a.out = nullptr;
      a.backward = 1;  // nothing to write
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(x); KP_RESOLVE(mean, !a.backward); KP_RESOLVE(rstd, !a.backward);
    if (!a.backward) { KP_RESOLVE(out); return KPDR_SUCCESS; }
    KP_RESOLVE(grad_out); KP_RESOLVE(grad_input, true); KP_RESOLVE(grad_weight, true); KP_RESOLVE(grad_bias, true);
    return KPDR_SUCCESS;
  });
}

kpdrError_t max_pool2d(const kpdrMaxPool2dArgs* args, kpdrStream_t stream) {
  if (args != nullptr) {
    const kpdrMaxPool2dArgs& a = *args;
    if (kpdrError_t e = check_window("max_pool2d", a.direction, a.batch, a.channels, a.height, a.width, a.out_h,
                                     a.out_w, a.window)) {
      return e;
    }
  }
  return launch("max_pool2d", args, stream, &kp::max_pool2d, [](Resolver& r, kpdrMaxPool2dArgs& a) {
    const bool no_input = a.batch * a.channels * a.height * a.width == 0;
    const bool no_out = a.batch * a.channels * a.out_h * a.out_w == 0;
    if (a.direction == KPDR_MAX_POOL_FORWARD ? no_out : no_input) {
      a.batch = 0;  // nothing to write
      return KPDR_SUCCESS;
    }
    if (a.direction == KPDR_MAX_POOL_FORWARD && no_input) {
      return fail(KPDR_ERROR_INVALID_VALUE, "max_pool2d: an empty input has no maximum");
    }
    KP_RESOLVE(input);
    if (!no_out) { KP_RESOLVE(out); KP_RESOLVE(indices); }
    return KPDR_SUCCESS;
  });
}

kpdrError_t random_entry(const kpdrRandomArgs* args, kpdrStream_t stream) {
  return launch("random", args, stream, &kp::random_fill, [](Resolver& r, kpdrRandomArgs& a) {
    if (element_count(a.ndim, a.sizes) == 0) {
      a.ndim = 1;
      a.sizes[0] = 0;  // nothing to write
      a.out = nullptr;
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(out);
    return KPDR_SUCCESS;
  });
}

kpdrError_t sort_entry(const kpdrSortArgs* args, kpdrStream_t stream) {
  return launch("sort", args, stream, &kp::sort, [](Resolver& r, kpdrSortArgs& a) {
    int64_t written = a.k;  // output elements: the slices times k
    for (int d = 0; d < a.ndim; ++d) {
      if (d != a.dim) written *= a.sizes[d];
    }
    if (written == 0 || (a.values == nullptr && a.indices == nullptr)) {
      a.k = 0;  // nothing to write
      a.values = nullptr;
      a.indices = nullptr;
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(in); KP_RESOLVE(values, true); KP_RESOLVE(indices, true);
    return KPDR_SUCCESS;
  });
}

kpdrError_t scan(const kpdrScanArgs* args, kpdrStream_t stream) {
  return launch("scan", args, stream, &kp::scan, [](Resolver& r, kpdrScanArgs& a) {
    if (element_count(a.ndim, a.sizes) == 0) {
      a.ndim = 1;  // nothing to read or write
      a.dim = 0;
      a.sizes[0] = 0;
      return KPDR_SUCCESS;
    }
    KP_RESOLVE(in); KP_RESOLVE(out);
    return KPDR_SUCCESS;
  });
}

#undef KP_RESOLVE

}  // namespace

extern "C" KPDR_API kpdrError_t kpdrGetKernels(kpdrKernelTable* table) {
  if (table == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "kpdrGetKernels: table is NULL");
  kpdrKernelTable ours{};
  ours.struct_size = sizeof(kpdrKernelTable);
  ours.rms_norm = &rms_norm;
  ours.silu = &silu;
  ours.rope = &rope;
  ours.softmax = &softmax;
  ours.decode_attention = &decode_attention;
  ours.prefill_attention = &prefill_attention;
  ours.matmul_vec = &matmul_vec;
  ours.gemm = &gemm;
  ours.pointwise = &pointwise;
  ours.reduce = &reduce;
  ours.softmax_dim = &softmax_dim;
  ours.nll_loss = &nll_loss;
  ours.layer_norm = &layer_norm;
  ours.im2col = &im2col;
  ours.max_pool2d = &max_pool2d;
  ours.gather = &myasic::gather;    // device_indexing.cpp
  ours.scatter = &myasic::scatter;
  ours.random = &random_entry;
  ours.sort = &sort_entry;
  ours.scan = &scan;
  // Write only what both sides know (either may be built against a newer kpdr.h).
  const size_t size = table->struct_size < sizeof(ours) ? table->struct_size : sizeof(ours);
  std::memcpy(static_cast<void*>(table), &ours, size);
  table->struct_size = static_cast<uint32_t>(size);
  return KPDR_SUCCESS;
}

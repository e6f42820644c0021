// The simulator's gather and scatter entries: kp::gather / kp::scatter
// (csrc/kernels/cpu/indexing.cpp) enqueued on the stream, their device
// addresses resolved to the host memory backing them at launch (as
// device_kernels.cpp does for the other entries).
#include "device_indexing.h"

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "error_reporting.h"
#include "kernels/kernels.h"
#include "runtime.h"

namespace myasic {
namespace {

bool known_dtype(kpdrDtype d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_INT32; }

kpdrError_t check(const char* api, const kpdrIndexArgs& a, int64_t* count) {
  const std::string name(api);
  if (a.ndim < 0 || a.ndim > KPDR_MAX_DIMS) {
    return fail(KPDR_ERROR_INVALID_VALUE, name + ": ndim " + std::to_string(a.ndim) + " is outside 0.." +
                                              std::to_string(KPDR_MAX_DIMS));
  }
  if (a.num_indices < 1 || a.num_indices > KPDR_MAX_DIMS) {
    return fail(KPDR_ERROR_INVALID_VALUE, name + ": num_indices " + std::to_string(a.num_indices) +
                                              " is outside 1.." + std::to_string(KPDR_MAX_DIMS));
  }
  *count = 1;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.sizes[d] < 0) return fail(KPDR_ERROR_INVALID_VALUE, name + ": negative size");
    *count *= a.sizes[d];
  }
  if (!known_dtype(a.dtype)) return fail(KPDR_ERROR_INVALID_VALUE, name + ": unknown kpdrDtype");
  for (int k = 0; k < a.num_indices; ++k) {
    const kpdrIndexOperand& op = a.indices[k];
    if (op.dtype != KPDR_DTYPE_INT64 && op.dtype != KPDR_DTYPE_INT32) {
      return fail(KPDR_ERROR_INVALID_VALUE, name + ": indices[" + std::to_string(k) + "] must be INT64 or INT32");
    }
    if (op.size < 0) return fail(KPDR_ERROR_INVALID_VALUE, name + ": negative indexed size");
  }
  return KPDR_SUCCESS;
}

kpdrError_t launch(const char* api, const kpdrIndexArgs* args, kpdrStream_t handle, void (*kernel)(const kpdrIndexArgs&)) {
  try {
    Runtime* runtime = nullptr;
    if (kpdrError_t error = Runtime::acquire(&runtime)) return error;
    const std::string name(api);
    if (args == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, name + ": args is NULL");
    if (handle == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, name + ": stream is NULL");
    std::shared_ptr<Stream> stream = runtime->streams().find(handle);
    if (stream == nullptr) return fail(KPDR_ERROR_INVALID_HANDLE, name + ": unknown stream handle");
    int64_t count = 0;
    if (kpdrError_t error = check(api, *args, &count)) return error;
    if (count == 0) return KPDR_SUCCESS;
    kpdrIndexArgs a = *args;
    std::vector<std::shared_ptr<HostBacking>> backings;
    auto resolve = [&](auto** ptr, const std::string& field, bool optional) -> kpdrError_t {
      if (*ptr == nullptr) {
        return optional ? KPDR_SUCCESS : fail(KPDR_ERROR_INVALID_VALUE, name + ": " + field + " is NULL");
      }
      DeviceAllocationView view;
      if (!runtime->device_memory().find(*ptr, &view)) {
        return fail(KPDR_ERROR_INVALID_VALUE, name + ": " + field + " is not device memory of this runtime");
      }
      if (view.device != stream->device()) {
        return fail(KPDR_ERROR_INVALID_VALUE, name + ": " + field + " lives on device " +
                                                  std::to_string(view.device) + " but the stream belongs to device " +
                                                  std::to_string(stream->device()));
      }
      using P = std::remove_pointer_t<std::remove_reference_t<decltype(ptr)>>;
      *ptr = static_cast<P>(DeviceMemory::host_address(view, *ptr));
      backings.push_back(std::move(view.backing));
      return KPDR_SUCCESS;
    };
    if (kpdrError_t e = resolve(&a.dense, "dense", false)) return e;
    if (kpdrError_t e = resolve(&a.indexed, "indexed", false)) return e;
    if (kpdrError_t e = resolve(&a.error, "error", true)) return e;
    for (int k = 0; k < a.num_indices; ++k) {
      if (kpdrError_t e = resolve(&a.indices[k].data, "indices[" + std::to_string(k) + "].data", false)) return e;
    }
    auto keep = std::make_shared<std::vector<std::shared_ptr<HostBacking>>>(std::move(backings));
    return stream->enqueue([a, keep, kernel] { kernel(a); });
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string(api) + ": internal error: " + error.what());
  }
}

}  // namespace

kpdrError_t gather(const kpdrIndexArgs* args, kpdrStream_t stream) {
  return launch("gather", args, stream, &kp::gather);
}

kpdrError_t scatter(const kpdrIndexArgs* args, kpdrStream_t stream) {
  if (args != nullptr && args->accumulate && args->dtype == KPDR_DTYPE_BOOL) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, "scatter: accumulating into BOOL is not supported");
  }
  return launch("scatter", args, stream, &kp::scatter);
}

}  // namespace myasic

#include "error_reporting.h"

#include <utility>

namespace myasic {
namespace {

// Thread-local so concurrent callers never see each other's details.
thread_local std::string t_last_error_message;

}  // namespace

kpdrError_t fail(kpdrError_t code, std::string message) {
  t_last_error_message = std::move(message);
  return code;
}

const char* last_error_message() { return t_last_error_message.c_str(); }

const char* error_string(kpdrError_t code) {
  switch (code) {
    case KPDR_SUCCESS:
      return "KPDR_SUCCESS: no error";
    case KPDR_ERROR_INVALID_VALUE:
      return "KPDR_ERROR_INVALID_VALUE: an argument is invalid (null pointer, bad kind, "
             "pointer outside its allocation, malformed option)";
    case KPDR_ERROR_INVALID_DEVICE:
      return "KPDR_ERROR_INVALID_DEVICE: device index out of range";
    case KPDR_ERROR_OUT_OF_MEMORY:
      return "KPDR_ERROR_OUT_OF_MEMORY: out of memory (the device's capacity, or the host memory backing it)";
    case KPDR_ERROR_NOT_READY:
      return "KPDR_ERROR_NOT_READY: work submitted to the stream or event is still pending";
    case KPDR_ERROR_NOT_INITIALIZED:
      return "KPDR_ERROR_NOT_INITIALIZED: kpdrInit has not succeeded in this process";
    case KPDR_ERROR_ALREADY_INITIALIZED:
      return "KPDR_ERROR_ALREADY_INITIALIZED: kpdrInit was already called successfully";
    case KPDR_ERROR_INVALID_HANDLE:
      return "KPDR_ERROR_INVALID_HANDLE: unknown pointer, stream or event";
    case KPDR_ERROR_NOT_SUPPORTED:
      return "KPDR_ERROR_NOT_SUPPORTED: the runtime does not implement this (optional) operation";
    case KPDR_ERROR_UNKNOWN:
      return "KPDR_ERROR_UNKNOWN: internal runtime error";
  }
  return "unrecognised kpdrError_t value";
}

}  // namespace myasic

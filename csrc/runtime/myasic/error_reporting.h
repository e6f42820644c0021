// Per-thread error details for kpdrGetLastErrorMessage and the static
// name/description table behind kpdrGetErrorString.
#pragma once

#include <string>

#include "kpdr.h"

namespace myasic {

// Records `message` as the calling thread's last error detail and returns
// `code`, so failing paths read `return fail(KPDR_ERROR_..., "...")`.
kpdrError_t fail(kpdrError_t code, std::string message);

// The calling thread's most recent failure detail ("" if none yet). The
// pointer stays valid until this thread's next failing call.
const char* last_error_message();

// "KPDR_ERROR_OUT_OF_MEMORY: out of memory (...)"; never null.
const char* error_string(kpdrError_t code);

}  // namespace myasic

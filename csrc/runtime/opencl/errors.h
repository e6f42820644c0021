// Thread-local error details (kpdrGetLastErrorMessage), error strings and
// byte formatting for messages.
#pragma once

#include <cstddef>
#include <string>

#include "kpdr.h"

namespace kpdr_opencl {

// Stores `message` for the calling thread and returns `code`.
kpdrError_t fail(kpdrError_t code, std::string message);
const char* last_error_message();
const char* error_string(kpdrError_t code);
// "1.50 GiB (1610612736 bytes)".
std::string bytes_text(size_t bytes);

}  // namespace kpdr_opencl

// Human-readable byte counts for error messages.
#pragma once

#include <cstddef>
#include <string>

namespace myasic {

// Binary units with two decimals: 512 -> "512 B", 3<<29 -> "1.50 GiB".
std::string format_bytes(std::size_t bytes);

}  // namespace myasic

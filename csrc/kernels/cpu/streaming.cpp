// When the row kernels write their output with non-temporal (streaming)
// stores. An ordinary store first reads the line into the cache (a write
// allocate), so a kernel writing N bytes moves 2N; a streaming store moves N
// but leaves nothing in the cache for the next op to read. Streaming pays
// only when the output would not stay cached anyway: when it is larger than
// the last-level cache.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "kernels/cpu/dispatch.h"

namespace kp {
namespace cpu {
namespace {

// Bytes of the largest data cache, from sysfs (Linux); 0 when unknown.
int64_t sysfs_last_level_cache_bytes() {
  int64_t best = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::FILE* type = std::fopen((dir + "type").c_str(), "r");
    if (type == nullptr) break;
    char kind[32] = {0};
    const bool data = std::fscanf(type, "%31s", kind) == 1 && std::string(kind) != "Instruction";
    std::fclose(type);
    std::FILE* size = std::fopen((dir + "size").c_str(), "r");
    if (size == nullptr) continue;
    long long value = 0;
    char unit = 0;
    const int got = std::fscanf(size, "%lld%c", &value, &unit);
    std::fclose(size);
    if (!data || got < 1) continue;
    if (got == 2 && (unit == 'K' || unit == 'k')) value <<= 10;
    else if (got == 2 && (unit == 'M' || unit == 'm')) value <<= 20;
    if (value > best) best = value;
  }
  return best;
}

int64_t last_level_cache_bytes() {
  int64_t bytes = sysfs_last_level_cache_bytes();
#if defined(_SC_LEVEL3_CACHE_SIZE)
  // glibc's figure is only a fallback: on some virtual machines it is the
  // host's, 10x the cache this guest sees.
  if (bytes <= 0) bytes = static_cast<int64_t>(sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
  return bytes > 0 ? bytes : int64_t{32} << 20;
}

int64_t initial_threshold() {
  if (const char* env = std::getenv("KP_STREAMING_STORES_MIN_BYTES")) {
    char* end = nullptr;
    const long long value = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && value >= 0) return value;
    std::fprintf(stderr,
                 "kernel_pytorch: ignoring KP_STREAMING_STORES_MIN_BYTES=%s (expected a byte count >= 0)\n",
                 env);
  }
  return last_level_cache_bytes();
}

std::atomic<int64_t>& threshold() {
  static std::atomic<int64_t> value{initial_threshold()};
  return value;
}

}  // namespace

bool use_streaming_stores(int64_t output_bytes) {
  return output_bytes >= threshold().load(std::memory_order_relaxed);
}

}  // namespace cpu

int64_t streaming_stores_min_bytes() { return cpu::threshold().load(std::memory_order_relaxed); }

void set_streaming_stores_min_bytes(int64_t bytes) {
  cpu::threshold().store(bytes < 0 ? cpu::initial_threshold() : bytes, std::memory_order_relaxed);
}

}  // namespace kp

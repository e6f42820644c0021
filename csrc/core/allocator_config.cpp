#include "core/allocator_config.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kernel_pytorch {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr const char* kEnvVar = "MY_ASIC_ALLOC_CONF";
constexpr const char* kGenericEnvVar = "PYTORCH_ALLOC_CONF";
constexpr const char* kRunTime = "torch.my_asic.memory._set_allocator_settings";
// CUDA's lower bound for max_split_size_mb (c10's kLargeBuffer): the same
// string means the same thing on both devices.
constexpr size_t kMinSplitMiB = 20;

// The keys only my_asic reads; max_split_size_mb and garbage_collection_threshold
// are c10's device-generic keys (AcceleratorAllocatorConfig) and every
// accelerator's config already accepts them.
const std::vector<std::string>& own_keys() {
  static const std::vector<std::string> keys = {"growth_factor", "initial_pool_size_mb", "max_pool_size_mb"};
  return keys;
}
const std::vector<std::string>& valid_keys() {
  static const std::vector<std::string> keys = {
      "garbage_collection_threshold", "growth_factor", "initial_pool_size_mb", "max_pool_size_mb",
      "max_split_size_mb"};
  return keys;
}

std::string join_keys() {
  std::string out;
  for (const auto& k : valid_keys()) {
    out += (out.empty() ? "" : ", ") + k;
  }
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// "a:1, b:[x:1,y:2]" -> {("a","1"), ("b","[x:1,y:2]")}: commas inside brackets
// belong to the value (PYTORCH_ALLOC_CONF's roundup_power2_divisions uses lists).
std::vector<std::pair<std::string, std::string>> split_pairs(const std::string& conf, const std::string& where) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char ch : conf) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  items.push_back(cur);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& raw : items) {
    const std::string item = trim(raw);
    if (item.empty()) {
      continue; // "a:1," is harmless
    }
    const auto colon = item.find(':');
    TORCH_CHECK_VALUE(
        colon != std::string::npos, where, ": '", item, "' is not a key:value pair. Write settings as "
        "key:value separated by commas, e.g. max_pool_size_mb:2048,garbage_collection_threshold:0.8 "
        "(valid keys: ", join_keys(), ").");
    pairs.emplace_back(trim(item.substr(0, colon)), trim(item.substr(colon + 1)));
  }
  return pairs;
}

double parse_number(const std::string& where, const std::string& key, const std::string& value, const char* what) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  TORCH_CHECK_VALUE(
      !value.empty() && end != begin && *end == '\0' && errno == 0 && std::isfinite(v), where, ": ", key,
      " needs ", what, ", got '", value, "'.");
  return v;
}

size_t parse_mib(const std::string& where, const std::string& key, const std::string& value, size_t min_mib) {
  const double v = parse_number(where, key, value, "a whole number of MiB");
  TORCH_CHECK_VALUE(
      v >= 0 && v == std::floor(v), where, ": ", key, " needs a whole number of MiB >= ", min_mib, ", got '",
      value, "'.");
  TORCH_CHECK_VALUE(
      v >= static_cast<double>(min_mib), where, ": ", key, " must be >= ", min_mib, " MiB, got ", value, ".");
  TORCH_CHECK_VALUE(
      v <= static_cast<double>(kNoLimit / kMiB), where, ": ", key, " is too large: ", value, " MiB.");
  return static_cast<size_t>(v) * kMiB;
}

std::string origin_of(const std::string& where, const std::string& key, const std::string& value) {
  if (where == kEnvVar || where == kGenericEnvVar) {
    return where + "=" + key + ":" + value;
  }
  return where + "(\"" + key + ":" + value + "\")"; // a run-time call
}

// Applies `conf` to `s`. `strict`: an unknown key is an error (MY_ASIC_ALLOC_CONF,
// _set_allocator_settings); otherwise it belongs to another device (PYTORCH_ALLOC_CONF
// is shared by every accelerator) and is skipped.
void apply(AllocatorSettings& s, const std::string& conf, const std::string& where, bool strict) {
  for (const auto& [key, value] : split_pairs(conf, where)) {
    if (key == "max_pool_size_mb") {
      const size_t bytes = parse_mib(where, key, value, 0);
      s.max_pool_size = bytes == 0 ? kNoLimit : bytes; // 0: no cap
      s.max_pool_size_origin = bytes == 0 ? "" : origin_of(where, key, value);
    } else if (key == "initial_pool_size_mb") {
      s.initial_pool_size = parse_mib(where, key, value, 0);
    } else if (key == "growth_factor") {
      const double v = parse_number(where, key, value, "a number >= 1");
      TORCH_CHECK_VALUE(
          v >= 1.0 && v <= 16.0, where, ": growth_factor must be in [1, 16] (1: each new segment fits "
          "its request; 2: the pool doubles when it grows), got ", value, ".");
      s.growth_factor = v;
    } else if (key == "max_split_size_mb") {
      s.max_split_size = parse_mib(where, key, value, kMinSplitMiB);
    } else if (key == "garbage_collection_threshold") {
      const double v = parse_number(where, key, value, "a fraction in (0, 1)");
      TORCH_CHECK_VALUE(
          v > 0.0 && v < 1.0, where, ": garbage_collection_threshold must be a fraction in (0, 1) of the "
          "pool limit, got ", value, ".");
      s.garbage_collection_threshold = v;
      s.garbage_collection_threshold_origin = origin_of(where, key, value);
    } else if (strict) {
      std::string best;
      size_t best_d = std::numeric_limits<size_t>::max();
      for (const auto& k : valid_keys()) {
        const size_t d = edit_distance(key, k);
        if (d <= std::max<size_t>(3, k.size() / 3) && d < best_d) { // near misses only
          best_d = d;
          best = k;
        }
      }
      TORCH_CHECK_VALUE(
          false, where, ": unknown key '", key, "'", best.empty() ? std::string() : " (did you mean '" + best + "'?)",
          ". Valid keys: ", join_keys(), ".");
    }
  }
  if (s.max_pool_size != kNoLimit) {
    TORCH_CHECK_VALUE(
        s.initial_pool_size <= s.max_pool_size, where, ": initial_pool_size_mb (", s.initial_pool_size / kMiB,
        ") is above max_pool_size_mb (", s.max_pool_size / kMiB, "): lower the first or raise the second.");
  }
}

std::mutex g_mutex;
AllocatorSettings g_settings;   // guarded by g_mutex
bool g_env_read = false;        // guarded by g_mutex
std::atomic<uint64_t> g_version{0};

void apply_generic(const std::string& conf);

// torch._C._accelerator_setAllocatorSettings (the device-generic run-time call)
// reaches device configs through one hook. Ours is chained after the one already
// there (CUDA's, in a CUDA build) rather than replacing it, and registers only
// my_asic's own keys so that CUDA's parser accepts them beside its own.
void chain_generic_hook() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 12)
  using c10::CachingAllocator::AcceleratorAllocatorConfig;
  std::function<void(const std::string&)> previous = AcceleratorAllocatorConfig::getConfigParserHook();
  const auto& registered = AcceleratorAllocatorConfig::getKeys();
  std::unordered_set<std::string> keys;
  for (const auto& k : own_keys()) {
    if (!registered.count(k)) keys.insert(k);
  }
  AcceleratorAllocatorConfig::registerDeviceConfigParserHook(
      [previous](const std::string& env) {
        if (previous) previous(env);
        apply_generic(env);
      },
      keys);
#endif
}

// Caller holds g_mutex.
void read_env_locked() {
  if (g_env_read) {
    return;
  }
  AllocatorSettings s;
  if (const char* generic = std::getenv(kGenericEnvVar)) {
    apply(s, generic, kGenericEnvVar, /*strict=*/false);
  }
  if (const char* own = std::getenv(kEnvVar)) {
    apply(s, own, kEnvVar, /*strict=*/true); // read second: its keys win
  }
  s.version = 1;
  g_settings = s;
  g_env_read = true;
  g_version.store(1);
}

void apply_generic(const std::string& conf) {
  std::lock_guard<std::mutex> lock(g_mutex);
  read_env_locked();
  AllocatorSettings s = g_settings;
  apply(s, conf, "torch._C._accelerator_setAllocatorSettings", /*strict=*/false);
  s.version = g_settings.version + 1;
  g_settings = s;
  g_version.store(s.version);
}

// The hook slot became getConfigParserHook() in torch 2.12's line (before,
// a static member with a static-initialisation-order problem); older torch
// keeps PYTORCH_ALLOC_CONF (read above) and MY_ASIC_ALLOC_CONF only.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 12)
constexpr bool kCanChainHook = true;
#else
constexpr bool kCanChainHook = false;
#endif

const bool g_hook_chained = [] {
  if constexpr (!kCanChainHook) {
    return false;
  }
  try {
    chain_generic_hook();
  } catch (const std::exception& e) {
    // A key clash with another backend: PYTORCH_ALLOC_CONF still reaches
    // my_asic at start-up; only the generic run-time call misses it.
    TORCH_WARN("my_asic: could not join torch's allocator-settings hook: ", e.what());
  }
  return true;
}();

} // namespace

AllocatorSettings allocator_settings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  read_env_locked();
  return g_settings;
}

uint64_t allocator_settings_version() {
  return g_version.load(std::memory_order_acquire);
}

void set_allocator_settings(const std::string& conf) {
  std::lock_guard<std::mutex> lock(g_mutex);
  read_env_locked();
  AllocatorSettings s = g_settings;
  apply(s, conf, kRunTime, /*strict=*/true);
  s.version = g_settings.version + 1;
  g_settings = s;
  g_version.store(s.version, std::memory_order_release);
}

std::string allocator_settings_string() {
  const AllocatorSettings s = allocator_settings();
  std::ostringstream out;
  auto add = [&](const char* key, const auto& v) {
    out << (out.tellp() > 0 ? "," : "") << key << ":" << v;
  };
  if (s.max_pool_size != kNoLimit) add("max_pool_size_mb", s.max_pool_size / kMiB);
  if (s.initial_pool_size != 0) add("initial_pool_size_mb", s.initial_pool_size / kMiB);
  if (s.growth_factor != 1.0) add("growth_factor", s.growth_factor);
  if (s.max_split_size != kNoLimit) add("max_split_size_mb", s.max_split_size / kMiB);
  if (s.garbage_collection_threshold != 0.0) add("garbage_collection_threshold", s.garbage_collection_threshold);
  return out.str();
}

} // namespace kernel_pytorch

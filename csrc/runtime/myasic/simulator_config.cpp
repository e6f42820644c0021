#include "simulator_config.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "byte_format.h"
#include "error_reporting.h"
#include "host_memory.h"

namespace myasic {
namespace {

// c10::DeviceIndex is int8_t, so PyTorch cannot address more devices.
constexpr long long kMaxDeviceCount = 127;
// kpdrDeviceProperties::name is char[256] including the terminator.
constexpr std::size_t kMaxNameLength = 255;

struct Setting {
  std::string value;
  std::string origin;  // "option device_count" or "environment MY_ASIC_DEVICE_COUNT"
};

// Keys the reference runtime understands, with their environment variable.
const std::map<std::string, std::string>& known_keys() {
  static const std::map<std::string, std::string> keys = {
      {"device_count", "MY_ASIC_DEVICE_COUNT"},
      {"memory_mb", "MY_ASIC_MEMORY_MB"},
      {"names", "MY_ASIC_DEVICE_NAMES"},
      {"host_addressable", "MY_ASIC_HOST_ADDRESSABLE"},
      {"compute_units", "MY_ASIC_COMPUTE_UNITS"},
      {"copy_bandwidth_gbps", "MY_ASIC_COPY_BANDWIDTH_GBPS"},
      {"overcommit", "MY_ASIC_OVERCOMMIT"},
  };
  return keys;
}

// Reads MY_ASIC_<X>, else its name before the prefix rule (MYASIC_<X>, docs/environment.md)
// with a note on stderr once per name; sets *used to the name that was read.
const char* getenv_renamed(const std::string& name, std::string* used) {
  *used = name;
  if (const char* value = std::getenv(name.c_str())) return value;
  const std::string prefix = "MY_ASIC_";
  if (name.compare(0, prefix.size(), prefix) != 0) return nullptr;
  const std::string old_name = "MYASIC_" + name.substr(prefix.size());
  const char* value = std::getenv(old_name.c_str());
  if (value == nullptr) return nullptr;
  static std::mutex mutex;
  static std::set<std::string> noted;
  std::lock_guard<std::mutex> lock(mutex);
  if (noted.insert(old_name).second) {
    std::fprintf(stderr, "libmyasic: environment variable %s is deprecated; set %s instead\n",
                 old_name.c_str(), name.c_str());
  }
  *used = old_name;
  return value;
}

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto stop = text.find(separator, start);
    parts.push_back(text.substr(start, stop - start));
    if (stop == std::string::npos) return parts;
    start = stop + 1;
  }
}

// Strict decimal integer in [min, max]: no sign, no trailing garbage.
kpdrError_t parse_integer(const Setting& setting, long long min, long long max, long long* out) {
  const std::string& text = setting.value;
  const bool all_digits =
      !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long value = all_digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!all_digits || errno == ERANGE || value < static_cast<unsigned long long>(min) ||
      value > static_cast<unsigned long long>(max)) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                setting.origin + "='" + text + "' is invalid: expected a whole number from " +
                    std::to_string(min) + " to " + std::to_string(max));
  }
  *out = static_cast<long long>(value);
  return KPDR_SUCCESS;
}

kpdrError_t parse_bandwidth(const Setting& setting, double* out) {
  const char* begin = setting.value.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  if (setting.value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) ||
      value < 0.0) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                setting.origin + "='" + setting.value +
                    "' is invalid: expected a non-negative number of GB/s (0 = unthrottled)");
  }
  *out = value;
  return KPDR_SUCCESS;
}

// Collects the effective raw value of every known key: environment first,
// then the options string on top.
kpdrError_t collect_settings(const char* options, std::map<std::string, Setting>* settings) {
  for (const auto& [key, env_name] : known_keys()) {
    std::string used;
    if (const char* env_value = getenv_renamed(env_name, &used)) {
      (*settings)[key] = Setting{trim(env_value), "environment " + used};
    }
  }
  if (options == nullptr) return KPDR_SUCCESS;
  for (const std::string& raw_pair : split(options, ';')) {
    const std::string pair = trim(raw_pair);
    if (pair.empty()) continue;  // tolerate "a=1;" and ";;"
    const auto equals = pair.find('=');
    if (equals == std::string::npos) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrInit option '" + pair +
                      "' has no '=': write options as key=value pairs separated by ';'");
    }
    const std::string key = trim(pair.substr(0, equals));
    if (known_keys().count(key) == 0) continue;  // the ABI says unknown keys are ignored
    (*settings)[key] = Setting{trim(pair.substr(equals + 1)), "option " + key};
  }
  return KPDR_SUCCESS;
}

}  // namespace

std::size_t default_memory_bytes_per_device(int device_count, std::size_t host_bytes) {
  constexpr std::size_t kGiB = std::size_t{1} << 30, kMiB = std::size_t{1} << 20;
  const std::size_t share = host_bytes / static_cast<std::size_t>(device_count > 0 ? device_count : 1);
  if (share >= kMaxDefaultMemoryBytes) return kMaxDefaultMemoryBytes;
  if (share >= kGiB) return share / kGiB * kGiB;
  return share >= kMiB ? share / kMiB * kMiB : kMiB;
}

kpdrError_t parse_simulator_config(const char* options, SimulatorConfig* config) {
  std::map<std::string, Setting> settings;
  if (kpdrError_t error = collect_settings(options, &settings)) return error;

  SimulatorConfig parsed;
  long long number = 0;
  if (settings.count("device_count")) {
    if (kpdrError_t error = parse_integer(settings["device_count"], 1, kMaxDeviceCount, &number))
      return error;
    parsed.device_count = static_cast<int>(number);
  }
  if (settings.count("overcommit")) {
    if (kpdrError_t error = parse_integer(settings["overcommit"], 0, 1, &number)) return error;
    parsed.overcommit = number == 1;
  }
  const HostMemory host = host_memory();
  if (settings.count("memory_mb")) {
    const long long max_mib = static_cast<long long>(SIZE_MAX >> 21);  // keeps bytes*2 < SIZE_MAX
    if (kpdrError_t error = parse_integer(settings["memory_mb"], 1, max_mib, &number)) return error;
    parsed.memory_bytes_per_device = static_cast<std::size_t>(number) << 20;
    // Device memory is host memory: more than the host has fails later, at first
    // touch (the OOM killer) or at an mmap, so it takes an explicit overcommit.
    const std::size_t count = static_cast<std::size_t>(parsed.device_count);
    const bool too_big = parsed.memory_bytes_per_device > host.bytes / count;
    if (too_big && !parsed.overcommit) {
      const std::size_t fitting_mib = host.bytes / count >> 20;
      return fail(KPDR_ERROR_INVALID_VALUE,
                  settings["memory_mb"].origin + "='" + settings["memory_mb"].value + "' on " +
                      std::to_string(count) + " device(s) simulates " +
                      format_bytes(parsed.memory_bytes_per_device * count) +
                      ", more than this host's " + format_bytes(host.bytes) + " (" + host.source +
                      "); the simulator keeps device memory in host memory. Lower memory_mb to at "
                      "most " + std::to_string(fitting_mib) +
                      ", or allow overcommit explicitly with overcommit=1 (MY_ASIC_OVERCOMMIT=1): "
                      "allocations beyond the host's memory then fail as host out of memory");
    }
    if (too_big) {
      parsed.overcommit_notice =
          "libmyasic: overcommit=1: " + std::to_string(count) + " simulated device(s) of " +
          format_bytes(parsed.memory_bytes_per_device) + " hold " +
          format_bytes(parsed.memory_bytes_per_device * count) + ", more than this host's " +
          format_bytes(host.bytes) + " (" + host.source +
          "); allocations beyond the host's memory fail as host out of memory";
    }
  } else {
    parsed.memory_bytes_per_device = default_memory_bytes_per_device(parsed.device_count, host.bytes);
  }
  if (settings.count("host_addressable")) {
    if (kpdrError_t error = parse_integer(settings["host_addressable"], 0, 1, &number))
      return error;
    parsed.host_addressable = number == 1;
  }
  if (settings.count("compute_units")) {
    if (kpdrError_t error = parse_integer(settings["compute_units"], 1, INT32_MAX, &number))
      return error;
    parsed.compute_units = static_cast<int32_t>(number);
  }
  if (settings.count("copy_bandwidth_gbps")) {
    if (kpdrError_t error = parse_bandwidth(settings["copy_bandwidth_gbps"],
                                            &parsed.copy_bandwidth_gbps))
      return error;
  }
  if (settings.count("names")) {
    const Setting& names = settings["names"];
    for (const std::string& name : split(names.value, ',')) {
      const std::string cleaned = trim(name);
      if (cleaned.empty() || cleaned.size() > kMaxNameLength) {
        return fail(KPDR_ERROR_INVALID_VALUE,
                    names.origin + "='" + names.value + "' has a name that is empty or longer than " +
                        std::to_string(kMaxNameLength) + " characters");
      }
      parsed.device_names.push_back(cleaned);
    }
    if (static_cast<int>(parsed.device_names.size()) != parsed.device_count) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  names.origin + " lists " + std::to_string(parsed.device_names.size()) +
                      " names but device_count is " + std::to_string(parsed.device_count) +
                      ": give exactly one comma-separated name per device");
    }
  } else {
    for (int device = 0; device < parsed.device_count; ++device) {
      parsed.device_names.push_back("MyASIC-" + std::to_string(device));
    }
  }
  *config = std::move(parsed);
  return KPDR_SUCCESS;
}

}  // namespace myasic

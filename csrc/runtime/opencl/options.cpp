#include "options.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "errors.h"

namespace kpdr_opencl {
namespace {

// key -> environment variable.
const std::map<std::string, std::string>& keys() {
  static const std::map<std::string, std::string> k = {
      {"library", "MY_ASIC_OPENCL_LIBRARY"},
      {"platform", "MY_ASIC_OPENCL_PLATFORM"},
      {"device_type", "MY_ASIC_OPENCL_DEVICE_TYPE"},
      {"device", "MY_ASIC_OPENCL_DEVICE"},
      {"device_count", "MY_ASIC_OPENCL_DEVICE_COUNT"},
      {"names", "MY_ASIC_OPENCL_DEVICE_NAMES"},
      {"memory_mb", "MY_ASIC_OPENCL_MEMORY_MB"},
      {"kernels", "MY_ASIC_OPENCL_KERNELS"},
      {"build_options", "MY_ASIC_OPENCL_BUILD_OPTIONS"},
      {"cache_dir", "MY_ASIC_OPENCL_CACHE_DIR"},
      {"gemm", "MY_ASIC_OPENCL_GEMM"},
      {"profiling", "MY_ASIC_OPENCL_PROFILING"},
  };
  return k;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool parse_uint(const std::string& text, uint64_t max, uint64_t* value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || v > max) return false;
  *value = v;
  return true;
}

kpdrError_t apply(const std::string& key, const std::string& value, const std::string& origin,
                  Options* o) {
  auto bad = [&](const std::string& accepted) {
    return fail(KPDR_ERROR_INVALID_VALUE, "kpdrInit: " + origin + "='" + value +
                                              "' is invalid; expected " + accepted);
  };
  if (key == "library") {
    if (value.empty()) return bad("a library name or path such as libOpenCL.so.1");
    o->library = value;
  } else if (key == "platform") {
    o->platform = value;
  } else if (key == "device_type") {
    if (value != "gpu" && value != "cpu" && value != "accelerator" && value != "all" &&
        value != "default")
      return bad("gpu, cpu, accelerator, all or default");
    o->device_type = value;
  } else if (key == "device") {
    o->device = value;
  } else if (key == "device_count") {
    uint64_t v = 0;
    if (!parse_uint(value, 127, &v)) return bad("an integer 0..127 (0: every matching device)");
    o->device_count = static_cast<int>(v);
  } else if (key == "names") {
    o->names.clear();
    std::stringstream stream(value);
    std::string name;
    while (std::getline(stream, name, ',')) {
      if (name.empty() || name.size() > 255) return bad("comma separated names of 1..255 bytes");
      o->names.push_back(name);
    }
  } else if (key == "memory_mb") {
    uint64_t v = 0;
    if (!parse_uint(value, uint64_t(1) << 40, &v)) return bad("MiB as an integer (0: all)");
    o->memory_mb = v;
  } else if (key == "kernels") {
    if (value != "0" && value != "1") return bad("1 (OpenCL kernels) or 0 (CPU fallback)");
    o->kernels = value == "1";
  } else if (key == "build_options") {
    o->build_options = value;
  } else if (key == "cache_dir") {
    o->cache_dir = value;
  } else if (key == "gemm") {
    if (value != "auto" && value != "portable" && value != "mma" && value != "mma_emulated")
      return bad("auto, portable, mma (tensor cores through inline PTX, NVIDIA) or mma_emulated");
    o->gemm = value;
  } else if (key == "profiling") {
    if (value != "auto" && value != "always")
      return bad("auto (queues profile once a timing event is recorded on them) or always");
    o->profiling = value;
  }
  return KPDR_SUCCESS;
}

}  // namespace

kpdrError_t parse_options(const char* text, Options* options) {
  Options o;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg) {
    o.cache_dir = std::string(xdg) + "/kernel_pytorch/opencl";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home) {
    o.cache_dir = std::string(home) + "/.cache/kernel_pytorch/opencl";
  } else {
    o.cache_dir = "off";
  }
  for (const auto& [key, variable] : keys()) {
    if (const char* value = std::getenv(variable.c_str()); value != nullptr && *value) {
      if (kpdrError_t e = apply(key, trim(value), variable, &o)) return e;
    }
  }
  std::stringstream stream(text ? text : "");
  std::string pair;
  while (std::getline(stream, pair, ';')) {
    if (trim(pair).empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string::npos) {
      return fail(KPDR_ERROR_INVALID_VALUE, "kpdrInit: option '" + trim(pair) +
                                                "' has no '='; write key=value pairs separated by ';'");
    }
    const std::string key = trim(pair.substr(0, eq));
    if (keys().count(key) == 0) continue;  // other runtimes' keys are ignored, as the ABI says
    if (kpdrError_t e = apply(key, trim(pair.substr(eq + 1)), "option " + key, &o)) return e;
  }
  *options = std::move(o);
  return KPDR_SUCCESS;
}

}  // namespace kpdr_opencl

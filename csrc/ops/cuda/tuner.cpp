#include "ops/cuda/tuner.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace kernel_pytorch::ops::cuda {
namespace {

struct Stored {
  kp::cuda::LaunchConfig config;
  double us;
  std::string source;
};

std::mutex g_mutex;
std::map<std::string, Stored> g_entries;
bool g_loaded = false;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string device_name() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return "unknown GPU";
  }
  return prop.name;
}

void mkdirs(const std::string& dir) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    ::mkdir(dir.substr(0, pos).c_str(), 0755);
  }
}

// The file holds {"version": 2, "entries": {"<key>": {"threads": t, "split": s, "us": u}, ...}};
// an unreadable or foreign file is ignored (and rewritten on the next save).
// Version 2: rms_norm's split became blocks per multiprocessor (or minus rows
// per block), so version-1 choices would mean other launches; they are dropped.
std::map<std::string, Stored> read_file(const std::string& path) {
  std::map<std::string, Stored> out;
  std::ifstream in(path);
  if (!in) return out;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (!std::regex_search(text, std::regex("\"version\"\\s*:\\s*2\\b"))) return out;
  static const std::regex entry(
      "\"([^\"]+)\"\\s*:\\s*\\{\\s*\"threads\"\\s*:\\s*(-?\\d+)\\s*,\\s*\"split\"\\s*:\\s*(-?\\d+)\\s*,"
      "\\s*\"us\"\\s*:\\s*([-+0-9.eE]+)\\s*\\}");
  for (std::sregex_iterator it(text.begin(), text.end(), entry), end; it != end; ++it) {
    try {
      Stored s{{std::stoi((*it)[2]), std::stoi((*it)[3])}, std::stod((*it)[4]), "cache file"};
      out[(*it)[1]] = s;
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

// Merges with what other processes saved meanwhile, then replaces the file
// atomically (write a temporary file, rename it).
void save_locked() {
  const std::string path = tuning_cache_path();
  auto merged = read_file(path);
  for (const auto& [k, v] : g_entries) merged[k] = v;
  const auto slash = path.rfind('/');
  if (slash != std::string::npos) mkdirs(path.substr(0, slash));
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) {
      TORCH_WARN_ONCE("kernel_pytorch: cannot write the CUDA tuning cache ", path,
                      "; tuned launch configurations are kept for this process only "
                      "(set KP_TUNING_CACHE to a writable file)");
      return;
    }
    out << "{\n  \"version\": 2,\n  \"entries\": {";
    bool first = true;
    for (const auto& [k, v] : merged) {
      out << (first ? "\n" : ",\n") << "    \"" << json_escape(k) << "\": {\"threads\": " << v.config.threads
          << ", \"split\": " << v.config.split << ", \"us\": " << v.us << "}";
      first = false;
    }
    out << "\n  }\n}\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

void load_locked() {
  if (g_loaded) return;
  g_loaded = true;
  for (auto& [k, v] : read_file(tuning_cache_path())) g_entries.emplace(k, v);
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;  // unknown: behave as under capture
  }
  return status != cudaStreamCaptureStatusNone;
}

// Mean microseconds of one launch, or a negative number when it fails.
double time_config(const Launch& launch, kp::cuda::LaunchConfig cfg, cudaStream_t stream,
                   cudaEvent_t start, cudaEvent_t stop) {
  if (launch(cfg) != cudaSuccess) {  // warm-up, and a check that it launches at all
    cudaGetLastError();
    return -1;
  }
  // Round 0 sizes the repetitions; the best of three measured rounds is
  // kept (candidates a few percent apart, such as rms_norm's at 2048 x 4096,
  // swapped places between single rounds on the H200).
  float ms = 0.f;
  double best = -1.0;
  int reps = 1;
  for (int round = 0; round < 4; ++round) {
    if (cudaEventRecord(start, stream) != cudaSuccess) return -1;
    for (int i = 0; i < reps; ++i) {
      if (launch(cfg) != cudaSuccess) {
        cudaGetLastError();
        return -1;
      }
    }
    if (cudaEventRecord(stop, stream) != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    if (round == 0) {
      // Enough repetitions for about 0.5 ms of work (3..100).
      const double one = std::max(1e-4, static_cast<double>(ms));
      reps = static_cast<int>(std::min(100.0, std::max(3.0, 0.5 / one)));
    } else {
      const double us = 1000.0 * ms / reps;
      best = best < 0 ? us : std::min(best, us);
    }
  }
  return best;
}

}  // namespace

bool tuning_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("KP_TUNING");
    if (v == nullptr) return true;
    const std::string s = lower(v);
    return !(s == "off" || s == "0" || s == "false" || s == "no");
  }();
  return enabled;
}

std::string tuning_cache_path() {
  if (const char* p = std::getenv("KP_TUNING_CACHE"); p != nullptr && *p != '\0') return p;
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    base = x;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    base = std::string(h) + "/.cache";
  } else {
    base = "/tmp";
  }
  return base + "/kernel_pytorch/tuning.json";
}

kp::cuda::LaunchConfig choose_config(const char* op, const char* dtype, const std::string& shape,
                                     const kp::cuda::ConfigList& candidates, const Launch& launch,
                                     cudaStream_t stream) {
  const kp::cuda::LaunchConfig fallback = candidates.size > 0 ? candidates.items[0] : kp::cuda::LaunchConfig{};
  if (!tuning_enabled() || candidates.size <= 1) return fallback;
  const std::string key = std::string(op) + "|" + dtype + "|" + shape + "|" + device_name();
  std::lock_guard<std::mutex> lock(g_mutex);
  load_locked();
  if (auto it = g_entries.find(key); it != g_entries.end()) return it->second.config;
  if (capturing(stream)) return fallback;

  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    cudaGetLastError();
    if (start) cudaEventDestroy(start);
    return fallback;
  }
  kp::cuda::LaunchConfig best = fallback;
  double best_us = -1;
  for (int i = 0; i < candidates.size; ++i) {
    const double us = time_config(launch, candidates.items[i], stream, start, stop);
    // A candidate must beat the default by 2% to be preferred over it (noise).
    if (us > 0 && (best_us < 0 || us < best_us * (i == 0 ? 1.0 : 0.98))) {
      best = candidates.items[i];
      best_us = us;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (best_us < 0) return fallback;  // nothing could be timed: don't remember anything
  g_entries[key] = Stored{best, best_us, "tuned"};
  save_locked();
  return best;
}

std::vector<TuningEntry> tuning_entries() {
  std::lock_guard<std::mutex> lock(g_mutex);
  load_locked();
  std::vector<TuningEntry> out;
  for (const auto& [k, v] : g_entries) out.push_back({k, v.config, v.us, v.source});
  return out;
}

void clear_tuning() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_entries.clear();
  g_loaded = false;
}

}  // namespace kernel_pytorch::ops::cuda

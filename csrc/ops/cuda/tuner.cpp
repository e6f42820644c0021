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

// An on/off environment variable: off, 0, false or no (any case) turn it
// off, anything else on; unset or empty gives `when_unset`.
bool env_switch(const char* name, bool when_unset) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return when_unset;
  const std::string s = lower(v);
  return !(s == "off" || s == "0" || s == "false" || s == "no");
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

// Whether KP_TUNING_LOG asks for every candidate's time on stderr.
bool tuning_log() {
  static const bool on = env_switch("KP_TUNING_LOG", false);
  return on;
}

// Milliseconds between two events recorded on `s` around `work`, or a
// negative number when something fails.
template <typename Work>
double elapsed_ms(cudaStream_t s, cudaEvent_t start, cudaEvent_t stop, Work&& work) {
  float ms = 0.f;
  if (cudaEventRecord(start, s) != cudaSuccess || !work() || cudaEventRecord(stop, s) != cudaSuccess ||
      cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return ms;
}

// Mean microseconds of one launch in a run of back-to-back eager launches
// (best of three rounds), or a negative number when it fails.
double time_eager(const Launch& launch, kp::cuda::LaunchConfig cfg, cudaStream_t s, cudaEvent_t start,
                  cudaEvent_t stop, double one_ms) {
  // Enough repetitions for about 0.5 ms of work (3..100). The best of three
  // rounds is kept: candidates a few percent apart, such as rms_norm's at
  // 2048 x 4096, swapped places between single rounds on the H200.
  const int reps = static_cast<int>(std::min(100.0, std::max(3.0, 0.5 / std::max(1e-4, one_ms))));
  double best = -1.0;
  for (int round = 0; round < 3; ++round) {
    const double ms = elapsed_ms(s, start, stop, [&] {
      for (int i = 0; i < reps; ++i) {
        if (launch(cfg, s) != cudaSuccess) return false;
      }
      return true;
    });
    if (ms < 0) return -1;
    const double us = 1000.0 * ms / reps;
    best = best < 0 ? us : std::min(best, us);
  }
  return best;
}

// Mean microseconds of one launch in a run of back-to-back launches captured
// in a CUDA graph and replayed (best of five replays), as models replay their
// decoder steps: eager timing includes launch gaps that graphs remove, and at
// 2048 x 4096 rms_norm it ranked the candidates differently from graph
// replays (H200). -1 when the candidate fails; -2 when capturing fails for a
// reason of the stream rather than the candidate.
double time_graph(const Launch& launch, kp::cuda::LaunchConfig cfg, cudaStream_t s, cudaEvent_t start,
                  cudaEvent_t stop, double one_ms) {
  // About 1 ms of work per replay, 5..100 launches: with a few launches the
  // first one's ramp weighed enough to rank rms_norm's 8192 x 8192
  // candidates differently from 20-launch graphs (H200).
  const int reps = static_cast<int>(std::min(100.0, std::max(5.0, 1.0 / std::max(1e-4, one_ms))));
  // Thread-local mode: other threads of the process may go on allocating
  // (their calls are not the capture's concern) while this one captures.
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return -2;
  }
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < reps && err == cudaSuccess; ++i) err = launch(cfg, s);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  cudaGraphExec_t exec = nullptr;
  if (err != cudaSuccess || end != cudaSuccess || graph == nullptr ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    return -1;
  }
  cudaGraphDestroy(graph);
  double best = -1.0;
  for (int round = 0; round < 6; ++round) {  // round 0 warms the graph up
    const double ms = elapsed_ms(s, start, stop, [&] { return cudaGraphLaunch(exec, s) == cudaSuccess; });
    if (ms < 0) {
      best = -1;
      break;
    }
    if (round > 0) best = best < 0 ? 1000.0 * ms / reps : std::min(best, 1000.0 * ms / reps);
  }
  cudaGraphExecDestroy(exec);
  return best;
}

// Times every candidate on a private stream `s` (ordered after the caller's
// stream by the caller): graph replays where the launches can be captured,
// else eager launches. Returns the index of the fastest (a candidate must
// beat the first, the default, by 2%: noise), or -1.
int time_candidates(const char* key, const kp::cuda::ConfigList& candidates, const Launch& launch, cudaStream_t s,
                    double* best_us) {
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    cudaGetLastError();
    if (start) cudaEventDestroy(start);
    return -1;
  }
  bool graphs = true;
  int best = -1;
  *best_us = -1;
  for (int i = 0; i < candidates.size; ++i) {
    const auto cfg = candidates.items[i];
    // One eager launch: the check that it launches at all, any one-time
    // set-up (outside the capture), and the size of a run.
    const double one = elapsed_ms(s, start, stop, [&] { return launch(cfg, s) == cudaSuccess; });
    double us = -1;
    if (one >= 0) {
      if (graphs) {
        us = time_graph(launch, cfg, s, start, stop, one);
        // The default itself cannot be captured (or this stream cannot
        // capture): time all candidates eagerly, comparably.
        if (us == -2 || (us < 0 && i == 0)) {
          graphs = false;
          us = -1;
        }
      }
      if (!graphs) us = time_eager(launch, cfg, s, start, stop, one);
    }
    if (tuning_log()) {
      std::fprintf(stderr, "kernel_pytorch tuning %s: threads=%d split=%d: %.2f us (%s)\n", key, cfg.threads,
                   cfg.split, us, us < 0 ? "failed" : graphs ? "graph replay" : "eager");
    }
    if (us > 0 && (*best_us < 0 || us < *best_us * (i == 0 ? 1.0 : 0.98))) {
      best = i;
      *best_us = us;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace

bool tuning_enabled() {
  static const bool enabled = env_switch("KP_TUNING", true);
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

  // The candidates run on a private stream that first waits for the
  // caller's (whose inputs they read), and the caller's stream then waits
  // for them (they wrote its outputs): a private stream can be captured even
  // where the caller's is the legacy default stream.
  cudaStream_t side = nullptr;
  cudaEvent_t order = nullptr;
  if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&order, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(order, stream) != cudaSuccess || cudaStreamWaitEvent(side, order, 0) != cudaSuccess) {
    cudaGetLastError();
    if (order) cudaEventDestroy(order);
    if (side) cudaStreamDestroy(side);
    return fallback;
  }
  double best_us = -1;
  const int best_index = time_candidates(key.c_str(), candidates, launch, side, &best_us);
  if (cudaEventRecord(order, side) != cudaSuccess || cudaStreamWaitEvent(stream, order, 0) != cudaSuccess) {
    cudaGetLastError();
    cudaStreamSynchronize(side);
  }
  cudaEventDestroy(order);
  cudaStreamDestroy(side);
  const kp::cuda::LaunchConfig best = best_index >= 0 ? candidates.items[best_index] : fallback;
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

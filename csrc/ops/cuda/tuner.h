// The launch-configuration tuner of the CUDA kernels (the "hardware tuner"):
// for each (op, dtype, shape bucket, GPU name) it times the kernel's
// candidate configurations once (back-to-back launches replayed from a CUDA
// graph, as models run them; eager launches where capture fails), keeps the
// fastest in a JSON cache file and reuses it, in this process and the next
// ones.
//
//  - KP_TUNING=off (or 0/false/no) uses each kernel's fixed default.
//  - KP_TUNING_CACHE=<path> names the cache file; the default is
//    $XDG_CACHE_HOME/kernel_pytorch/tuning.json (~/.cache/... without it).
//  - Tuning never runs while the stream is being captured into a CUDA graph:
//    a cached choice is used, else the default (and nothing is recorded).
//  - Tuning a new key synchronises the host with the stream once (to read
//    the events); later calls only look the choice up.
//  - KP_TUNING_LOG=1 prints every candidate's time to stderr.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/kernels_cuda.h"

namespace kernel_pytorch::ops::cuda {

struct TuningEntry {
  std::string key;         // "op|dtype|shape bucket|GPU name"
  kp::cuda::LaunchConfig config;
  double microseconds;     // mean time of one launch of the chosen configuration
  std::string source;      // "tuned" (this process) or "cache file"
};

using Launch = std::function<cudaError_t(kp::cuda::LaunchConfig, cudaStream_t)>;

// The configuration to launch `op` with on `stream`. `launch(cfg, s)` runs the
// kernel with a candidate on stream s (a private stream ordered after
// `stream`); it is called several times while tuning, so it must only write
// the op's outputs, and it is captured into CUDA graphs (the first call for
// each candidate is eager), so after its first call it must not allocate or
// synchronise.
kp::cuda::LaunchConfig choose_config(const char* op, const char* dtype, const std::string& shape,
                                     const kp::cuda::ConfigList& candidates, const Launch& launch,
                                     cudaStream_t stream);

bool tuning_enabled();
std::string tuning_cache_path();
std::vector<TuningEntry> tuning_entries();
// Forgets the choices held in memory (the cache file stays).
void clear_tuning();

}  // namespace kernel_pytorch::ops::cuda

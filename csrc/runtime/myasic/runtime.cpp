#include "runtime.h"

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

#include "device_copy.h"
#include "error_reporting.h"

namespace myasic {
namespace {

// Never deleted: threads still inside an API call at exit keep a valid
// object; exit only stops the stream workers (see ExitDrain).
std::atomic<Runtime*> g_runtime{nullptr};
// Set in the child by a fork handler: the child has the parent's memory but
// none of its worker threads, and mutexes may be held by threads that no
// longer exist, so the child must not touch the runtime at all.
std::atomic<bool> g_in_forked_child{false};

void mark_forked_child() { g_in_forked_child.store(true, std::memory_order_relaxed); }

std::mutex& init_mutex() {
  static std::mutex* mutex = new std::mutex;  // leaked: usable during exit
  return *mutex;
}

// Joins the stream workers at process exit so none is mid-copy while the
// process tears down; skipped in a forked child, whose workers never existed.
struct ExitDrain {
  ~ExitDrain() {
    Runtime* runtime = g_runtime.load(std::memory_order_acquire);
    if (runtime != nullptr && !g_in_forked_child.load(std::memory_order_relaxed)) {
      runtime->shut_down_streams();
    }
  }
} g_exit_drain;

}  // namespace

Runtime::Runtime(SimulatorConfig config)
    : config_(std::move(config)),
      device_memory_(config_.device_count, config_.memory_bytes_per_device,
                     config_.host_addressable) {}

kpdrError_t Runtime::initialize(const char* options) {
  if (g_in_forked_child.load(std::memory_order_relaxed)) {
    return fail(KPDR_ERROR_ALREADY_INITIALIZED,
                "kpdrInit: this process was forked from one that had initialised the runtime; "
                "initialise devices only after fork, or use the 'spawn' start method");
  }
  std::lock_guard<std::mutex> lock(init_mutex());
  if (g_runtime.load(std::memory_order_acquire) != nullptr) {
    return fail(KPDR_ERROR_ALREADY_INITIALIZED,
                "kpdrInit: the runtime is already initialised; its configuration is fixed for "
                "the life of the process");
  }
  SimulatorConfig config;
  if (kpdrError_t error = parse_simulator_config(options, &config)) return error;
  if (pthread_atfork(nullptr, nullptr, mark_forked_child) != 0) {
    return fail(KPDR_ERROR_UNKNOWN, "kpdrInit: pthread_atfork failed to register the fork guard");
  }
  // Said once, where every user of an explicitly overcommitted simulator sees it.
  if (!config.overcommit_notice.empty()) std::fprintf(stderr, "%s\n", config.overcommit_notice.c_str());
  g_runtime.store(new Runtime(std::move(config)), std::memory_order_release);
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::acquire(Runtime** runtime) {
  if (g_in_forked_child.load(std::memory_order_relaxed)) {
    return fail(KPDR_ERROR_NOT_INITIALIZED,
                "the device runtime was initialised in the parent of this forked process and "
                "cannot be used here (its stream workers do not survive fork); use the 'spawn' "
                "start method for subprocesses that use the device");
  }
  *runtime = g_runtime.load(std::memory_order_acquire);
  if (*runtime == nullptr) {
    return fail(KPDR_ERROR_NOT_INITIALIZED, "call kpdrInit before any other kpdr function");
  }
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::check_device(int device) const {
  if (device >= 0 && device < config_.device_count) return KPDR_SUCCESS;
  return fail(KPDR_ERROR_INVALID_DEVICE,
              "device " + std::to_string(device) + " does not exist; valid devices are 0.." +
                  std::to_string(config_.device_count - 1));
}

void Runtime::synchronize_device(int device) {
  for (const auto& stream : streams_.snapshot()) {
    if (stream->device() == device) stream->synchronize();
  }
}

void Runtime::shut_down_streams() {
  skip_simulated_transfer_delays();
  for (const auto& stream : streams_.snapshot()) stream->shut_down();
}

}  // namespace myasic

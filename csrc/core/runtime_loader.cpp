#include "core/core.h"

#include "error_handler.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <limits>
#include <mutex>
#include <vector>

namespace kernel_pytorch {
namespace {

struct RuntimeState {
  std::mutex mutex;
  std::string library_path;
  std::string options;
  std::atomic<bool> initialized{false};
  RuntimeApi api{};
  std::vector<kpdrDeviceProperties> props;
  bool host_addressable = true;
  kpdrKernelTable kernels{};
  // Set when the checks after a successful kpdrInit fail: the runtime cannot
  // be initialised twice, so later calls repeat this instead of retrying.
  std::string failed_after_init;
};

RuntimeState& state() {
  // Leaked on purpose: device memory may be freed by static destructors of
  // other libraries after ours would have run.
  static RuntimeState* s = new RuntimeState();
  return *s;
}

std::atomic<bool> g_bad_fork{false};
thread_local c10::DeviceIndex t_current_device = 0;

void mark_bad_fork_in_child() {
  if (state().initialized.load()) {
    g_bad_fork.store(true);
  }
}

template <typename Fn>
void resolve(void* handle, const char* name, Fn& slot, const std::string& path) {
  void* sym = dlsym(handle, name);
  TORCH_CHECK(
      sym != nullptr,
      "my_asic: the device runtime '", path, "' does not export '", name,
      "'. A runtime must implement every function of the kpdr ABI "
      "(csrc/runtime/kpdr.h, version ", KPDR_ABI_VERSION, ").");
  slot = reinterpret_cast<Fn>(sym);
}

// The optional kernel table. A runtime without kpdrGetKernels, or whose
// kpdrGetKernels fails, has no kernels: its ops run through the CPU fallback.
kpdrKernelTable load_kernels(void* handle, const std::string& path) {
  kpdrKernelTable table{};
  using GetKernels = kpdrError_t (*)(kpdrKernelTable*);
  auto get = reinterpret_cast<GetKernels>(dlsym(handle, "kpdrGetKernels"));
  if (get == nullptr) return table;
  table.struct_size = sizeof(kpdrKernelTable);
  if (get(&table) != KPDR_SUCCESS) {
    TORCH_WARN("my_asic: kpdrGetKernels of the device runtime '", path,
               "' failed; kernel_pytorch.ops run through the CPU fallback on this device.");
    table = kpdrKernelTable{};
  }
  table.struct_size = sizeof(kpdrKernelTable);
  return table;
}
void check_devices_locked(RuntimeState& s, const RuntimeApi& api);

void load_locked(RuntimeState& s) {
  TORCH_CHECK(
      !s.library_path.empty(),
      "my_asic: no device runtime configured. Import kernel_pytorch (it points "
      "the extension at the bundled libmyasic.so) or call "
      "register_custom_device(...) with a PrivateUse1Config(backend_library=...).");
  // RTLD_LOCAL: two runtimes exporting the same kpdr* names must not clash.
  void* handle = dlopen(s.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    TORCH_CHECK(
        false, "my_asic: cannot load the device runtime '", s.library_path,
        "': ", why ? why : "unknown dlopen error",
        ". Check the path, or rebuild kernel_pytorch (pip install "
        "--no-build-isolation -e .) to produce libmyasic.so.");
  }
  RuntimeApi api{};
  const auto& p = s.library_path;
  resolve(handle, "kpdrGetAbiVersion", api.GetAbiVersion, p);
  uint32_t version = api.GetAbiVersion();
  TORCH_CHECK(
      version == KPDR_ABI_VERSION, "my_asic: the device runtime '", p,
      "' implements kpdr ABI version ", version, " but this kernel_pytorch needs version ",
      KPDR_ABI_VERSION, ". Rebuild the runtime against this csrc/runtime/kpdr.h.");
  resolve(handle, "kpdrInit", api.Init, p);
  resolve(handle, "kpdrGetErrorString", api.GetErrorString, p);
  resolve(handle, "kpdrGetLastErrorMessage", api.GetLastErrorMessage, p);
  resolve(handle, "kpdrGetDeviceCount", api.GetDeviceCount, p);
  resolve(handle, "kpdrGetDeviceProperties", api.GetDeviceProperties, p);
  resolve(handle, "kpdrDeviceSynchronize", api.DeviceSynchronize, p);
  resolve(handle, "kpdrMemGetInfo", api.MemGetInfo, p);
  resolve(handle, "kpdrMalloc", api.Malloc, p);
  resolve(handle, "kpdrFree", api.Free, p);
  resolve(handle, "kpdrMallocHost", api.MallocHost, p);
  resolve(handle, "kpdrFreeHost", api.FreeHost, p);
  resolve(handle, "kpdrPointerGetDevice", api.PointerGetDevice, p);
  resolve(handle, "kpdrMemcpyAsync", api.MemcpyAsync, p);
  resolve(handle, "kpdrStreamCreate", api.StreamCreate, p);
  resolve(handle, "kpdrStreamDestroy", api.StreamDestroy, p);
  resolve(handle, "kpdrStreamSynchronize", api.StreamSynchronize, p);
  resolve(handle, "kpdrStreamQuery", api.StreamQuery, p);
  resolve(handle, "kpdrStreamWaitEvent", api.StreamWaitEvent, p);
  resolve(handle, "kpdrEventCreate", api.EventCreate, p);
  resolve(handle, "kpdrEventDestroy", api.EventDestroy, p);
  resolve(handle, "kpdrEventRecord", api.EventRecord, p);
  resolve(handle, "kpdrEventQuery", api.EventQuery, p);
  resolve(handle, "kpdrEventSynchronize", api.EventSynchronize, p);
  resolve(handle, "kpdrEventElapsedTime", api.EventElapsedTime, p);

  kpdrError_t err = api.Init(s.options.c_str());
  if (err != KPDR_SUCCESS) {
    const char* detail = api.GetLastErrorMessage();
    TORCH_CHECK(
        false, "my_asic: the device runtime '", p, "' failed to initialise (",
        api.GetErrorString(err), "): ", detail ? detail : "", ". Options were '",
        s.options, "'.");
  }
  s.kernels = load_kernels(handle, p);
  try {
    check_devices_locked(s, api);
  } catch (const c10::Error& e) {
    s.failed_after_init = e.what_without_backtrace();
    throw;
  }
}

// After kpdrInit: device count and properties.
void check_devices_locked(RuntimeState& s, const RuntimeApi& api) {
  const auto& p = s.library_path;
  int count = 0;
  kpdrError_t err = api.GetDeviceCount(&count);
  // Device indices are c10::DeviceIndex (int8): 127 devices at most.
  constexpr int kMaxDevices = std::numeric_limits<c10::DeviceIndex>::max();
  TORCH_CHECK(
      err == KPDR_SUCCESS && count >= 0 && count <= kMaxDevices,
      "my_asic: the device runtime '", p, "' reported an invalid device count (",
      count, "); PyTorch supports 0 to ", kMaxDevices, " devices of a type.");
  std::vector<kpdrDeviceProperties> props(count);
  bool addressable = true;
  for (int i = 0; i < count; ++i) {
    props[i] = kpdrDeviceProperties{};
    err = api.GetDeviceProperties(i, &props[i]);
    TORCH_CHECK(err == KPDR_SUCCESS, "my_asic: kpdrGetDeviceProperties(", i, ") failed");
    props[i].name[sizeof(props[i].name) - 1] = '\0';
    if (i == 0) {
      addressable = props[i].host_addressable != 0;
    }
    TORCH_CHECK(
        (props[i].host_addressable != 0) == addressable,
        "my_asic: the runtime mixes host-addressable and non-addressable devices; "
        "kernel_pytorch needs all devices of one runtime to agree.");
  }
  s.api = api;
  s.props = std::move(props);
  s.host_addressable = addressable;
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] {
    pthread_atfork(nullptr, nullptr, &mark_bad_fork_in_child);
  });
  s.initialized.store(true, std::memory_order_release);
}

} // namespace

void set_runtime_config(const std::string& library_path, const std::string& options) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.initialized.load()) {
    TORCH_CHECK(
        library_path == s.library_path && options == s.options,
        "my_asic: the device runtime is already initialised with '", s.library_path,
        "' (options '", s.options, "'); it cannot be switched to '", library_path,
        "' (options '", options, "') in this process. Register custom devices "
        "before the first use of the device, or start a new process.");
    return;
  }
  s.library_path = library_path;
  s.options = options;
}

std::string runtime_library_path() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.library_path;
}

std::string runtime_options() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.options;
}

const RuntimeApi& rt() {
  auto& s = state();
  if (C10_LIKELY(s.initialized.load(std::memory_order_acquire))) {
    TORCH_CHECK(
        !g_bad_fork.load(std::memory_order_relaxed),
        "Cannot re-initialize my_asic in forked subprocess. To use my_asic with multiprocessing, you must use "
        "the 'spawn' start method (the parent process had initialised my_asic before the fork).");
    return s.api;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialized.load()) {
    TORCH_CHECK(
        s.failed_after_init.empty(), s.failed_after_init,
        " (The runtime was initialised before this failure and cannot be initialised again: "
        "fix the cause and start a new process.)");
    load_locked(s);
  }
  return s.api;
}

bool runtime_initialized() {
  return state().initialized.load();
}

bool in_bad_fork() {
  return g_bad_fork.load();
}

c10::DeviceIndex device_count_noexcept() noexcept {
  try {
    rt();
    return static_cast<c10::DeviceIndex>(state().props.size());
  } catch (...) {
    return 0;
  }
}

c10::DeviceIndex device_count() {
  rt();
  return static_cast<c10::DeviceIndex>(state().props.size());
}

void check_device_index(c10::DeviceIndex index) {
  auto count = device_count();
  // RuntimeError, as CUDA's "invalid device ordinal" and OpenReg's check.
  TORCH_CHECK(
      index >= 0 && index < count, "my_asic: invalid device index ", static_cast<int>(index),
      ": this process has ", static_cast<int>(count), " my_asic device(s) (valid indices 0..",
      static_cast<int>(count) - 1, "). Check torch.my_asic.device_count().");
}

c10::DeviceIndex current_device() {
  return t_current_device;
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  t_current_device = index;
}

const kpdrDeviceProperties& device_properties(c10::DeviceIndex index) {
  check_device_index(index);
  return state().props[index];
}

bool host_addressable() {
  rt();
  return state().host_addressable;
}

const kpdrKernelTable& runtime_kernels() {
  rt();
  return state().kernels;
}

std::string format_bytes(size_t bytes) {
  char buf[64];
  const double gib = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", gib);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  }
  return buf;
}

void raise_runtime_error(kpdrError_t err, const char* call, const char* file, int line) {
  const auto& api = state().api;
  const char* name = api.GetErrorString ? api.GetErrorString(err) : "unknown error";
  const char* detail = api.GetLastErrorMessage ? api.GetLastErrorMessage() : "";
  std::string msg = std::string("my_asic runtime error (") + name + ") in " + call;
  if (detail && *detail) {
    msg += ": ";
    msg += detail;
  }
  // The error handler sees the error first (error_handler.h); it cannot
  // retry a runtime call, only observe it and free memory.
  DeviceErrorInfo info;
  info.device = t_current_device;
  info.op = call;
  info.message = msg;
  const std::string c(call);
  info.kind = err == KPDR_ERROR_OUT_OF_MEMORY          ? "out_of_memory"
      : c.rfind("kernel ", 0) == 0                      ? "kernel"
      : c.find("Memcpy") != std::string::npos           ? "copy"
                                                        : "runtime";
  notify_device_error(info);
  if (err == KPDR_ERROR_OUT_OF_MEMORY) {
    throw c10::OutOfMemoryError(c10::SourceLocation{__func__, file, static_cast<uint32_t>(line)}, msg);
  }
  // An invalid device is a RuntimeError, as on CUDA ("invalid device ordinal").
  throw c10::Error(c10::SourceLocation{__func__, file, static_cast<uint32_t>(line)}, msg);
}

} // namespace kernel_pytorch

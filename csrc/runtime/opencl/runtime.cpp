#include "runtime.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>

#include "errors.h"
#include "kernel_cache.h"

namespace kpdr_opencl {
namespace {

std::mutex g_init_mutex;
std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<bool> g_forked_child{false};

void mark_forked_child() { g_forked_child.store(true); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool contains_nocase(const std::string& haystack, const std::string& needle) {
  return needle.empty() || lower(haystack).find(lower(needle)) != std::string::npos;
}

std::string platform_text(const ClApi& cl, cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  if (cl.GetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  if (cl.GetPlatformInfo(platform, what, size, text.data(), nullptr) != CL_SUCCESS) return "";
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return text;
}

template <typename T>
T device_value(const ClApi& cl, cl_device_id device, cl_device_info what) {
  T value{};
  cl.GetDeviceInfo(device, what, sizeof(value), &value, nullptr);
  return value;
}

const char* type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

}  // namespace

std::string device_text(const ClApi& cl, cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (cl.GetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  if (cl.GetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return "";
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return trim(text);
}

kpdrError_t Runtime::initialize(const char* options) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_forked_child.load()) {
    return fail(KPDR_ERROR_NOT_INITIALIZED,
                "kpdrInit: this is a forked child of a process that loaded the OpenCL runtime; "
                "OpenCL drivers do not survive fork: use the 'spawn' start method");
  }
  if (g_runtime.load() != nullptr) {
    return fail(KPDR_ERROR_ALREADY_INITIALIZED,
                "kpdrInit: the OpenCL runtime is already initialised in this process; the first "
                "configuration stays");
  }
  auto* runtime = new Runtime();
  if (kpdrError_t error = runtime->start(options)) {
    // Nothing of a failed start is kept (its OpenCL objects are released by
    // the destructors below), so kpdrInit may be retried with other options.
    delete runtime;
    return error;
  }
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, &mark_forked_child); });
  g_runtime.store(runtime, std::memory_order_release);
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::acquire(Runtime** runtime) {
  Runtime* current = g_runtime.load(std::memory_order_acquire);
  if (current == nullptr) {
    return fail(KPDR_ERROR_NOT_INITIALIZED, "the OpenCL runtime is not initialised: call kpdrInit first");
  }
  if (g_forked_child.load(std::memory_order_relaxed)) {
    return fail(KPDR_ERROR_NOT_INITIALIZED,
                "the OpenCL runtime was initialised in the parent process and cannot be used in a "
                "forked child; use the 'spawn' start method");
  }
  *runtime = current;
  return KPDR_SUCCESS;
}

Runtime::~Runtime() {
  kernels_.reset();
  pinned_.reset();
  memory_.reset();
  if (internal_queue_ != nullptr) cl_->ReleaseCommandQueue(internal_queue_);
  if (context_ != nullptr) cl_->ReleaseContext(context_);
}

Runtime* Runtime::get_if_initialized() { return g_runtime.load(std::memory_order_acquire); }

kpdrError_t Runtime::check_device(int device) const {
  if (device < 0 || device >= device_count()) {
    return fail(KPDR_ERROR_INVALID_DEVICE,
                "device " + std::to_string(device) + " does not exist: the OpenCL runtime has " +
                    std::to_string(device_count()) + " device(s), numbered 0.." +
                    std::to_string(device_count() - 1));
  }
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::select_devices(std::vector<cl_device_id>* chosen, cl_platform_id* platform) {
  cl_uint count = 0;
  cl_int status = cl_->GetPlatformIDs(0, nullptr, &count);
  if (status == CL_PLATFORM_NOT_FOUND_KHR || (status == CL_SUCCESS && count == 0)) {
    return fail(KPDR_ERROR_INVALID_DEVICE,
                "kpdrInit: the OpenCL loader '" + options_.library +
                    "' found no platform (no driver registered in /etc/OpenCL/vendors). Install "
                    "an OpenCL driver (apt-get install pocl-opencl-icd for the CPU, or your GPU "
                    "vendor's), or name an installed driver library with "
                    "OCL_ICD_FILENAMES=/path/to/libnvidia-opencl.so.1 (or the runtime option "
                    "library=)");
  }
  if (status != CL_SUCCESS) {
    return fail(KPDR_ERROR_UNKNOWN, "kpdrInit: clGetPlatformIDs failed with " + cl_error_name(status));
  }
  std::vector<cl_platform_id> platforms(count);
  cl_->GetPlatformIDs(count, platforms.data(), nullptr);

  const std::string& type = options_.device_type;
  std::vector<cl_device_type> passes;  // "default": GPUs of any platform first, then anything
  if (type == "gpu") passes = {CL_DEVICE_TYPE_GPU};
  else if (type == "cpu") passes = {CL_DEVICE_TYPE_CPU};
  else if (type == "accelerator") passes = {CL_DEVICE_TYPE_ACCELERATOR};
  else if (type == "all") passes = {CL_DEVICE_TYPE_ALL};
  else passes = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL};

  std::string inventory;
  for (cl_device_type wanted : passes) {
    for (cl_platform_id p : platforms) {
      const std::string pname = platform_text(*cl_, p, CL_PLATFORM_NAME);
      const std::string pvendor = platform_text(*cl_, p, CL_PLATFORM_VENDOR);
      cl_uint n = 0;
      if (cl_->GetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
      std::vector<cl_device_id> ids(n);
      cl_->GetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr);
      const bool platform_ok =
          contains_nocase(pname, options_.platform) || contains_nocase(pvendor, options_.platform);
      std::vector<cl_device_id> matching;
      for (cl_device_id id : ids) {
        const auto dtype = device_value<cl_device_type>(*cl_, id, CL_DEVICE_TYPE);
        const std::string dname = device_text(*cl_, id, CL_DEVICE_NAME);
        if (wanted == passes.back()) {
          inventory += "\n  platform '" + pname + "': " + dname + " (" + type_name(dtype) + ")";
        }
        if (platform_ok && (dtype & wanted) && contains_nocase(dname, options_.device)) {
          matching.push_back(id);
        }
      }
      if (!matching.empty() && chosen->empty()) {
        *chosen = std::move(matching);
        *platform = p;
      }
    }
    if (!chosen->empty()) return KPDR_SUCCESS;
  }
  return fail(KPDR_ERROR_INVALID_DEVICE,
              "kpdrInit: no OpenCL device matches platform='" + options_.platform +
                  "' device_type=" + type + " device='" + options_.device +
                  "'. The OpenCL devices here are:" +
                  (inventory.empty() ? std::string("\n  (none)") : inventory) +
                  "\nChange the filters: runtime options platform=, device_type=, device= (in "
                  "MY_ASIC_RUNTIME_OPTIONS), or MY_ASIC_OPENCL_PLATFORM, MY_ASIC_OPENCL_DEVICE_TYPE, "
                  "MY_ASIC_OPENCL_DEVICE; `clinfo -l` lists the devices too");
}

kpdrError_t Runtime::describe_device(int index, cl_device_id id) {
  Device& d = devices_[index];
  d.id = id;
  d.cl_name = device_text(*cl_, id, CL_DEVICE_NAME);
  d.vendor = device_text(*cl_, id, CL_DEVICE_VENDOR);
  d.driver_version = device_text(*cl_, id, CL_DRIVER_VERSION);
  d.device_version = device_text(*cl_, id, CL_DEVICE_VERSION);
  d.c_version = device_text(*cl_, id, CL_DEVICE_OPENCL_C_VERSION);
  d.extensions = device_text(*cl_, id, CL_DEVICE_EXTENSIONS);
  d.global_memory = device_value<cl_ulong>(*cl_, id, CL_DEVICE_GLOBAL_MEM_SIZE);
  d.max_alloc = device_value<cl_ulong>(*cl_, id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  d.compute_units = static_cast<int>(device_value<cl_uint>(*cl_, id, CL_DEVICE_MAX_COMPUTE_UNITS));
  d.max_work_group = device_value<size_t>(*cl_, id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  d.capacity = d.global_memory;
  if (options_.memory_mb != 0) {
    const uint64_t cap = options_.memory_mb << 20;
    if (cap > d.global_memory) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrInit: memory_mb=" + std::to_string(options_.memory_mb) + " exceeds device " +
                      std::to_string(index) + " (" + d.cl_name + "), which has " +
                      bytes_text(d.global_memory) + "; give at most " +
                      std::to_string(d.global_memory >> 20) + " or leave it unset");
    }
    d.capacity = cap;
  }
  d.max_alloc = std::min(d.max_alloc, d.capacity);
  d.name = options_.names.empty() ? d.cl_name + " (OpenCL)" : options_.names[index];
  if (d.name.size() > 255) d.name.resize(255);
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::start(const char* options) {
  if (kpdrError_t error = parse_options(options, &options_)) return error;
  std::string why;
  cl_ = load_opencl(options_.library, &why);
  if (cl_ == nullptr) return fail(KPDR_ERROR_NOT_SUPPORTED, "kpdrInit: " + why);
  std::vector<cl_device_id> ids;
  cl_platform_id platform = nullptr;
  if (kpdrError_t error = select_devices(&ids, &platform)) return error;
  if (options_.device_count != 0) {
    if (options_.device_count > static_cast<int>(ids.size())) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrInit: device_count=" + std::to_string(options_.device_count) + " but only " +
                      std::to_string(ids.size()) +
                      " OpenCL device(s) match the filters; ask for fewer or leave it unset");
    }
    ids.resize(options_.device_count);
  }
  if (ids.size() > 127) ids.resize(127);  // PyTorch device indices are int8
  if (!options_.names.empty() && options_.names.size() != ids.size()) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                "kpdrInit: names= gives " + std::to_string(options_.names.size()) + " name(s) for " +
                    std::to_string(ids.size()) + " device(s); give exactly one per device");
  }
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                              reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int status = CL_SUCCESS;
  context_ = cl_->CreateContext(properties, static_cast<cl_uint>(ids.size()), ids.data(), nullptr,
                                nullptr, &status);
  if (context_ == nullptr || status != CL_SUCCESS) {
    return fail(KPDR_ERROR_UNKNOWN, "kpdrInit: clCreateContext failed with " + cl_error_name(status) +
                                        "; the OpenCL driver could not open the device(s)");
  }
  devices_.resize(ids.size());
  std::vector<DeviceLimits> limits;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (kpdrError_t error = describe_device(static_cast<int>(i), ids[i])) return error;
    limits.push_back(DeviceLimits{devices_[i].capacity, devices_[i].max_alloc, devices_[i].name});
  }
  // (the runtime's own blocking work is never timed: no profiling)
  if (kpdrError_t error = create_queue(cl_, context_, ids[0], false, &internal_queue_)) return error;
  memory_ = std::make_unique<DeviceMemory>(cl_, context_, std::move(limits));
  pinned_ = std::make_unique<PinnedHostMemory>(cl_, context_, internal_queue_);
  kernels_ = std::make_unique<KernelCache>(*this);
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::create_stream(int device, kpdrStream_t* stream) {
  cl_command_queue queue = nullptr;
  const bool profiling = options_.profiling == "always";
  if (kpdrError_t error = create_queue(cl_, context_, devices_[device].id, profiling, &queue)) return error;
  *stream = streams_.add(std::make_shared<Stream>(cl_, context_, device, devices_[device].id, profiling, queue));
  return KPDR_SUCCESS;
}

kpdrError_t Runtime::synchronize_device(int device) {
  for (const auto& stream : streams_.snapshot()) {
    if (stream->device() != device) continue;
    if (kpdrError_t error = stream->synchronize()) return error;
  }
  return KPDR_SUCCESS;
}

}  // namespace kpdr_opencl

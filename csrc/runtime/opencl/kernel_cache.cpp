#include "kernel_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "errors.h"
#include "kernel_source.h"
#include "runtime.h"

namespace kpdr_opencl {
namespace {

uint64_t fnv1a(const std::string& text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// "-cl-std=CL3.0" from "OpenCL C 3.0 ..." (1.2 where the device says less or nothing).
std::string cl_std(const std::string& c_version) {
  int major = 1, minor = 2;
  if (std::sscanf(c_version.c_str(), "OpenCL C %d.%d", &major, &minor) != 2 || major < 1 ||
      (major == 1 && minor < 2)) {
    major = 1;
    minor = 2;
  }
  return "-cl-std=CL" + std::to_string(major) + "." + std::to_string(minor);
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
  }
}

bool read_file(const std::string& path, std::string* data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *data = buffer.str();
  return !data->empty();
}

// Written to a temporary name and renamed: concurrent processes never read half a file.
void write_file(const std::string& path, const std::string& data) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return;
  }
  std::rename(temporary.c_str(), path.c_str());
}

std::string build_log(const ClApi& cl, cl_program program, cl_device_id device) {
  size_t size = 0;
  cl.GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  if (size > 0) cl.GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  if (log.size() > 2000) log = log.substr(0, 2000) + "\n...";
  return log;
}

const char* dtype_name(kpdrDtype dtype) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: return "float32";
    case KPDR_DTYPE_FLOAT16: return "float16";
    case KPDR_DTYPE_BFLOAT16: return "bfloat16";
    case KPDR_DTYPE_BOOL: return "bool";
  }
  return "?";
}

}  // namespace

KernelCache::~KernelCache() {
  const ClApi& cl = runtime_.cl();
  auto release = [&](Program& program) {
    for (auto& [name, kernel] : program.kernels) cl.ReleaseKernel(kernel->kernel);
    if (program.program != nullptr) cl.ReleaseProgram(program.program);
  };
  for (auto& [key, program] : programs_) release(*program);
  for (auto& [key, program] : generated_) release(*program);
}

kpdrError_t KernelCache::build(int device_index, kpdrDtype dtype, Program* program) {
  const std::string defines = " -DKP_DTYPE=" + std::to_string(static_cast<int>(dtype));
  // NVIDIA's OpenCL compiler takes inline PTX: warp shuffles (KP_SHFL) let
  // attention sum across work-items without barriers (work-groups of whole
  // warps: KP_WG is a power of two, 32 or more). A driver that refuses them
  // gets the portable program.
  const Device& device = runtime_.device(device_index);
  if (device.vendor.find("NVIDIA") != std::string::npos && device.max_work_group >= 32 &&
      build_source(device_index, kKernelSource, defines + " -DKP_SHFL=1", dtype_name(dtype), program) ==
          KPDR_SUCCESS) {
    program->shuffles = true;
    return KPDR_SUCCESS;
  }
  return build_source(device_index, kKernelSource, defines, dtype_name(dtype), program);
}

kpdrError_t KernelCache::build_source(int device_index, const std::string& source, const std::string& defines,
                                      const std::string& what, Program* program) {
  const ClApi& cl = runtime_.cl();
  const Device& device = runtime_.device(device_index);
  size_t wg = 1;
  while (wg * 2 <= 256 && wg * 2 <= device.max_work_group) wg *= 2;
  const std::string options = cl_std(device.c_version) + defines + " -DKP_WG=" +
                              std::to_string(wg) + (runtime_.options().build_options.empty()
                                                        ? std::string()
                                                        : " " + runtime_.options().build_options);
  const uint64_t key = fnv1a(source, fnv1a(options, fnv1a(device.cl_name + "|" + device.vendor + "|" +
                                                           device.driver_version + "|" +
                                                           device.device_version)));
  char key_text[17];
  std::snprintf(key_text, sizeof(key_text), "%016llx", static_cast<unsigned long long>(key));
  const std::string& cache_dir = runtime_.options().cache_dir;
  const bool caching = !cache_dir.empty() && cache_dir != "off";
  const std::string cache_path = caching ? cache_dir + "/" + key_text + ".bin" : "";
  program->work_group = wg;

  cl_int status = CL_SUCCESS;
  std::string binary;
  if (caching && read_file(cache_path, &binary)) {
    const size_t size = binary.size();
    const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
    cl_int binary_status = CL_SUCCESS;
    cl_program cached = cl.CreateProgramWithBinary(runtime_.context(), 1, &device.id, &size, &bytes,
                                                   &binary_status, &status);
    if (cached != nullptr && status == CL_SUCCESS && binary_status == CL_SUCCESS &&
        cl.BuildProgram(cached, 1, &device.id, options.c_str(), nullptr, nullptr) == CL_SUCCESS) {
      program->program = cached;
      return KPDR_SUCCESS;
    }
    if (cached != nullptr) cl.ReleaseProgram(cached);  // stale or foreign: rebuild from source
  }
  const char* text = source.c_str();
  cl_program built = cl.CreateProgramWithSource(runtime_.context(), 1, &text, nullptr, &status);
  if (built == nullptr || status != CL_SUCCESS) {
    return fail(KPDR_ERROR_UNKNOWN, "clCreateProgramWithSource failed with " + cl_error_name(status));
  }
  status = cl.BuildProgram(built, 1, &device.id, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    const std::string log = build_log(cl, built, device.id);
    cl.ReleaseProgram(built);
    return fail(KPDR_ERROR_UNKNOWN,
                "building the OpenCL kernels for " + what + " on " +
                    device.name + " failed with " + cl_error_name(status) + " (options '" +
                    options + "')" + (log.empty() ? std::string() : ":\n" + log) +
                    "\nFix or remove the runtime option build_options= "
                    "(MY_ASIC_OPENCL_BUILD_OPTIONS), update the OpenCL driver, or set kernels=0 "
                    "(MY_ASIC_OPENCL_KERNELS=0) to run these ops through the CPU fallback");
  }
  program->program = built;
  if (caching) {
    size_t size = 0;
    if (cl.GetProgramInfo(built, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) == CL_SUCCESS &&
        size > 0) {
      std::string data(size, '\0');
      unsigned char* out = reinterpret_cast<unsigned char*>(data.data());
      if (cl.GetProgramInfo(built, CL_PROGRAM_BINARIES, sizeof(out), &out, nullptr) == CL_SUCCESS) {
        make_dirs(cache_dir);
        write_file(cache_path, data);  // best effort: a read-only home just rebuilds next time
      }
    }
  }
  return KPDR_SUCCESS;
}

kpdrError_t KernelCache::get(int device, kpdrDtype dtype, const char* name, Kernel** kernel) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = programs_[{device, static_cast<int>(dtype)}];
  if (slot == nullptr) {
    slot = std::make_unique<Program>();
    slot->code = build(device, dtype, slot.get());
    if (slot->code != KPDR_SUCCESS) slot->error = last_error_message();
  }
  return kernel_of(slot.get(), name, kernel);
}

kpdrError_t KernelCache::get_generated(int device, const std::string& source, const std::string& what,
                                       const char* name, Kernel** kernel) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = generated_[{device, source}];
  if (slot == nullptr) {
    slot = std::make_unique<Program>();
    slot->code = build_source(device, source, "", what, slot.get());
    if (slot->code != KPDR_SUCCESS) slot->error = last_error_message();
  }
  return kernel_of(slot.get(), name, kernel);
}

// Under mutex_.
kpdrError_t KernelCache::kernel_of(Program* program, const char* name, Kernel** kernel) {
  if (program->code != KPDR_SUCCESS) return fail(program->code, program->error);
  const auto found = program->kernels.find(std::string_view(name));
  if (found != program->kernels.end()) {
    *kernel = found->second.get();
    return KPDR_SUCCESS;
  }
  auto& entry = program->kernels[name];
  if (entry == nullptr) {
    cl_int status = CL_SUCCESS;
    cl_kernel created = runtime_.cl().CreateKernel(program->program, name, &status);
    if (created == nullptr || status != CL_SUCCESS) {
      program->kernels.erase(name);
      return fail(KPDR_ERROR_UNKNOWN, std::string("clCreateKernel(") + name + ") failed with " +
                                          cl_error_name(status));
    }
    entry = std::make_unique<Kernel>();
    entry->kernel = created;
    entry->work_group = program->work_group;
    entry->shuffles = program->shuffles;
  }
  *kernel = entry.get();
  return KPDR_SUCCESS;
}

}  // namespace kpdr_opencl

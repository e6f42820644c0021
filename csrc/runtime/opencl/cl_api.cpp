#include "cl_api.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

namespace kpdr_opencl {
namespace {

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& slot, std::string* missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (slot == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
    return false;
  }
  return true;
}

}  // namespace

const ClApi* load_opencl(const std::string& library, std::string* why) {
  // One table per library name, kept for the life of the process: kernels and
  // buffers created through it may outlive any one caller.
  static std::mutex mutex;
  static std::map<std::string, ClApi*>* loaded = new std::map<std::string, ClApi*>;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = loaded->find(library);
  if (found != loaded->end()) return found->second;

  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    *why = "cannot load the OpenCL ICD loader '" + library + "' (" +
           (error ? error : "unknown dlopen error") +
           "). Install it with an OpenCL driver (Debian/Ubuntu: apt-get install "
           "ocl-icd-libopencl1 pocl-opencl-icd, or your GPU vendor's OpenCL driver), or name "
           "the library with the runtime option library=/path/to/libOpenCL.so.1 "
           "(MY_ASIC_OPENCL_LIBRARY)";
    return nullptr;
  }
  auto* api = new ClApi{};
  std::string missing;
  resolve(handle, "clGetPlatformIDs", api->GetPlatformIDs, &missing);
  resolve(handle, "clGetPlatformInfo", api->GetPlatformInfo, &missing);
  resolve(handle, "clGetDeviceIDs", api->GetDeviceIDs, &missing);
  resolve(handle, "clGetDeviceInfo", api->GetDeviceInfo, &missing);
  resolve(handle, "clCreateContext", api->CreateContext, &missing);
  resolve(handle, "clReleaseContext", api->ReleaseContext, &missing);
  resolve(handle, "clCreateCommandQueue", api->CreateCommandQueue, &missing);
  resolve(handle, "clRetainCommandQueue", api->RetainCommandQueue, &missing);
  resolve(handle, "clReleaseCommandQueue", api->ReleaseCommandQueue, &missing);
  resolve(handle, "clFlush", api->Flush, &missing);
  resolve(handle, "clFinish", api->Finish, &missing);
  resolve(handle, "clCreateBuffer", api->CreateBuffer, &missing);
  resolve(handle, "clReleaseMemObject", api->ReleaseMemObject, &missing);
  resolve(handle, "clEnqueueReadBuffer", api->EnqueueReadBuffer, &missing);
  resolve(handle, "clEnqueueWriteBuffer", api->EnqueueWriteBuffer, &missing);
  resolve(handle, "clEnqueueCopyBuffer", api->EnqueueCopyBuffer, &missing);
  resolve(handle, "clEnqueueMapBuffer", api->EnqueueMapBuffer, &missing);
  resolve(handle, "clEnqueueUnmapMemObject", api->EnqueueUnmapMemObject, &missing);
  resolve(handle, "clEnqueueMarkerWithWaitList", api->EnqueueMarkerWithWaitList, &missing);
  resolve(handle, "clEnqueueBarrierWithWaitList", api->EnqueueBarrierWithWaitList, &missing);
  resolve(handle, "clWaitForEvents", api->WaitForEvents, &missing);
  resolve(handle, "clGetEventInfo", api->GetEventInfo, &missing);
  resolve(handle, "clGetEventProfilingInfo", api->GetEventProfilingInfo, &missing);
  resolve(handle, "clRetainEvent", api->RetainEvent, &missing);
  resolve(handle, "clReleaseEvent", api->ReleaseEvent, &missing);
  resolve(handle, "clCreateProgramWithSource", api->CreateProgramWithSource, &missing);
  resolve(handle, "clCreateProgramWithBinary", api->CreateProgramWithBinary, &missing);
  resolve(handle, "clBuildProgram", api->BuildProgram, &missing);
  resolve(handle, "clGetProgramInfo", api->GetProgramInfo, &missing);
  resolve(handle, "clGetProgramBuildInfo", api->GetProgramBuildInfo, &missing);
  resolve(handle, "clReleaseProgram", api->ReleaseProgram, &missing);
  resolve(handle, "clCreateKernel", api->CreateKernel, &missing);
  resolve(handle, "clReleaseKernel", api->ReleaseKernel, &missing);
  resolve(handle, "clSetKernelArg", api->SetKernelArg, &missing);
  resolve(handle, "clGetKernelWorkGroupInfo", api->GetKernelWorkGroupInfo, &missing);
  resolve(handle, "clEnqueueNDRangeKernel", api->EnqueueNDRangeKernel, &missing);
  if (!missing.empty()) {
    *why = "the OpenCL library '" + library + "' lacks " + missing +
           " (OpenCL 1.2 or newer is needed); install a current ICD loader "
           "(ocl-icd-libopencl1) or point library= at one";
    delete api;
    dlclose(handle);
    return nullptr;
  }
  // Optional (OpenCL 2.0): avoids the deprecated 1.2 entry point where present.
  api->CreateCommandQueueWithProperties =
      reinterpret_cast<decltype(api->CreateCommandQueueWithProperties)>(
          dlsym(handle, "clCreateCommandQueueWithProperties"));
  (*loaded)[library] = api;
  return api;
}

std::string cl_error_name(cl_int code) {
  const char* name = nullptr;
  switch (code) {
    case 0: name = "CL_SUCCESS"; break;
    case -1: name = "CL_DEVICE_NOT_FOUND"; break;
    case -2: name = "CL_DEVICE_NOT_AVAILABLE"; break;
    case -3: name = "CL_COMPILER_NOT_AVAILABLE"; break;
    case -4: name = "CL_MEM_OBJECT_ALLOCATION_FAILURE"; break;
    case -5: name = "CL_OUT_OF_RESOURCES"; break;
    case -6: name = "CL_OUT_OF_HOST_MEMORY"; break;
    case -7: name = "CL_PROFILING_INFO_NOT_AVAILABLE"; break;
    case -8: name = "CL_MEM_COPY_OVERLAP"; break;
    case -11: name = "CL_BUILD_PROGRAM_FAILURE"; break;
    case -12: name = "CL_MAP_FAILURE"; break;
    case -14: name = "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"; break;
    case -30: name = "CL_INVALID_VALUE"; break;
    case -33: name = "CL_INVALID_DEVICE"; break;
    case -34: name = "CL_INVALID_CONTEXT"; break;
    case -36: name = "CL_INVALID_COMMAND_QUEUE"; break;
    case -38: name = "CL_INVALID_MEM_OBJECT"; break;
    case -42: name = "CL_INVALID_BINARY"; break;
    case -43: name = "CL_INVALID_BUILD_OPTIONS"; break;
    case -44: name = "CL_INVALID_PROGRAM"; break;
    case -45: name = "CL_INVALID_PROGRAM_EXECUTABLE"; break;
    case -46: name = "CL_INVALID_KERNEL_NAME"; break;
    case -48: name = "CL_INVALID_KERNEL"; break;
    case -49: name = "CL_INVALID_ARG_INDEX"; break;
    case -50: name = "CL_INVALID_ARG_VALUE"; break;
    case -51: name = "CL_INVALID_ARG_SIZE"; break;
    case -52: name = "CL_INVALID_KERNEL_ARGS"; break;
    case -54: name = "CL_INVALID_WORK_GROUP_SIZE"; break;
    case -58: name = "CL_INVALID_EVENT"; break;
    case -61: name = "CL_INVALID_BUFFER_SIZE"; break;
    case -63: name = "CL_INVALID_GLOBAL_WORK_SIZE"; break;
    case -1001: name = "CL_PLATFORM_NOT_FOUND_KHR"; break;
    default: break;
  }
  return std::string(name ? name : "OpenCL error") + " (" + std::to_string(code) + ")";
}

}  // namespace kpdr_opencl

// The few OpenCL entry points, types and constants the runtime uses,
// declared here so it builds without an OpenCL SDK; the functions come from
// the ICD loader (libOpenCL.so.1) through dlopen at kpdrInit. Values are the
// ones of Khronos' CL/cl.h (OpenCL ABI, stable since 1.0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kpdr_opencl {

using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_ulong = uint64_t;
using cl_bool = cl_uint;
using cl_bitfield = cl_ulong;
using cl_device_type = cl_bitfield;
using cl_mem_flags = cl_bitfield;
using cl_map_flags = cl_bitfield;
using cl_command_queue_properties = cl_bitfield;
using cl_queue_properties = cl_bitfield;
using cl_context_properties = intptr_t;
using cl_platform_info = cl_uint;
using cl_device_info = cl_uint;
using cl_event_info = cl_uint;
using cl_profiling_info = cl_uint;
using cl_program_info = cl_uint;
using cl_program_build_info = cl_uint;
using cl_kernel_work_group_info = cl_uint;

using cl_platform_id = struct _cl_platform_id*;
using cl_device_id = struct _cl_device_id*;
using cl_context = struct _cl_context*;
using cl_command_queue = struct _cl_command_queue*;
using cl_mem = struct _cl_mem*;
using cl_program = struct _cl_program*;
using cl_kernel = struct _cl_kernel*;
using cl_event = struct _cl_event*;

constexpr cl_int CL_SUCCESS = 0;
constexpr cl_int CL_DEVICE_NOT_FOUND = -1;
constexpr cl_int CL_MEM_OBJECT_ALLOCATION_FAILURE = -4;
constexpr cl_int CL_OUT_OF_RESOURCES = -5;
constexpr cl_int CL_OUT_OF_HOST_MEMORY = -6;
constexpr cl_int CL_BUILD_PROGRAM_FAILURE = -11;
constexpr cl_int CL_INVALID_BUILD_OPTIONS = -43;
constexpr cl_int CL_INVALID_BUFFER_SIZE = -61;
constexpr cl_int CL_PLATFORM_NOT_FOUND_KHR = -1001;

constexpr cl_bool CL_FALSE = 0;
constexpr cl_bool CL_TRUE = 1;

constexpr cl_platform_info CL_PLATFORM_VERSION = 0x0901;
constexpr cl_platform_info CL_PLATFORM_NAME = 0x0902;
constexpr cl_platform_info CL_PLATFORM_VENDOR = 0x0903;

constexpr cl_device_type CL_DEVICE_TYPE_DEFAULT = 1 << 0;
constexpr cl_device_type CL_DEVICE_TYPE_CPU = 1 << 1;
constexpr cl_device_type CL_DEVICE_TYPE_GPU = 1 << 2;
constexpr cl_device_type CL_DEVICE_TYPE_ACCELERATOR = 1 << 3;
constexpr cl_device_type CL_DEVICE_TYPE_ALL = 0xFFFFFFFF;

constexpr cl_device_info CL_DEVICE_TYPE = 0x1000;
constexpr cl_device_info CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002;
constexpr cl_device_info CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004;
constexpr cl_device_info CL_DEVICE_MAX_MEM_ALLOC_SIZE = 0x1010;
constexpr cl_device_info CL_DEVICE_GLOBAL_MEM_SIZE = 0x101F;
constexpr cl_device_info CL_DEVICE_LOCAL_MEM_SIZE = 0x1023;
constexpr cl_device_info CL_DEVICE_NAME = 0x102B;
constexpr cl_device_info CL_DEVICE_VENDOR = 0x102C;
constexpr cl_device_info CL_DRIVER_VERSION = 0x102D;
constexpr cl_device_info CL_DEVICE_VERSION = 0x102F;
constexpr cl_device_info CL_DEVICE_EXTENSIONS = 0x1030;
constexpr cl_device_info CL_DEVICE_OPENCL_C_VERSION = 0x103D;

constexpr cl_context_properties CL_CONTEXT_PLATFORM = 0x1084;
constexpr cl_command_queue_properties CL_QUEUE_PROFILING_ENABLE = 1 << 1;
constexpr cl_queue_properties CL_QUEUE_PROPERTIES = 0x1093;

constexpr cl_mem_flags CL_MEM_READ_WRITE = 1 << 0;
constexpr cl_mem_flags CL_MEM_ALLOC_HOST_PTR = 1 << 4;
constexpr cl_map_flags CL_MAP_READ = 1 << 0;
constexpr cl_map_flags CL_MAP_WRITE = 1 << 1;

constexpr cl_event_info CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3;
constexpr cl_int CL_COMPLETE = 0;
constexpr cl_profiling_info CL_PROFILING_COMMAND_END = 0x1283;

constexpr cl_program_info CL_PROGRAM_BINARY_SIZES = 0x1165;
constexpr cl_program_info CL_PROGRAM_BINARIES = 0x1166;
constexpr cl_program_build_info CL_PROGRAM_BUILD_LOG = 0x1183;
constexpr cl_kernel_work_group_info CL_KERNEL_WORK_GROUP_SIZE = 0x11B0;
constexpr cl_kernel_work_group_info CL_KERNEL_COMPILE_WORK_GROUP_SIZE = 0x11B1;

// The entry points, resolved from the ICD loader.
struct ClApi {
  cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id*, cl_uint*);
  cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void*, size_t*);
  cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id*, cl_uint*);
  cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void*, size_t*);
  cl_context (*CreateContext)(const cl_context_properties*, cl_uint, const cl_device_id*,
                              void (*)(const char*, const void*, size_t, void*), void*, cl_int*);
  cl_int (*ReleaseContext)(cl_context);
  // OpenCL 2.0+; NULL on 1.2 loaders, then CreateCommandQueue is used.
  cl_command_queue (*CreateCommandQueueWithProperties)(cl_context, cl_device_id,
                                                       const cl_queue_properties*, cl_int*);
  cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                         cl_int*);
  cl_int (*RetainCommandQueue)(cl_command_queue);
  cl_int (*ReleaseCommandQueue)(cl_command_queue);
  cl_int (*Flush)(cl_command_queue);
  cl_int (*Finish)(cl_command_queue);
  cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void*, cl_int*);
  cl_int (*ReleaseMemObject)(cl_mem);
  cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void*, cl_uint,
                              const cl_event*, cl_event*);
  cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void*,
                               cl_uint, const cl_event*, cl_event*);
  cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                              const cl_event*, cl_event*);
  void* (*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t,
                            cl_uint, const cl_event*, cl_event*, cl_int*);
  cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void*, cl_uint, const cl_event*,
                                  cl_event*);
  cl_int (*EnqueueMarkerWithWaitList)(cl_command_queue, cl_uint, const cl_event*, cl_event*);
  cl_int (*EnqueueBarrierWithWaitList)(cl_command_queue, cl_uint, const cl_event*, cl_event*);
  cl_int (*WaitForEvents)(cl_uint, const cl_event*);
  cl_int (*GetEventInfo)(cl_event, cl_event_info, size_t, void*, size_t*);
  cl_int (*GetEventProfilingInfo)(cl_event, cl_profiling_info, size_t, void*, size_t*);
  cl_int (*RetainEvent)(cl_event);
  cl_int (*ReleaseEvent)(cl_event);
  cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char**, const size_t*,
                                        cl_int*);
  cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id*, const size_t*,
                                        const unsigned char**, cl_int*, cl_int*);
  cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id*, const char*,
                         void (*)(cl_program, void*), void*);
  cl_int (*GetProgramInfo)(cl_program, cl_program_info, size_t, void*, size_t*);
  cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void*,
                                size_t*);
  cl_int (*ReleaseProgram)(cl_program);
  cl_kernel (*CreateKernel)(cl_program, const char*, cl_int*);
  cl_int (*ReleaseKernel)(cl_kernel);
  cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void*);
  cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t,
                                   void*, size_t*);
  cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t*,
                                 const size_t*, const size_t*, cl_uint, const cl_event*,
                                 cl_event*);
};

// Loads the ICD loader (`library`, default libOpenCL.so.1) once per process.
// Returns nullptr and sets *why (what is missing and how to install it) on failure.
const ClApi* load_opencl(const std::string& library, std::string* why);

// "CL_OUT_OF_RESOURCES (-5)" and the like, for error messages.
std::string cl_error_name(cl_int code);

}  // namespace kpdr_opencl

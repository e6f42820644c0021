// The GEMM entry of the OpenCL runtime (kpdrGemmArgs): picks a kernel and a
// tile configuration per device and dtype, builds it once through the kernel
// cache (gemm_source.cpp) and launches one work-group per tile of C and
// batch entry.
//
// Paths (runtime option gemm=, MY_ASIC_OPENCL_GEMM):
//   auto          float16/bfloat16 on NVIDIA compute capability >= 8.0 take
//                 kp_gemm_mma (tensor cores through inline PTX); if that
//                 program fails to build, the portable kernel serves instead
//                 (remembered per device). Everything else: kp_gemm.
//   portable      kp_gemm only.
//   mma           kp_gemm_mma for 16-bit dtypes wherever asked; a failed build
//                 is an error carrying the compiler's log.
//   mma_emulated  kp_gemm_mma with mma/ldmatrix/cp.async computed in OpenCL C (any
//                 device; slow; tests the fragment layouts on PoCL).
#include "gemm.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "gemm_source.h"
#include "kernel_cache.h"
#include "runtime.h"

namespace kpdr_opencl {
namespace {

#define KP_GEMM_TRY(call) \
  if (kpdrError_t kp_error = (call)) return kp_error

// kp_gemm's tile: WX x WY work-items, each 4*RM x 4*RN outputs, BK deep slices.
struct Tile {
  int wx, wy, rm, rn, bk;
  int64_t bm() const { return int64_t(wy) * 4 * rm; }
  int64_t bn() const { return int64_t(wx) * 4 * rn; }
};
constexpr Tile kGpuLarge{16, 16, 2, 2, 16};  // 128 x 128, 8 x 8 per work-item
constexpr Tile kGpuSmall{16, 16, 1, 1, 16};  // 64 x 64, for problems with fewer tiles than compute units
constexpr Tile kCpu{8, 8, 1, 1, 16};         // 32 x 32: PoCL runs a work-group as loops over its items
constexpr Tile kTiny{4, 4, 1, 1, 16};        // devices with work-groups under 64
constexpr int64_t kMmaTile = 128;

constexpr cl_device_info CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV = 0x4000;

bool is_gpu(const Runtime& runtime, const Device& device) {
  cl_device_type type = 0;
  return runtime.cl().GetDeviceInfo(device.id, CL_DEVICE_TYPE, sizeof(type), &type, nullptr) == CL_SUCCESS &&
         (type & CL_DEVICE_TYPE_GPU) != 0;
}

// mma.sync m16n8k16 with bf16/f16 inputs needs sm_80; only NVIDIA's compiler
// takes PTX in asm().
bool has_nvidia_tensor_cores(const Runtime& runtime, const Device& device) {
  if (device.vendor.find("NVIDIA") == std::string::npos ||
      device.extensions.find("cl_nv_device_attribute_query") == std::string::npos) {
    return false;
  }
  cl_uint major = 0;
  return runtime.cl().GetDeviceInfo(device.id, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof(major), &major,
                                    nullptr) == CL_SUCCESS &&
         major >= 8;
}

std::string source_for(kpdrDtype dtype, const Tile& tile, bool mma, bool emulate, int ta, int tb) {
  return "#define KP_DTYPE " + std::to_string(static_cast<int>(dtype)) + "\n#define KP_TA " + std::to_string(ta) +
         "\n#define KP_TB " + std::to_string(tb) + "\n#define WX " + std::to_string(tile.wx) +
         "\n#define WY " + std::to_string(tile.wy) + "\n#define RM " + std::to_string(tile.rm) + "\n#define RN " +
         std::to_string(tile.rn) + "\n#define BK " + std::to_string(tile.bk) + "\n#define KP_MMA " +
         (mma ? "1" : "0") + "\n#define KP_MMA_EMULATE " + (emulate ? "1" : "0") + "\n" + kGemmSource;
}

// Kernel objects by (device, dtype, tile, mma, emulate): the source is only
// made (and looked up in the kernel cache) on a miss.
kpdrError_t kernel_for(Runtime* runtime, int device, kpdrDtype dtype, const Tile& tile, bool mma, bool emulate,
                       int ta, int tb, Kernel** kernel) {
  using Key = std::tuple<int, int, int, int, int, int, int, bool, bool, int>;
  static std::mutex mutex;
  static std::map<Key, Kernel*> kernels;
  const Key key{device, static_cast<int>(dtype), tile.wx, tile.wy, tile.rm, tile.rn, tile.bk, mma, emulate,
                ta * 2 + tb};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = kernels.find(key);
    if (it != kernels.end()) {
      *kernel = it->second;
      return KPDR_SUCCESS;
    }
  }
  const std::string what = std::string("GEMM (") + (mma ? (emulate ? "mma emulated" : "tensor-core mma") : "portable") +
                           ", dtype " + std::to_string(static_cast<int>(dtype)) + ")";
  if (kpdrError_t error = runtime->kernels().get_generated(device, source_for(dtype, tile, mma, emulate, ta, tb), what,
                                                            mma ? "kp_gemm_mma" : "kp_gemm", kernel)) {
    return error;
  }
  std::lock_guard<std::mutex> lock(mutex);
  kernels[key] = *kernel;
  return KPDR_SUCCESS;
}

// Devices whose tensor-core program failed to build (gemm=auto then stays portable).
std::mutex g_mma_failed_mutex;
std::set<int> g_mma_failed;

class Args {
 public:
  Args(Runtime* runtime, int device) : runtime_(runtime), device_(device) {}
  kpdrError_t tensor(const void* ptr, const char* name) {
    if (ptr == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string("gemm: ") + name + " is NULL");
    DeviceRange range;
    if (!runtime_->device_memory().find(ptr, &range)) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string("gemm: ") + name + " is not device memory of this runtime");
    }
    if (range.allocation->device != device_) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string("gemm: ") + name + " lives on device " +
                                                std::to_string(range.allocation->device) +
                                                " but the stream belongs to device " + std::to_string(device_));
    }
    cl_mem mem = range.allocation->mem;
    const uint64_t offset = range.offset;
    args_.add(&mem, sizeof(mem), /*buffer=*/true);
    add(&offset, sizeof(offset));
    offsets_.push_back(offset);
    holders_.push_back(range.allocation);
    return KPDR_SUCCESS;
  }
  uint64_t offset(size_t i) const { return offsets_[i]; }
  void i64(int64_t v) { add(&v, sizeof(v)); }
  void i32(int32_t v) { add(&v, sizeof(v)); }
  void f32(float v) { add(&v, sizeof(v)); }
  kpdrError_t run(Kernel* kernel, Stream& stream, const size_t* global, const size_t* local) {
    const ClApi& cl = runtime_->cl();
    std::lock_guard<std::mutex> lock(kernel->mutex);
    size_t failed = 0;
    if (const cl_int status = args_.set_on(cl, *kernel, &failed)) {
      return fail(KPDR_ERROR_UNKNOWN,
                  "gemm: clSetKernelArg(" + std::to_string(failed) + ") failed with " + cl_error_name(status));
    }
    return stream.submit("gemm", [&](cl_command_queue queue, cl_event* done) {
      return cl.EnqueueNDRangeKernel(queue, kernel->kernel, 3, nullptr, global, local, 0, nullptr, done);
    });
  }

 private:
  void add(const void* value, size_t size) { args_.add(value, size); }
  Runtime* runtime_;
  int device_;
  KernelArgs args_;
  std::vector<uint64_t> offsets_;
  std::vector<std::shared_ptr<Allocation>> holders_;  // alive until enqueued
};

size_t blocks(int64_t n, int64_t tile) { return static_cast<size_t>((n + tile - 1) / tile); }

// The portable tile for this device and problem: 128 x 128 on GPUs unless that
// leaves compute units idle, where 64 x 64 gives 4x the work-groups.
Tile portable_tile(const Runtime& runtime, const Device& device, const kpdrGemmArgs& a) {
  if (device.max_work_group < 64) return kTiny;
  if (device.max_work_group < 256 || !is_gpu(runtime, device)) return kCpu;
  const size_t large = blocks(a.m, kGpuLarge.bm()) * blocks(a.n, kGpuLarge.bn()) * static_cast<size_t>(a.batch);
  return large < static_cast<size_t>(device.compute_units) ? kGpuSmall : kGpuLarge;
}

kpdrError_t launch(const kpdrGemmArgs* a, kpdrStream_t handle) {
  Runtime* runtime = nullptr;
  if (kpdrError_t error = Runtime::acquire(&runtime)) return error;
  if (handle == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "gemm: stream is NULL");
  std::shared_ptr<Stream> stream = runtime->streams().find(handle);
  if (stream == nullptr) return fail(KPDR_ERROR_INVALID_HANDLE, "gemm: unknown stream handle");
  if (a == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, "gemm: args is NULL");
  if (a->dtype != KPDR_DTYPE_FLOAT32 && a->dtype != KPDR_DTYPE_FLOAT16 && a->dtype != KPDR_DTYPE_BFLOAT16) {
    return fail(KPDR_ERROR_NOT_SUPPORTED, "gemm: kpdrDtype " + std::to_string(a->dtype) +
                                              " is not supported (float32, float16, bfloat16 are)");
  }
  if (a->batch < 0 || a->m < 0 || a->n < 0 || a->k < 0) return fail(KPDR_ERROR_INVALID_VALUE, "gemm: negative size");
  if (a->batch == 0 || a->m == 0 || a->n == 0) return KPDR_SUCCESS;
  const int device_index = stream->device();
  const Device& device = runtime->device(device_index);
  const std::string& mode = runtime->options().gemm;
  const bool sixteen = a->dtype != KPDR_DTYPE_FLOAT32;
  bool emulate = mode == "mma_emulated";
  bool mma = sixteen && (mode == "mma" || emulate);
  if (sixteen && mode == "auto" && has_nvidia_tensor_cores(*runtime, device)) {
    std::lock_guard<std::mutex> lock(g_mma_failed_mutex);
    mma = g_mma_failed.count(device_index) == 0;
  }
  const Tile tile = portable_tile(*runtime, device, *a);
  const int ta = a->trans_a != 0 ? 1 : 0, tb = a->trans_b != 0 ? 1 : 0;
  Kernel* kernel = nullptr;
  if (mma) {
    if (kpdrError_t error = kernel_for(runtime, device_index, a->dtype, tile, true, emulate, ta, tb, &kernel)) {
      if (mode != "auto") return error;
      std::lock_guard<std::mutex> lock(g_mma_failed_mutex);
      g_mma_failed.insert(device_index);  // the build log stays in the kernel cache's error
      mma = false;
    }
  }
  if (!mma) KP_GEMM_TRY(kernel_for(runtime, device_index, a->dtype, tile, false, false, ta, tb, &kernel));

  Args args(runtime, device_index);
  args.i64(a->m); args.i64(a->n); args.i64(a->k);
  // k == 0 reads neither A nor B (beta * C): C's buffer stands in for them.
  KP_GEMM_TRY(args.tensor(a->k > 0 ? a->a : a->c, "a")); args.i64(a->a_batch_stride); args.i64(a->a_ld);
  KP_GEMM_TRY(args.tensor(a->k > 0 ? a->b : a->c, "b")); args.i64(a->b_batch_stride); args.i64(a->b_ld);
  KP_GEMM_TRY(args.tensor(a->c, "c")); args.i64(a->c_batch_stride); args.i64(a->c_ld);
  args.f32(a->alpha); args.f32(a->beta);
  if (mma) {
    // 16-byte global loads where every row start of the operand is 16-byte aligned.
    auto aligned = [](uint64_t offset, int64_t ld, int64_t batch_stride) {
      return offset % 16 == 0 && ld % 8 == 0 && batch_stride % 8 == 0 ? 1 : 0;
    };
    args.i32(aligned(args.offset(0), a->a_ld, a->a_batch_stride));
    args.i32(aligned(args.offset(1), a->b_ld, a->b_batch_stride));
    // The work-group size follows the kernel's warp layout (KP_MMA_WARPS_*, which
    // build_options may override): read it back from reqd_work_group_size.
    size_t threads[3] = {0, 0, 0};
    const cl_int status = runtime->cl().GetKernelWorkGroupInfo(kernel->kernel, device.id,
                                                               CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof(threads),
                                                               threads, nullptr);
    if (status != CL_SUCCESS || threads[0] == 0) {
      return fail(KPDR_ERROR_UNKNOWN, std::string("gemm: clGetKernelWorkGroupInfo(CL_KERNEL_COMPILE_WORK_GROUP_SIZE) "
                                                  "failed with ") + cl_error_name(status));
    }
    const size_t global[3] = {blocks(a->n, kMmaTile) * threads[0], blocks(a->m, kMmaTile),
                              static_cast<size_t>(a->batch)};
    const size_t local[3] = {threads[0], 1, 1};
    return args.run(kernel, *stream, global, local);
  }
  const size_t global[3] = {blocks(a->n, tile.bn()) * tile.wx, blocks(a->m, tile.bm()) * tile.wy,
                            static_cast<size_t>(a->batch)};
  const size_t local[3] = {static_cast<size_t>(tile.wx), static_cast<size_t>(tile.wy), 1};
  return args.run(kernel, *stream, global, local);
}

#undef KP_GEMM_TRY

}  // namespace

kpdrError_t gemm(const kpdrGemmArgs* args, kpdrStream_t stream) {
  try {
    return launch(args, stream);
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string("gemm: internal error: ") + error.what());
  }
}

}  // namespace kpdr_opencl

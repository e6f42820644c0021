#include "host_backing.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "byte_format.h"
#include "error_reporting.h"

namespace myasic {
namespace {

// Below this, one mmap per allocation would waste most of a page and a
// syscall; aligned_alloc serves small tensors from the heap instead.
constexpr std::size_t kMmapThresholdBytes = std::size_t{64} << 10;

// Mapped backings start half a page into their mapping. Host buffers are
// usually a cache line or two past a page boundary; if device memory started
// on one, a device-to-host memmove would write just ahead of where it reads
// within each 4 KiB page ("4K aliasing"), which runs about 4x slower on x86.
constexpr std::size_t kMappedOffsetBytes = 2048;

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

kpdrError_t HostBacking::create(std::size_t bytes, std::shared_ptr<HostBacking>* out) {
  const std::size_t rounded = round_up(bytes, kAlignment);
  void* data = nullptr;
  bool mapped = false;
  if (rounded < kMmapThresholdBytes) {
    data = std::aligned_alloc(kAlignment, rounded);
  } else {
    void* mapping = mmap(nullptr, rounded + kMappedOffsetBytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data = mapping == MAP_FAILED ? nullptr : static_cast<char*>(mapping) + kMappedOffsetBytes;
    mapped = true;
  }
  if (data == nullptr) {
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                "host out of memory: the simulator could not reserve " + format_bytes(rounded) +
                    " of host memory to back the device allocation (" + std::strerror(errno) +
                    "); the host, not the simulated device, ran out. Free host memory (other "
                    "processes, CPU tensors) or lower memory_mb so the devices fit the host");
  }
  try {
    out->reset(new HostBacking(data, rounded, mapped));
  } catch (const std::bad_alloc&) {
    if (mapped) {
      munmap(static_cast<char*>(data) - kMappedOffsetBytes, rounded + kMappedOffsetBytes);
    } else {
      std::free(data);
    }
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                "host out of memory while tracking an allocation; the host, not the simulated "
                "device, ran out");
  }
  return KPDR_SUCCESS;
}

HostBacking::~HostBacking() {
  if (mapped_) {
    munmap(static_cast<char*>(data_) - kMappedOffsetBytes, bytes_ + kMappedOffsetBytes);
  } else {
    std::free(data_);
  }
}

}  // namespace myasic

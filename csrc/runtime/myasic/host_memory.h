// How much memory the host can give the simulated devices, and what limits it.
#pragma once

#include <cstddef>
#include <string>

namespace myasic {

struct HostMemory {
  std::size_t bytes;   // the least of the limits below
  std::string source;  // which one: "physical RAM", "the cgroup memory limit (...)", ...
};

// The least of: the machine's physical RAM, the memory limit of this process's
// cgroup and its ancestors (v1 or v2: containers), and the address-space limit
// (RLIMIT_AS, `ulimit -v`). Simulated device memory is host memory (host_backing.h),
// so the simulated devices together can hold no more than this.
HostMemory host_memory();

}  // namespace myasic

#include "host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace myasic {
namespace {

void consider(HostMemory* best, std::size_t bytes, const std::string& source) {
  if (bytes > 0 && bytes < best->bytes) *best = HostMemory{bytes, source};
}

// A limit file holds a byte count, or "max" (v2) / a huge number (v1) when unlimited.
bool read_limit(const std::string& path, std::size_t* bytes) {
  std::ifstream file(path);
  std::string text;
  if (!(file >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;  // beyond 2^64: no limit
  *bytes = static_cast<std::size_t>(value);
  return true;
}

// The limits of `cgroup` (a path like "/a/b" under `mount`) and of every ancestor:
// a parent's limit binds its children too.
void consider_cgroup(HostMemory* best, const std::string& mount, std::string cgroup,
                     const std::string& file) {
  while (true) {
    const std::string path = mount + (cgroup == "/" ? "" : cgroup) + "/" + file;
    std::size_t bytes = 0;
    if (read_limit(path, &bytes)) consider(best, bytes, "the cgroup memory limit (" + path + ")");
    if (cgroup.empty() || cgroup == "/") return;
    const auto slash = cgroup.find_last_of('/');
    cgroup = slash == 0 || slash == std::string::npos ? "/" : cgroup.substr(0, slash);
  }
}

}  // namespace

HostMemory host_memory() {
  HostMemory best{SIZE_MAX, "unknown (the OS reports no memory size)"};
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    consider(&best, static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size), "physical RAM");
  }
  // /proc/self/cgroup lines: "0::/path" (v2) or "4:memory:/path" (v1).
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      consider_cgroup(&best, "/sys/fs/cgroup", path, "memory.max");
    } else {
      std::stringstream list(controllers);
      std::string controller;
      while (std::getline(list, controller, ',')) {
        if (controller == "memory") {
          consider_cgroup(&best, "/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
        }
      }
    }
  }
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    consider(&best, static_cast<std::size_t>(address_space.rlim_cur),
             "the address-space limit (RLIMIT_AS, ulimit -v)");
  }
  return best;
}

}  // namespace myasic

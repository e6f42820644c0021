// Run-time choice of the CPU kernels' ISA level, and the public entry points
// that call the chosen level's table.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>

#include "kernels/cpu/dispatch.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kp {
namespace {

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__linux__)
// AMX-TILE and AMX-BF16 (cpuid leaf 7, EDX bits 24 and 22), and the kernel's
// permission to use tile data: Linux enables the 8 KiB of tile state per
// process on request (arch_prctl ARCH_REQ_XCOMP_PERM), and an AMX
// instruction before that faults. Asked once; a refusal (an older kernel, a
// hypervisor that hides the state) leaves the level unsupported.
bool amx_usable() {
  static const bool usable = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if (!(edx & (1u << 24)) || !(edx & (1u << 22))) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}
#else
bool amx_usable() { return false; }
#endif

bool cpu_has(CpuIsa isa) {
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::kGeneric: return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
    case CpuIsa::kAvx512Bf16:
      return cpu_has(CpuIsa::kAvx512) && __builtin_cpu_supports("avx512bf16");
    case CpuIsa::kAmx:
      return cpu_has(CpuIsa::kAvx512Bf16) && amx_usable();
  }
  return false;
#else
  return isa == CpuIsa::kGeneric;
#endif
}

// Each level's table, indexed by CpuIsa; the x86 levels only in x86-64 builds.
#define KP_CPU_KERNEL_ENTRY(ns, name, Args) &cpu::ns::name,
#define KP_CPU_KERNEL_SET(ns) cpu::KernelSet{KP_CPU_KERNELS(KP_CPU_KERNEL_ENTRY, ns)}
constexpr cpu::KernelSet kTables[] = {
    KP_CPU_KERNEL_SET(generic),
#if defined(KP_CPU_X86)
    KP_CPU_KERNEL_SET(avx2), KP_CPU_KERNEL_SET(avx512), KP_CPU_KERNEL_SET(avx512_bf16), KP_CPU_KERNEL_SET(amx),
#endif
};

const cpu::KernelSet* table_for(CpuIsa isa) {
  const auto level = static_cast<size_t>(isa);
  return level < std::size(kTables) ? &kTables[level] : nullptr;
}

bool supported(CpuIsa isa) { return table_for(isa) != nullptr && cpu_has(isa); }

bool parse(const std::string& name, CpuIsa* isa) {
  if (name == "generic" || name == "default") *isa = CpuIsa::kGeneric;
  else if (name == "avx2") *isa = CpuIsa::kAvx2;
  else if (name == "avx512") *isa = CpuIsa::kAvx512;
  else if (name == "avx512_bf16") *isa = CpuIsa::kAvx512Bf16;
  else if (name == "amx") *isa = CpuIsa::kAmx;
  else if (name == "auto" || name.empty()) *isa = best_supported_isa();
  else return false;
  return true;
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{[] {
    CpuIsa isa = best_supported_isa();
    if (const char* env = std::getenv("KP_CPU_ISA")) {
      CpuIsa wanted;
      // An unknown or unsupported level in the environment falls back to the
      // best one rather than failing every kernel, and says so once.
      if (parse(env, &wanted) && supported(wanted)) {
        isa = wanted;
      } else {
        std::fprintf(stderr,
                     "kernel_pytorch: KP_CPU_ISA='%s' is not one of generic|avx2|avx512|avx512_bf16|amx|auto, or "
                     "this CPU cannot run it; the CPU kernels use %s\n",
                     env, isa_name(isa));
      }
    }
    return static_cast<int>(isa);
  }()};
  return slot;
}

const cpu::KernelSet& active() { return *table_for(active_isa()); }

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric: return "generic";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Bf16: return "avx512_bf16";
    case CpuIsa::kAmx: return "amx";
  }
  return "unknown";
}

CpuIsa best_supported_isa() {
  for (CpuIsa isa : {CpuIsa::kAmx, CpuIsa::kAvx512Bf16, CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (supported(isa)) return isa;
  }
  return CpuIsa::kGeneric;
}

CpuIsa active_isa() { return static_cast<CpuIsa>(active_slot().load(std::memory_order_relaxed)); }

bool set_active_isa(const std::string& name, std::string* error) {
  CpuIsa isa;
  if (!parse(name, &isa)) {
    if (error) *error = "unknown CPU ISA level '" + name + "'; use generic, avx2, avx512, avx512_bf16, amx or auto";
    return false;
  }
  if (!supported(isa)) {
    if (error) {
      *error = std::string("this CPU (or build) cannot run the ") + isa_name(isa) +
               " kernels; the best it supports is " + isa_name(best_supported_isa());
    }
    return false;
  }
  active_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

// The public entry points (kernels.h): the active level's kernel.
#define KP_CPU_KERNEL_DISPATCH(ns, name, Args) void name(const Args& args) { active().name(args); }
KP_CPU_KERNELS(KP_CPU_KERNEL_DISPATCH, _)

}  // namespace kp

// One table of kernel entry points per CPU ISA level (DispatchStub's shape):
// each family header (rms_norm.h, silu.h, ...) defines its entry points in
// kp::cpu::<level>; per_isa/<family>.cpp, its one translation unit, is
// compiled once per level (build_support/native.py defines KP_CPU_CAPABILITY
// as the level, the level's KP_VEC_* and passes its -m flags), so an edit of
// one family recompiles only that family; isa.cpp builds the tables of
// KP_CPU_KERNELS (kernels.h) and picks one.
#pragma once

#include "kernels/kernels.h"

namespace kp::cpu {

#define KP_CPU_KERNEL_MEMBER(ns, name, Args) void (*name)(const Args&);
struct KernelSet {
  KP_CPU_KERNELS(KP_CPU_KERNEL_MEMBER, _)
};

// Whether a kernel writing an output of `output_bytes` stores it with
// non-temporal stores (streaming.cpp): from 3/4 of one CPU's share of the
// last-level cache up (glibc memcpy's rule), or KP_STREAMING_STORES_MIN_BYTES
// when set.
bool use_streaming_stores(int64_t output_bytes);

// The entry points of each level; the x86 levels exist only in x86-64 builds.
namespace generic { KP_CPU_KERNELS(KP_CPU_DECLARE_KERNEL, _) }
#if defined(__x86_64__) || defined(_M_X64)
#define KP_CPU_X86 1
namespace avx2 { KP_CPU_KERNELS(KP_CPU_DECLARE_KERNEL, _) }
namespace avx512 { KP_CPU_KERNELS(KP_CPU_DECLARE_KERNEL, _) }
namespace avx512_bf16 { KP_CPU_KERNELS(KP_CPU_DECLARE_KERNEL, _) }
namespace amx { KP_CPU_KERNELS(KP_CPU_DECLARE_KERNEL, _) }
#endif

}  // namespace kp::cpu

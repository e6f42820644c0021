// The kernels for x86-64 CPUs with AVX2, FMA and F16C. Only this file is
// compiled for them (a target pragma, so no per-file build flags); isa.cpp
// calls it only on CPUs that have them.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define KP_CPU_CAPABILITY avx2
#define KP_VEC_AVX2 1
#include "kernels/cpu/kernels_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

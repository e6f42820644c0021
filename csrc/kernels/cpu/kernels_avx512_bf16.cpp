// The kernels for x86-64 CPUs with AVX-512 (F, BW, VL, DQ) and AVX512-BF16
// (bfloat16 dot products, used by bfloat16 attention). Only this file is
// compiled for them (a target pragma, so no per-file build flags); isa.cpp
// calls it only on CPUs that have them.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")
#endif
#define KP_CPU_CAPABILITY avx512_bf16
#define KP_VEC_AVX512 1
#define KP_VEC_AVX512_BF16 1
#include "kernels/cpu/kernels_impl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

// The kernels for x86-64 CPUs with AVX-512 (F, BW, VL, DQ). Only this file is
// compiled for them (build_support/native.py gives it their -m flags); isa.cpp
// calls it only on CPUs that have them.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#define KP_CPU_CAPABILITY avx512
#define KP_VEC_AVX512 1
#include "kernels/cpu/kernels_impl.h"
#endif

// The kernels for x86-64 CPUs with AVX2, FMA and F16C. Only this file is
// compiled for them (build_support/native.py gives it their -m flags); isa.cpp
// calls it only on CPUs that have them.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#define KP_CPU_CAPABILITY avx2
#define KP_VEC_AVX2 1
#include "kernels/cpu/kernels_impl.h"
#endif

// The kernels for x86-64 CPUs with AVX-512, AVX512-BF16 and AMX (AMX-TILE,
// AMX-BF16): the avx512_bf16 kernels, with bfloat16 decode attention's q.k on
// tiles (attention.h). Only this file is compiled for them
// (build_support/native.py gives it their -m flags); isa.cpp calls it only on
// CPUs that have them and once Linux has granted the tile state.
#include "kernels/cpu/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#define KP_CPU_CAPABILITY amx
#define KP_VEC_AVX512 1
#define KP_VEC_AVX512_BF16 1
#define KP_CPU_AMX 1
#include "kernels/cpu/kernels_impl.h"
#endif

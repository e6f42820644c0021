// Every CPU kernel family, for the ISA level of the translation unit that
// includes this (kernels_<level>.cpp, after defining KP_CPU_CAPABILITY and
// its KP_VEC_* macros): the one prologue the per-level units share.
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul_vec.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu.h"
#include "kernels/cpu/softmax.h"

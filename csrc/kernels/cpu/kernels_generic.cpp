// Every kernel family for any CPU: portable Vec, which the compiler
// vectorises for the build's baseline ISA.
#define KP_CPU_CAPABILITY generic
#include "kernels/cpu/kernels_impl.h"

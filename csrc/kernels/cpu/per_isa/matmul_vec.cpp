// matmul_vec.h at one ISA level: compiled once per level (see dispatch.h).
#include "kernels/cpu/matmul_vec.h"

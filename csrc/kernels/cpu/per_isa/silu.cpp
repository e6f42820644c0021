// silu.h at one ISA level: compiled once per level (see dispatch.h).
#include "kernels/cpu/silu.h"

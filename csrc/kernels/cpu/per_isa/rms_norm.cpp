// rms_norm.h at one ISA level: compiled once per level (see dispatch.h).
#include "kernels/cpu/rms_norm.h"

// The kernels for any CPU: portable Vec, which the compiler vectorises for
// the build's baseline ISA.
#define KP_CPU_CAPABILITY generic
#include "kernels/cpu/vec.h"
#include "kernels/cpu/kernels_impl.h"

namespace kp::cpu {
const KernelSet& kernels_generic() { return generic::kernel_set(); }
}  // namespace kp::cpu

// Quiescing the autograd engine's my_asic device threads before Python exits.
#pragma once

namespace kernel_pytorch {

// Makes every my_asic autograd device thread run one tiny backward task to
// completion, so that none still holds an earlier backward's state whose
// release needs the GIL. Call with the GIL released, before interpreter
// finalisation (kernel_pytorch registers it with atexit). No-op when the
// runtime is not initialised or in a forked child.
void drain_autograd_device_threads();

} // namespace kernel_pytorch

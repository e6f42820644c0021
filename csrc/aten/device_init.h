// Device initialisation beyond loading the runtime: the kernel registrations
// that depend on what the runtime can do.
#pragma once

namespace kernel_pytorch {

// Loads the runtime, installs the routing CPU allocator, registers the native
// kernels a host-addressable runtime allows, then routes the remaining
// structured ops to the fallback. Idempotent and thread-safe; both the Python
// lazy init and ATen's PrivateUse1 hooks call it.
void initialize_device();

// Whether initialize_device() has completed.
bool device_initialized();

} // namespace kernel_pytorch

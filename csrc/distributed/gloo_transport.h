// myccl's default transport: PyTorch's own gloo backend over host buffers.
//
// The gloo backend object is created in Python (torch.distributed's
// ProcessGroupGloo) and reaches C++ as a plain c10d::Backend. The torch wheel
// exports ProcessGroupGloo's symbols but does not ship the gloo headers its
// class declaration includes, so C++ outside torch cannot name the class; the
// c10d::Backend interface it implements is all we need.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>

#include "transport.h"

namespace kernel_pytorch::distributed {

std::unique_ptr<Transport> make_gloo_transport(c10::intrusive_ptr<c10d::Backend> gloo);

} // namespace kernel_pytorch::distributed

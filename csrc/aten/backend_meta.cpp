// Backend metadata of my_asic tensors, and its serialisation.
//
// A chip may tag tensors with facts the dense layout does not show (its own
// memory format, say). torch._utils.set_tensor_metadata(t, {"key": True})
// stores such flags on a my_asic tensor's c10::BackendMeta, get_tensor_metadata
// reads them back, and torch.save / torch.load carry them through the
// TensorBackendMetaRegistry hooks (torch/csrc/jit/serialization/pickler_helper.h).
// Loading onto another device drops them, as that device has no use for them.
#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <map>
#include <string>

namespace kernel_pytorch {
namespace {

struct MyAsicBackendMeta final : public c10::BackendMeta {
  std::map<std::string, bool> flags;

  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    auto copy = c10::make_intrusive<MyAsicBackendMeta>();
    copy->flags = flags;
    return copy;
  }
};

// Serialisation: the tensor's flags join the metadata map.
void get_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  auto* meta = dynamic_cast<MyAsicBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr) {
    return;
  }
  for (const auto& [key, value] : meta->flags) {
    metadata[key] = value;
  }
}

// Deserialisation: every key torch did not consume (conj, neg) is ours.
void set_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  if (metadata.empty()) {
    return;
  }
  auto* impl = t.unsafeGetTensorImpl();
  auto* meta = dynamic_cast<MyAsicBackendMeta*>(impl->get_backend_meta());
  if (meta == nullptr) {
    auto fresh = c10::make_intrusive<MyAsicBackendMeta>();
    meta = fresh.get();
    impl->set_backend_meta(fresh);
  }
  for (const auto& [key, value] : metadata) {
    meta->flags[key] = value;
  }
}

const bool kRegistered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_metadata, &set_metadata);
  return true;
}();

} // namespace
} // namespace kernel_pytorch

#include "core/core.h"

#include <mutex>
#include <vector>


namespace kernel_pytorch {

MyAsicGeneratorImpl::MyAsicGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void MyAsicGeneratorImpl::set_current_seed(uint64_t seed) {
  engine_.set_current_seed(seed);
}

void MyAsicGeneratorImpl::set_offset(uint64_t offset) {
  engine_.set_offset(offset);
}

uint64_t MyAsicGeneratorImpl::get_offset() const {
  return engine_.get_offset();
}

uint64_t MyAsicGeneratorImpl::current_seed() const {
  return engine_.current_seed();
}

uint64_t MyAsicGeneratorImpl::seed() {
  return engine_.seed();
}

void MyAsicGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  engine_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> MyAsicGeneratorImpl::get_state() const {
  return engine_.unsafeGetGeneratorImpl()->get_state();
}

c10::DeviceType MyAsicGeneratorImpl::device_type() {
  return c10::DeviceType::PrivateUse1;
}

MyAsicGeneratorImpl* MyAsicGeneratorImpl::clone_impl() const {
  auto* copy = new MyAsicGeneratorImpl(device().index());
  copy->engine_ = engine_.clone();
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator>* generators = nullptr;
  std::call_once(once, [] {
    const auto n = device_count();
    auto* gens = new std::vector<at::Generator>();
    for (c10::DeviceIndex i = 0; i < n; ++i) {
      gens->push_back(at::make_generator<MyAsicGeneratorImpl>(i));
    }
    generators = gens;
  });
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return (*generators)[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return at::make_generator<MyAsicGeneratorImpl>(device);
}

at::Generator engine_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  if (!gen.has_value() || !gen->defined()) {
    return default_generator(device).get<MyAsicGeneratorImpl>()->engine();
  }
  if (gen->device().type() == c10::DeviceType::CPU) {
    return *gen;
  }
  TORCH_CHECK(
      gen->device().type() == c10::DeviceType::PrivateUse1,
      "my_asic: expected a my_asic or cpu generator, got one for ", gen->device());
  return gen->get<MyAsicGeneratorImpl>()->engine();
}

} // namespace kernel_pytorch

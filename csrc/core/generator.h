// Random number generators of the my_asic devices.
//
// Random ops run as CPU kernels on device memory (see cpu_fallback.cpp), and
// those kernels only accept CPU generators. So each my_asic generator owns a
// CPU generator as its engine: seeding, state save/restore and cloning act on
// that engine, and the fallback hands the engine to the CPU kernel. The result
// is a per-device stream of random numbers that torch.manual_seed and
// torch.my_asic.manual_seed make reproducible.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace kernel_pytorch {

class MyAsicGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit MyAsicGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type();

  // The CPU generator that CPU kernels draw from.
  const at::Generator& engine() const {
    return engine_;
  }

 private:
  MyAsicGeneratorImpl* clone_impl() const override;
  at::Generator engine_;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// The CPU engine to pass to a CPU kernel for a Generator? argument on `device`:
// the given my_asic generator's engine, or the device default's when absent.
at::Generator engine_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

} // namespace kernel_pytorch

// Fills, ranges and random numbers on my_asic tensors (host_kernels.h).
//
// ATen's CPU random kernels draw from a CPU generator. A my_asic generator
// owns one CPU engine per device (core/core.h), the same engine the fallback
// used, so seeded sequences are unchanged and reproducible.
#include <ATen/ops/arange_native.h>
#include <ATen/ops/bernoulli_native.h>
#include <ATen/ops/exponential_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/normal_native.h>
#include <ATen/ops/random_native.h>
#include <ATen/ops/uniform_native.h>
#include <ATen/ops/zero_native.h>

#include "core/core.h"
#include "host_kernels.h"

namespace kernel_pytorch::native {
namespace {

using Gen = std::optional<at::Generator>;

at::Generator engine(const Gen& gen, const at::Tensor& self) {
  return engine_for(gen, self.device().index());
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::normal_(self, mean, std, engine(gen, self));
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::uniform_(self, from, to, engine(gen, self));
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::random_(self, from, to, engine(gen, self));
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::random_(self, to, engine(gen, self));
}

at::Tensor& random_(at::Tensor& self, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::random_(self, engine(gen, self));
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::bernoulli_(self, p, engine(gen, self));
}

at::Tensor& exponential_(at::Tensor& self, double lambd, Gen gen) {
  const HostKernelScope scope(self);
  return at::native::exponential_(self, lambd, engine(gen, self));
}

} // namespace

void register_factories_and_random(Registrar& r) {
  using FillScalar = at::Tensor& (*)(at::Tensor&, const at::Scalar&);
  using FillTensor = at::Tensor& (*)(at::Tensor&, const at::Tensor&);
  using ArangeOut = at::Tensor& (*)(const at::Scalar&, const at::Scalar&, const at::Scalar&, at::Tensor&);
  r.impl("fill_.Scalar", TORCH_FN((HostKernel<static_cast<FillScalar>(&at::native::fill_)>::call)));
  r.impl("fill_.Tensor", TORCH_FN((HostKernel<static_cast<FillTensor>(&at::native::fill_)>::call)));
  r.impl("zero_", TORCH_FN((HostKernel<&at::native::zero_>::call)));
  r.impl("arange.start_out", TORCH_FN((HostKernel<static_cast<ArangeOut>(&at::native::arange_out)>::call)));
  r.impl("normal_", TORCH_FN(normal_));
  r.impl("uniform_", TORCH_FN(uniform_));
  r.impl("random_.from", TORCH_FN(random_from_));
  r.impl("random_.to", TORCH_FN(random_to_));
  r.impl("random_", TORCH_FN(random_));
  r.impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  r.impl("exponential_", TORCH_FN(exponential_));
}

} // namespace kernel_pytorch::native

// Random fills and dropout through the runtime's random entry (kpdr.h) when
// device memory is not host addressable: normal_, uniform_, bernoulli_(p),
// random_(from, to), exponential_ (so torch.randn/rand/randint and nn.init on
// the device), and native_dropout / native_dropout_backward composed from a
// Bernoulli mask and pointwise products, as ATen's CPU kernels compose them;
// multinomial from exponential or uniform draws and reductions (below).
//
// The device draws Philox4x32-10 keyed by a seed the my_asic generator's
// engine (core/generator.cpp) gives for each call, so torch.manual_seed,
// get_rng_state/set_rng_state and torch.Generator("my_asic") reproduce device
// sequences as they do host ones. The values are not the CPU's (CUDA's are
// not either); the host-addressable simulator keeps the CPU's sequences.
// Arguments ATen would reject, overlapping outputs, double tensors and
// NOT_SUPPORTED answers run through the counted CPU fallback, which raises
// ATen's errors.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/multinomial_native.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>
#include <tuple>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using Gen = std::optional<at::Generator>;

// A fresh 64-bit seed from the generator's engine, as one CPU draw advances it.
uint64_t draw_seed(const Gen& gen, c10::DeviceIndex device) {
  at::Generator engine = engine_for(gen, device);
  std::lock_guard<std::mutex> lock(engine.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(engine)->random64();
}

bool fillable(const at::Tensor& self) {
  return self.defined() && self.device().type() == c10::DeviceType::PrivateUse1 && self.layout() == at::kStrided &&
         self.dim() <= KPDR_MAX_DIMS && entry_dtype(self.scalar_type()).has_value() &&
         at::has_internal_overlap(self) != at::MemOverlap::Yes && runtime_kernels().random != nullptr;
}

// Fills self from `distribution`; false (nothing written) when the entry
// cannot take the call.
bool fill(at::Tensor& self, int32_t distribution, double a, double b, const Gen& gen, int64_t low = 0,
          int64_t high = 1) {
  if (!fillable(self)) return false;
  if (self.numel() == 0) return true;
  c10::DeviceGuard guard(self.device());
  kpdrRandomArgs args{};
  args.ndim = static_cast<int32_t>(self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) {
    args.sizes[d] = self.size(d);
    args.out_strides[d] = self.stride(d);
  }
  args.dtype = *entry_dtype(self.scalar_type());
  args.out = self.mutable_data_ptr();
  args.distribution = distribution;
  args.a = a;
  args.b = b;
  args.low = low;
  args.high = high;
  args.seed = draw_seed(gen, self.device().index());
  return launch_kernel(runtime_kernels().random, args, current_stream(self.device().index()));
}

bool floating(const at::Tensor& self) {
  return entry_float(self.scalar_type());
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, Gen gen) {
  if (floating(self) && std >= 0.0 && fill(self, KPDR_RANDOM_NORMAL, mean, std, gen)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, double, double, Gen>(kernel_key(&normal_), self, mean, std, gen);
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, Gen gen) {
  if (floating(self) && from <= to && fill(self, KPDR_RANDOM_UNIFORM, from, to, gen)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, double, double, Gen>(kernel_key(&uniform_), self, from, to, gen);
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, Gen gen) {
  if (p >= 0.0 && p <= 1.0 && fill(self, KPDR_RANDOM_BERNOULLI, p, 0.0, gen)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, double, Gen>(kernel_key(&bernoulli_float_), self, p, gen);
}

at::Tensor& exponential_(at::Tensor& self, double lambd, Gen gen) {
  if (floating(self) && lambd > 0.0 && fill(self, KPDR_RANDOM_EXPONENTIAL, lambd, 0.0, gen)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, double, Gen>(kernel_key(&exponential_), self, lambd, gen);
}

// Whether every integer of [from, to) is a value of self's dtype (ATen's
// check_from_to_in_range; floats: exactly representable integers).
bool range_fits(const at::Tensor& self, int64_t from, int64_t to) {
  if (to <= from) return false;
  int64_t lo = 0, hi = 0;
  switch (self.scalar_type()) {
    case at::kFloat: lo = -(int64_t{1} << 24); hi = int64_t{1} << 24; break;
    case at::kHalf: lo = -(int64_t{1} << 11); hi = int64_t{1} << 11; break;
    case at::kBFloat16: lo = -(int64_t{1} << 8); hi = int64_t{1} << 8; break;
    case at::kBool: lo = 0; hi = 1; break;
    case at::kInt: lo = INT32_MIN; hi = INT32_MAX; break;
    case at::kLong: return true;
    default: return false;
  }
  return from >= lo && to - 1 <= hi;
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, Gen gen) {
  if (to.has_value() && range_fits(self, from, *to) && fill(self, KPDR_RANDOM_INTEGER, 0.0, 0.0, gen, from, *to)) {
    return self;
  }
  return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, std::optional<int64_t>, Gen>(
      kernel_key(&random_from_), self, from, to, gen);
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, Gen gen) {
  if (range_fits(self, 0, to) && fill(self, KPDR_RANDOM_INTEGER, 0.0, 0.0, gen, 0, to)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&, int64_t, Gen>(kernel_key(&random_to_), self, to, gen);
}

// ATen's native_dropout_cpu: a Bernoulli(1 - p) mask, output = input * mask * scale.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1.0 - p;
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(keep);
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  return grad * mask * scale;
}

// ---- multinomial ----------------------------------------------------------------

// Inverse-CDF draws with replacement: one uniform per sample, whose index is
// the count of normalised cumulative probabilities at or below it. A
// comparison grid of rows x samples x categories, so up to kMultinomialGrid
// elements (larger calls fall back).
constexpr int64_t kMultinomialGrid = int64_t{1} << 26;

at::Tensor multinomial_with_replacement(const at::Tensor& self, int64_t n, const Gen& gen) {
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  // ATen's checks, in its words (Distributions.cpp); each reads one value back.
  const bool valid = ((self.max() < INFINITY) & (self.min() >= 0)).item<bool>();
  TORCH_CHECK(valid, "probability tensor contains either `inf`, `nan` or element < 0");
  const at::Tensor rows = self.dim() == 1 ? self.unsqueeze(0) : self;
  TORCH_CHECK(!(rows.sum(1) == 0).any().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
  const int64_t categories = rows.size(1);
  at::Tensor cdf = rows.to(at::kFloat).cumsum(1);
  cdf = cdf / cdf.narrow(1, categories - 1, 1);
  at::Tensor u = at::empty({rows.size(0), n}, cdf.options());
  u.uniform_(0.0, 1.0, gen);
  // The last cumulative probability is exactly 1 (x / x) and u < 1, so the
  // count stays below `categories` and never reaches a zero-probability tail.
  at::Tensor index = (cdf.unsqueeze(1) <= u.unsqueeze(2)).sum(2);
  return self.dim() == 1 ? index.squeeze(0) : index;
}

// torch.multinomial (sampling in generate()). Without replacement or for one
// sample per row, ATen's own device-generic code runs on the device: its
// checks, then the exponential race argmax(p / q), q ~ Exp(1) (topk for
// several samples). With replacement, the inverse CDF above.
at::Tensor multinomial(const at::Tensor& self, int64_t n, bool replacement, Gen gen) {
  const bool device = self.defined() && self.device().type() == c10::DeviceType::PrivateUse1 &&
                      self.layout() == at::kStrided && entry_float(self.scalar_type()) &&
                      (self.dim() == 1 || self.dim() == 2) && self.numel() > 0;
  if (device && (!replacement || n == 1)) return at::native::multinomial(self, n, replacement, gen);
  if (device && n > 0 && self.numel() <= kMultinomialGrid / n) return multinomial_with_replacement(self, n, gen);
  return run_on_fallback<at::Tensor, const at::Tensor&, int64_t, bool, Gen>(
      kernel_key(&multinomial), self, n, replacement, gen);
}

}  // namespace

void register_runtime_random(Registrar& r) {
  if (runtime_kernels().random == nullptr) return;
  r.impl("normal_", TORCH_FN(normal_));
  r.impl("uniform_", TORCH_FN(uniform_));
  r.impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  r.impl("exponential_", TORCH_FN(exponential_));
  r.impl("random_.from", TORCH_FN(random_from_));
  r.impl("random_.to", TORCH_FN(random_to_));
  if (runtime_kernels().pointwise != nullptr) {
    r.impl("native_dropout", TORCH_FN(native_dropout));
    r.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
    if (runtime_kernels().reduce != nullptr) r.impl("multinomial", TORCH_FN(multinomial));
  }
}

}  // namespace kernel_pytorch::native

// Drives one of ATen's structured kernels (meta() then impl(), the class ATen
// declares in ATen/ops/<op>_native.h) on my_asic tensors, in the three forms
// ATen's code generator emits for every backend: functional (new outputs),
// out= (resize the given outputs) and in-place. Outputs are allocated on
// my_asic; the impl's CPU loops then run on device memory, which the caller
// has checked is host addressable (host_kernels.h).
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <c10/util/ExclusivelyOwned.h>

#include <torch/version.h>

#include <array>
#include <functional>
#include <optional>
#include <tuple>
#include <utility>
#include <type_traits>

#include "host_kernels.h"

// Before torch 2.13 the set_output_* hooks also took the outputs' dimension
// names (named tensors); 2.13 removed them.
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
#define KP_NAMES_PARAM , at::DimnameList names
#define KP_NAMES_ARG , names
#define KP_PROPAGATE_NAMES(tensor) \
  if (!names.empty()) {            \
    (tensor).rename_(names);       \
  }
#else
#define KP_NAMES_PARAM
#define KP_NAMES_ARG
#define KP_PROPAGATE_NAMES(tensor)
#endif

namespace kernel_pytorch::native {

// Dtypes. For CPU tensors TensorIterator casts inputs to the common dtype
// before the kernel runs; for any other device it leaves that to the kernel,
// and ATen's CPU loops refuse mixed dtypes. So after meta() has built the
// iterator, the wrappers do the CPU iterator's part:
// - CPU 0-dim scalars (`x * 2` passes 2 as one) are swapped for a cast copy
//   in place, keeping the original for kernels that read its exact value
//   (cast_cpu_scalars, as TensorIterator itself does);
// - device tensors of another dtype (float * bool mask) make the call rerun
//   with them cast to the common dtype;
// - what is left (an out= of another dtype) runs on the fallback.
namespace dtypes {

inline bool is_cpu_scalar(const at::TensorBase& t) {
  return t.defined() && t.dim() == 0 && t.device().is_cpu();
}

template <class A>
decltype(auto) cast_device_tensor(A&& a, at::Tensor& holder, at::ScalarType dtype) {
  if constexpr (std::is_same_v<std::decay_t<A>, at::Tensor>) {
    if (a.defined() && !is_cpu_scalar(a) && a.scalar_type() != dtype) {
      holder = a.to(dtype);
      return static_cast<const at::Tensor&>(holder);
    }
    return static_cast<const at::Tensor&>(a);
  } else {
    return std::forward<A>(a);
  }
}

template <class F, class Tuple, size_t... I>
decltype(auto) call_cast_impl(F&& f, at::ScalarType dtype, Tuple&& args, std::index_sequence<I...>) {
  std::array<at::Tensor, sizeof...(I)> holders;
  return f(cast_device_tensor(std::get<I>(std::forward<Tuple>(args)), holders[I], dtype)...);
}

// Calls f with the device tensors among the arguments cast to `dtype`.
template <class F, class... A>
decltype(auto) call_cast(F&& f, at::ScalarType dtype, A&&... args) {
  return call_cast_impl(
      std::forward<F>(f), dtype, std::forward_as_tuple(std::forward<A>(args)...), std::index_sequence_for<A...>{});
}

} // namespace dtypes

namespace structured {

template <class Impl>
constexpr bool kIterator = std::is_base_of_v<at::TensorIteratorBase, Impl>;

inline at::Tensor create_out(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  return strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
}

inline void resize_out(
    const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  TORCH_CHECK(
      options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(), ", but got ",
      out.dtype(), " instead");
  TORCH_CHECK(
      options.device() == out.device(), "Expected out tensor to have device ", options.device(), ", but got ",
      out.device(), " instead");
  // The meta function's strides are advisory: an out= tensor keeps its own
  // unless it had to be resized.
  if (at::native::resize_output(out, sizes)) {
    if (!strides.empty()) {
      out.as_strided_(sizes, strides);
    } else if (options.memory_format_opt().has_value()) {
      out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }
}

inline void check_inplace(const at::Tensor& self, at::IntArrayRef sizes, const at::TensorOptions& options) {
  TORCH_CHECK(
      options.dtype() == self.dtype(), "Bad in-place call: input tensor dtype ", self.dtype(),
      " and output tensor dtype ", options.dtype(), " should match");
  TORCH_CHECK(
      options.device() == self.device(), "Bad in-place call: input tensor device ", self.device(),
      " and output tensor device ", options.device(), " should match");
  TORCH_CHECK(
      sizes == self.sizes(), "Bad in-place call: input tensor size ", self.sizes(), " and output tensor size ",
      sizes, " should match");
}

// Kernels that do not go through TensorIterator write contiguous-like
// results: an out= tensor with other strides gets a temporary, copied back.
inline std::optional<at::Tensor> maybe_create_proxy(
    const at::Tensor& out, at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options) {
  // Empty strides: the meta function asks for no particular layout.
  if (!strides.empty() && out.strides() != strides) {
    return at::empty_strided(sizes, strides, options);
  }
  return std::nullopt;
}

// What the wrappers add to an iterator op after meta() has built it (see
// dtypes); for other structured ops these are no-ops.
template <class Impl>
struct Iterator : Impl {
  // TensorIterator's CPU-only step for CPU scalar inputs: compute on a copy
  // in the common dtype, keep the original (original_scalar_value reads it).
  void cast_cpu_scalars() {
    if constexpr (kIterator<Impl>) {
      if (this->common_dtype_ == at::ScalarType::Undefined) {
        return;
      }
      for (int i = this->noutputs(); i < this->ntensors(); ++i) {
        auto& operand = this->operands_[i];
        if (operand.current_dtype == this->common_dtype_ || !dtypes::is_cpu_scalar(operand.tensor_base())) {
          continue;
        }
        // A 0-dim operand has zero strides: only its data pointer changes.
        operand.exchange_tensor(
            c10::MaybeOwned<at::TensorBase>::owned(at::Tensor(operand.tensor_base()).to(this->common_dtype_)));
        operand.current_dtype = operand.target_dtype = this->common_dtype_;
        operand.data = const_cast<void*>(operand.tensor_base().const_data_ptr());
      }
    }
  }
  // Whether ATen's CPU loops can run the iterator as built: the CPU
  // TensorIterator would have cast any input, or any output other than a
  // boolean result, whose dtype differs from the common dtype.
  bool loops_accept_dtypes() const {
    if constexpr (kIterator<Impl>) {
      if (this->common_dtype_ == at::ScalarType::Undefined) {
        return true;
      }
      for (int i = 0; i < this->ntensors(); ++i) {
        const at::ScalarType d = this->dtype(i);
        if (d != this->common_dtype_ && !(i < this->noutputs() && d == at::kBool)) {
          return false;
        }
      }
    }
    return true;
  }
  at::ScalarType common() const {
    if constexpr (kIterator<Impl>) {
      return this->common_dtype_;
    }
    return at::ScalarType::Undefined;
  }
};

template <class Impl, size_t N>
struct Functional final : Iterator<Impl> {
  void set_output_strided(
      int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options KP_NAMES_PARAM) override {
    set(i, sizes, strides, options KP_NAMES_ARG);
  }
  void set_output_raw_strided(
      int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options KP_NAMES_PARAM) override {
    set(i, sizes, strides, options KP_NAMES_ARG);
  }
  const at::Tensor& maybe_get_output(int64_t i) override {
    return *outputs_[i];
  }
  at::Tensor take(int64_t i) {
    return std::move(outputs_[i]).take();
  }
  std::array<c10::ExclusivelyOwned<at::Tensor>, N> outputs_;

 private:
  void set(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options KP_NAMES_PARAM) {
    outputs_[i] = create_out(sizes, strides, options);
    KP_PROPAGATE_NAMES(*outputs_[i])
    // After the output exists: the iterator reads it back through maybe_get_output.
    if constexpr (kIterator<Impl>) {
      Impl::set_output_raw_strided(i, sizes, strides, options KP_NAMES_ARG);
    }
  }
};

// out= (kInplace false) and in-place (kInplace true) forms.
template <class Impl, size_t N, bool kInplace>
struct Given final : Iterator<Impl> {
  template <class... T>
  explicit Given(T&... outs) : outputs_{std::ref(outs)...} {}

  void set_output_strided(
      int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options KP_NAMES_PARAM) override {
    set(i, sizes, strides, options KP_NAMES_ARG);
  }
  void set_output_raw_strided(
      int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options KP_NAMES_PARAM) override {
    set(i, sizes, strides, options KP_NAMES_ARG);
  }
  const at::Tensor& maybe_get_output(int64_t i) override {
    return proxies_[i].has_value() ? **proxies_[i] : outputs_[i].get();
  }
  // Copies proxy results into the given outputs.
  void finish() {
    for (size_t i = 0; i < N; ++i) {
      if (proxies_[i].has_value()) {
        outputs_[i].get().copy_(**proxies_[i]);
      }
    }
  }
  std::array<std::reference_wrapper<at::Tensor>, N> outputs_;
  std::array<std::optional<c10::ExclusivelyOwned<at::Tensor>>, N> proxies_;

 private:
  void set(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides, at::TensorOptions options KP_NAMES_PARAM) {
    const at::Tensor& out = outputs_[i].get();
    if constexpr (kInplace) {
      check_inplace(out, sizes, options);
    } else {
      resize_out(out, sizes, strides, options);
    }
    if constexpr (!kIterator<Impl>) {
      if (auto proxy = maybe_create_proxy(out, sizes, strides, options)) {
        proxies_[i] = c10::ExclusivelyOwned<at::Tensor>(std::move(*proxy));
      }
    }
    KP_PROPAGATE_NAMES(outputs_[i].get())
    if constexpr (kIterator<Impl>) {
      Impl::set_output_raw_strided(i, sizes, strides, options KP_NAMES_ARG);
    }
  }
};

} // namespace structured



// One output: Op<Impl, Args...>::functional / out, where Args are the meta()
// arguments; InplaceOp<Impl, Rest...>::inplace for `self` followed by Rest.
// Each runs natively when the dtypes allow it (see dtypes), and otherwise on
// the counted fallback.
template <class Impl, class... Args>
struct Op {
  static at::Tensor functional(Args... args) {
    at::ScalarType common = at::ScalarType::Undefined;
    std::optional<at::Tensor> result = try_run(&common, args...);
    if (!result.has_value() && common != at::ScalarType::Undefined) {
      at::ScalarType again{};
      result = dtypes::call_cast([](auto&&... a) { return try_run(a...); }, common, &again, args...);
    }
    if (result.has_value()) {
      return *std::move(result);
    }
    return run_on_fallback<at::Tensor, Args...>(kernel_key(&functional), args...);
  }

  static at::Tensor& out(Args... args, at::Tensor& result) {
    at::ScalarType common = at::ScalarType::Undefined;
    bool done = try_run_out(&common, args..., result);
    if (!done && common != at::ScalarType::Undefined) {
      at::ScalarType again{};
      done = dtypes::call_cast(
          [&result](at::ScalarType* c, auto&&... a) { return try_run_out(c, a..., result); }, common, &again,
          args...);
    }
    if (done) {
      return result;
    }
    return run_on_fallback<at::Tensor&, Args..., at::Tensor&>(kernel_key(&out), args..., result);
  }

 private:
  static std::optional<at::Tensor> try_run(at::ScalarType* common, Args... args) {
    HostKernelScope scope(detail::DeviceRuleTag<exact_same_device<Impl>>{}, args...);
    structured::Functional<Impl, 1> op;
    op.meta(args...);
    op.cast_cpu_scalars();
    if (!op.loops_accept_dtypes()) {
      scope.dismiss();
      *common = op.common();
      return std::nullopt;
    }
    op.impl(args..., op.maybe_get_output(0));
    return op.take(0);
  }
  static bool try_run_out(at::ScalarType* common, Args... args, at::Tensor& result) {
    HostKernelScope scope(detail::DeviceRuleTag<exact_same_device<Impl>>{}, args..., detail::Written{result});
    structured::Given<Impl, 1, false> op(result);
    op.meta(args...);
    op.cast_cpu_scalars();
    if (!op.loops_accept_dtypes()) {
      scope.dismiss();
      *common = op.common();
      return false;
    }
    op.impl(args..., op.maybe_get_output(0));
    op.finish();
    return true;
  }
};

template <class Impl, class... Rest>
struct InplaceOp {
  static at::Tensor& inplace(at::Tensor& self, Rest... rest) {
    at::ScalarType common = at::ScalarType::Undefined;
    bool done = try_run(&common, self, rest...);
    if (!done && common == self.scalar_type()) {
      at::ScalarType again{};
      done = dtypes::call_cast(
          [&self](at::ScalarType* c, auto&&... a) { return try_run(c, self, a...); }, common, &again, rest...);
    }
    if (done) {
      return self;
    }
    return run_on_fallback<at::Tensor&, at::Tensor&, Rest...>(kernel_key(&inplace), self, rest...);
  }

 private:
  static bool try_run(at::ScalarType* common, at::Tensor& self, Rest... rest) {
    HostKernelScope scope(detail::DeviceRuleTag<exact_same_device<Impl>>{}, detail::Written{self}, rest...);
    structured::Given<Impl, 1, true> op(self);
    op.meta(self, rest...);
    op.cast_cpu_scalars();
    if (!op.loops_accept_dtypes()) {
      scope.dismiss();
      *common = op.common();
      return false;
    }
    op.impl(self, rest..., op.maybe_get_output(0));
    op.finish();
    return true;
  }
};

// Registers name, name.out and (unless nullptr) name_ for a structured op
// whose meta takes (self, Rest...).
template <class Impl, class... Rest>
void all_forms(Registrar& r, const char* name, const char* out, const char* inplace) {
  using T = const at::Tensor&;
  r.impl(name, TORCH_FN((Op<Impl, T, Rest...>::functional)));
  r.impl(out, TORCH_FN((Op<Impl, T, Rest...>::out)));
  if (inplace != nullptr) {
    r.impl(inplace, TORCH_FN((InplaceOp<Impl, Rest...>::inplace)));
  }
}

// Two outputs (max_pool2d_with_indices, nll_loss_forward).
template <class Impl, class... Args>
struct Op2 {
  static std::tuple<at::Tensor, at::Tensor> functional(Args... args) {
    const HostKernelScope scope(detail::DeviceRuleTag<exact_same_device<Impl>>{}, args...);
    structured::Functional<Impl, 2> op;
    op.meta(args...);
    op.impl(args..., op.maybe_get_output(0), op.maybe_get_output(1));
    return {op.take(0), op.take(1)};
  }
  static std::tuple<at::Tensor&, at::Tensor&> out(Args... args, at::Tensor& a, at::Tensor& b) {
    const HostKernelScope scope(
        detail::DeviceRuleTag<exact_same_device<Impl>>{}, args..., detail::Written{a}, detail::Written{b});
    structured::Given<Impl, 2, false> op(a, b);
    op.meta(args...);
    op.impl(args..., op.maybe_get_output(0), op.maybe_get_output(1));
    op.finish();
    return {a, b};
  }
};

} // namespace kernel_pytorch::native

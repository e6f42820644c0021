#include "myccl_backend.h"

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/python_headers.h>

#include "core/core.h"

namespace kernel_pytorch::distributed {
namespace {

using RedOp = c10d::ReduceOp::RedOpType;

const char* device_fix =
    "Move it with .to(\"my_asic\"), or give the group a backend for that device too, e.g. "
    "init_process_group(\"cpu:gloo,my_asic:myccl\").";

// myccl takes my_asic tensors and, for groups that mix CPU and my_asic
// ranks ("cpu:myccl,my_asic:myccl"), CPU tensors; one call uses one device.
void check_tensor(const std::string& op, const at::Tensor& t, c10::Device device) {
  TORCH_CHECK_VALUE(t.defined(), "myccl: ", op, " got an undefined tensor");
  TORCH_CHECK_VALUE(
      t.device().type() == c10::DeviceType::PrivateUse1 || t.device().type() == c10::DeviceType::CPU, "myccl: ", op,
      " got a tensor on ", t.device(), ", but myccl moves my_asic (and CPU) tensors. ", device_fix);
  TORCH_CHECK_VALUE(
      t.device() == device, "myccl: ", op, " got tensors on ", device, " and ", t.device(),
      "; all tensors of one call must be on the same device");
  TORCH_CHECK_VALUE(t.layout() == c10::kStrided, "myccl: ", op, " supports dense tensors only, got ", t.layout());
  TORCH_CHECK_VALUE(
      t.is_non_overlapping_and_dense() && t.is_contiguous(), "myccl: ", op,
      " needs contiguous tensors; call .contiguous() first");
}

c10::Device check_tensors(const std::string& op, const std::vector<at::Tensor>& ts) {
  TORCH_CHECK_VALUE(!ts.empty(), "myccl: ", op, " got no tensors");
  TORCH_CHECK_VALUE(ts.front().defined(), "myccl: ", op, " got an undefined tensor");
  const c10::Device device = ts.front().device();
  for (const auto& t : ts) {
    check_tensor(op, t, device);
  }
  return device;
}

void check_single(const std::string& op, const std::vector<at::Tensor>& ts) {
  TORCH_CHECK_VALUE(
      ts.size() == 1, "myccl: ", op, " takes one tensor per process (one device per rank), got ", ts.size());
}

void check_same(const std::string& op, const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK_VALUE(
      a.scalar_type() == b.scalar_type(), "myccl: ", op, ": ", what, " has dtype ", b.scalar_type(),
      " but the input has ", a.scalar_type());
  TORCH_CHECK_VALUE(
      a.numel() == b.numel(), "myccl: ", op, ": ", what, " has ", b.numel(), " elements but the input has ",
      a.numel(), "; every rank must pass tensors of the same size");
}

void check_root(const std::string& op, int64_t root, int size) {
  TORCH_CHECK_VALUE(
      root >= 0 && root < size, "myccl: ", op, ": root rank ", root, " is outside the group of ", size, " ranks");
}

// gather's gather_list / scatter's scatter_list: one list of `size` tensors on
// the root, none elsewhere. Returns the root's list (empty on other ranks).
std::vector<at::Tensor> root_list(const std::string& op, const std::vector<std::vector<at::Tensor>>& lists,
                                  const char* name, int root, int rank, int size) {
  if (rank == root) {
    TORCH_CHECK_VALUE(
        lists.size() == 1 && static_cast<int>(lists[0].size()) == size, "myccl: ", op, ": the root needs a ",
        name, " of ", size, " tensors");
    return lists[0];
  }
  TORCH_CHECK_VALUE(
      lists.empty() || lists[0].empty(), "myccl: ", op, ": only the root (rank ", root, ") passes a ", name);
  return {};
}

// What the transport gets for a reduction, and what myccl does after it.
struct Reduction {
  RedOp transport_op;
  double premultiply = 1.0; // PREMUL_SUM
  bool average = false;     // AVG: SUM, then divide by the group size
};

Reduction plan_reduction(const std::string& op, const c10d::ReduceOp& reduce_op) {
  switch (reduce_op.op_) {
    case RedOp::SUM:
    case RedOp::PRODUCT:
    case RedOp::MIN:
    case RedOp::MAX:
      return {reduce_op.op_};
    case RedOp::AVG:
      return {RedOp::SUM, 1.0, true};
    case RedOp::PREMUL_SUM: {
      // NCCLPreMulSumSupplement: the name torch 2.11 has (2.13 keeps it as an alias).
      auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(reduce_op.supplement_.get());
      TORCH_CHECK_VALUE(supplement != nullptr, "myccl: ", op, ": PREMUL_SUM without its factor");
      const double factor = supplement->tensor_factor.defined() ? supplement->tensor_factor.item<double>()
                                                                 : supplement->double_factor;
      return {RedOp::SUM, factor, false};
    }
    default:
      TORCH_CHECK_VALUE(
          false, "myccl: ", op, " does not support this reduce op; it supports SUM, AVG, PRODUCT, MIN, MAX and "
          "PREMUL_SUM");
  }
}

// The transport Works of a coalesced call, waited for together.
class WorkList final : public c10d::Work {
 public:
  explicit WorkList(std::vector<c10::intrusive_ptr<c10d::Work>> works) : works_(std::move(works)) {}
  bool isCompleted() override {
    for (auto& w : works_) {
      if (!w->isCompleted()) {
        return false;
      }
    }
    return true;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : works_) {
      w->wait(timeout);
    }
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

void divide_by(at::Tensor& t, int size) {
  if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
    t.div_(size);
  } else {
    t.div_(size, "trunc");
  }
}

} // namespace

// The buffers of one operation, on the transport's side.
//
// Host addressable: buffers are host aliases of the tensors (no copies);
// packing several tensors into one buffer copies on the host. Otherwise:
// pinned staging buffers, filled with async device-to-host copies before the
// transport starts and written back with async host-to-device copies on the
// communication stream after it finished.
class MycclBackend::Exchange {
 public:
  // comm: the device's communication stream; none for CPU tensors.
  Exchange(c10::Device device, std::optional<c10::Stream> comm)
      : device_(device.index()), comm_(comm), host_(device.is_cpu()), alias_(host_ || host_addressable()) {}

  std::optional<c10::Stream> comm_stream() const {
    return comm_;
  }

  // The buffer for `t`; `read`: the transport reads it; `write`: it writes it.
  at::Tensor buffer(const at::Tensor& t, bool read, bool write) {
    if (alias_) {
      return host_ ? t : host_alias(t);
    }
    at::Tensor host = pinned(t.sizes(), t);
    if (read) {
      stage_in_.push_back({host, t});
    }
    if (write) {
      stage_out_.push_back({host, t});
    }
    return host;
  }

  // One flat buffer holding `parts` back to back, read by the transport.
  at::Tensor packed_input(const std::vector<at::Tensor>& parts) {
    at::Tensor flat = flat_buffer(parts);
    int64_t offset = 0;
    for (const auto& p : parts) {
      stage_in_.push_back({flat.narrow(0, offset, p.numel()), p});
      offset += p.numel();
    }
    return flat;
  }

  // One flat buffer whose consecutive chunks go back into `parts`.
  at::Tensor packed_output(const std::vector<at::Tensor>& parts) {
    at::Tensor flat = flat_buffer(parts);
    int64_t offset = 0;
    for (const auto& p : parts) {
      stage_out_.push_back({flat.narrow(0, offset, p.numel()), p});
      offset += p.numel();
    }
    return flat;
  }

  // Before the transport starts: the device work producing the tensors
  // (queued on the current stream) has finished and the buffers are filled.
  void ready() {
    if (alias_) {
      if (!host_) {
        wait_current_stream(device_); // no runtime call when the stream is idle
      }
      for (auto& [host, dev] : stage_in_) {
        host.copy_(on_host(dev).reshape({-1}));
      }
    } else {
      const c10::Stream current = current_stream(device_);
      for (auto& [host, dev] : stage_in_) {
        memcpy_async(host.data_ptr(), dev.const_data_ptr(), dev.nbytes(), KPDR_MEMCPY_DEVICE_TO_HOST, current);
      }
      // Also orders the write-backs (comm stream) after earlier work on the outputs.
      synchronize_stream(current);
    }
    stage_in_.clear();
  }

  // After the transport finished, with the communication stream current.
  void write_back() {
    for (auto& [host, dev] : stage_out_) {
      if (alias_) {
        on_host(dev).reshape({-1}).copy_(host.reshape({-1}));
      } else {
        memcpy_async(dev.data_ptr(), host.const_data_ptr(), dev.nbytes(), KPDR_MEMCPY_HOST_TO_DEVICE, *comm_);
        const c10::DataPtr& dp = host.storage().data_ptr();
        host_allocator()->record_event(dp.get(), dp.get_context(), *comm_);
      }
    }
    stage_out_.clear();
  }

 private:
  at::Tensor on_host(const at::Tensor& t) const {
    return host_ ? t : host_alias(t);
  }

  at::Tensor pinned(c10::IntArrayRef sizes, const at::Tensor& like) {
    auto options = like.options().device(c10::kCPU);
    if (alias_) {
      return at::empty(sizes, options);
    }
    c10::DataPtr dp = host_allocator()->allocate(c10::multiply_integers(sizes) * like.element_size());
    const size_t nbytes = c10::multiply_integers(sizes) * like.element_size();
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(dp), host_allocator(), false);
    return at::empty({0}, options).set_(storage, 0, sizes, c10::contiguous_strides(sizes));
  }

  at::Tensor flat_buffer(const std::vector<at::Tensor>& parts) {
    int64_t total = 0;
    for (const auto& p : parts) {
      total += p.numel();
    }
    return pinned({total}, parts.front());
  }

  const c10::DeviceIndex device_;
  const std::optional<c10::Stream> comm_;
  const bool host_;  // CPU tensors: already host memory
  const bool alias_; // the transport works on the tensors' own memory
  std::vector<std::pair<at::Tensor, at::Tensor>> stage_in_;  // (host, device)
  std::vector<std::pair<at::Tensor, at::Tensor>> stage_out_; // (host, device)
};

MycclBackend::MycclBackend(
    int rank, int size, std::unique_ptr<Transport> transport, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), transport_(std::move(transport)), timeout_(timeout) {
  TORCH_CHECK(transport_ != nullptr, "myccl: a backend needs a transport");
}

MycclBackend::~MycclBackend() {
  stop_completion_thread();
}

void MycclBackend::stop_completion_thread() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(completion_mutex_);
    stopping_ = true;
    thread = std::move(completion_thread_);
  }
  completion_cv_.notify_all();
  if (thread.joinable()) {
    thread.join();
  }
}

void MycclBackend::shutdown() {
  if (shut_down_.exchange(true)) {
    return;
  }
  // The joins below wait for threads that may need the GIL (to release a
  // finished operation's tensors): let go of it meanwhile if this thread has it.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  try {
    stop_completion_thread();
    transport_->shutdown();
  } catch (...) {
    if (saved != nullptr) {
      PyEval_RestoreThread(saved);
    }
    throw;
  }
  if (saved != nullptr) {
    PyEval_RestoreThread(saved);
  }
}

void MycclBackend::enqueue_completion(c10::intrusive_ptr<MycclWork> work) {
  {
    std::lock_guard<std::mutex> lock(completion_mutex_);
    if (!stopping_) {
      if (!completion_thread_.joinable()) {
        completion_thread_ = std::thread([this] { run_completions(); });
      }
      background_completion_started();
      completions_.push_back(std::move(work));
      completion_cv_.notify_one();
      return;
    }
  }
  work->finish(); // shut down meanwhile: complete here rather than never
}

void MycclBackend::run_completions() {
  for (;;) {
    c10::intrusive_ptr<MycclWork> work;
    {
      std::unique_lock<std::mutex> lock(completion_mutex_);
      completion_cv_.wait(lock, [this] { return stopping_ || !completions_.empty(); });
      if (completions_.empty()) {
        return; // stopping, nothing left
      }
      work = std::move(completions_.front());
      completions_.pop_front();
    }
    work->finish();
    work.reset(); // maybe the last reference: released inside the counted region
    background_completion_finished();
  }
}

std::shared_ptr<MycclBackend::Exchange> MycclBackend::make_exchange(c10::Device device) {
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    last_device_ = device;
  }
  if (device.is_cpu()) {
    return std::make_shared<Exchange>(device, std::nullopt);
  }
  return std::make_shared<Exchange>(device, comm_stream(device.index()));
}

c10::Stream MycclBackend::comm_stream(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(streams_mutex_);
  int64_t& id = comm_stream_ids_.at(device);
  if (id == 0) {
    id = stream_from_pool(device, /*priority=*/0).id();
  }
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::launch(
    c10d::OpType type,
    const std::string& op,
    const std::shared_ptr<Exchange>& exchange,
    const std::function<c10::intrusive_ptr<c10d::Work>()>& start,
    std::function<void()> post,
    std::vector<at::Tensor> outputs,
    bool collective) {
  TORCH_CHECK(
      !shut_down_.load(), "myccl: ", op, " was called after its process group was shut down "
      "(destroy_process_group()); create a new group with init_process_group() or new_group()");
  exchange->ready();
  sequence_number_.fetch_add(1);
  c10::intrusive_ptr<c10d::Work> transport_work;
  try {
    transport_work = start();
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "myccl: ", op, " could not start on transport ", transport_->name(), ": ", e.what_without_backtrace());
  }
  auto epilogue = [exchange, post = std::move(post), outputs = std::move(outputs)]() {
    if (post) {
      post();
    }
    exchange->write_back();
    return outputs;
  };
  auto work = c10::make_intrusive<MycclWork>(
      type, c10::str(op, " (rank ", getRank(), " of ", getSize(), ", transport ", transport_->name(), ")"),
      exchange->comm_stream(), std::move(transport_work), std::move(epilogue), collective);
  if (collective && !work->complete_with_transport_future()) {
    enqueue_completion(work);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const std::string op = "all_reduce";
  check_single(op, tensors);
  const auto device = check_tensors(op, tensors);
  const Reduction r = plan_reduction(op, opts.reduceOp);
  auto ex = make_exchange(device);
  at::Tensor buf = ex->buffer(tensors[0], true, true);
  std::function<void()> post;
  if (r.average) {
    post = [buf, n = getSize()]() mutable { divide_by(buf, n); };
  }
  return launch(
      c10d::OpType::ALLREDUCE, op, ex,
      [&]() mutable {
        if (r.premultiply != 1.0) {
          buf.mul_(r.premultiply); // the input is overwritten anyway
        }
        return transport_->allreduce(buf, r.transport_op);
      },
      std::move(post), tensors, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const std::string op = "all_reduce_coalesced";
  const auto device = check_tensors(op, tensors);
  const Reduction r = plan_reduction(op, opts.reduceOp);
  auto ex = make_exchange(device);
  std::vector<at::Tensor> bufs;
  for (const auto& t : tensors) {
    bufs.push_back(ex->buffer(t, true, true));
  }
  std::function<void()> post;
  if (r.average) {
    post = [bufs, n = getSize()]() mutable {
      for (auto& b : bufs) {
        divide_by(b, n);
      }
    };
  }
  return launch(
      c10d::OpType::ALLREDUCE_COALESCED, op, ex,
      [&]() -> c10::intrusive_ptr<c10d::Work> {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (auto& b : bufs) {
          if (r.premultiply != 1.0) {
            b.mul_(r.premultiply);
          }
          works.push_back(transport_->allreduce(b, r.transport_op));
        }
        return c10::make_intrusive<WorkList>(std::move(works));
      },
      std::move(post), tensors, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& /*opts*/) {
  const std::string op = "all_gather_into_tensor_coalesced";
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(), "myccl: ", op, ": got ", inputs.size(), " inputs but ", outputs.size(),
      " outputs");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  const auto device = check_tensors(op, all);
  auto ex = make_exchange(device);
  std::vector<at::Tensor> ins;
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(
        outputs[i].numel() == inputs[i].numel() * getSize() && outputs[i].scalar_type() == inputs[i].scalar_type(),
        "myccl: ", op, ": output ", i, " must have world size (", getSize(), ") x the elements of input ", i,
        " and its dtype");
    ins.push_back(ex->buffer(inputs[i], true, false));
    outs.push_back(ex->buffer(outputs[i], false, true));
  }
  return launch(
      c10d::OpType::COALESCED, op, ex,
      [&]() -> c10::intrusive_ptr<c10d::Work> {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (size_t i = 0; i < ins.size(); ++i) {
          works.push_back(transport_->allgather(outs[i], ins[i]));
        }
        return c10::make_intrusive<WorkList>(std::move(works));
      },
      nullptr, outputs, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(), "myccl: ", op, ": got ", inputs.size(), " inputs but ", outputs.size(),
      " outputs");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  const auto device = check_tensors(op, all);
  const Reduction r = plan_reduction(op, opts.reduceOp);
  auto ex = make_exchange(device);
  std::vector<at::Tensor> ins;
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(
        inputs[i].numel() == outputs[i].numel() * getSize() && outputs[i].scalar_type() == inputs[i].scalar_type(),
        "myccl: ", op, ": input ", i, " must have world size (", getSize(), ") x the elements of output ", i,
        " and its dtype");
    ins.push_back(ex->buffer(inputs[i], true, false));
    outs.push_back(ex->buffer(outputs[i], false, true));
  }
  std::function<void()> post;
  if (r.average) {
    post = [outs, n = getSize()]() mutable {
      for (auto& o : outs) {
        divide_by(o, n);
      }
    };
  }
  return launch(
      c10d::OpType::COALESCED, op, ex,
      [&]() -> c10::intrusive_ptr<c10d::Work> {
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (size_t i = 0; i < ins.size(); ++i) {
          if (r.premultiply != 1.0) {
            ins[i] = ins[i].mul(r.premultiply); // a copy: inputs stay unchanged
          }
          works.push_back(transport_->reduce_scatter(outs[i], ins[i], r.transport_op));
        }
        return c10::make_intrusive<WorkList>(std::move(works));
      },
      std::move(post), outputs, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const std::string op = "broadcast";
  check_single(op, tensors);
  const auto device = check_tensors(op, tensors);
  check_root(op, opts.rootRank, getSize());
  const int root = static_cast<int>(opts.rootRank);
  auto ex = make_exchange(device);
  const bool is_root = getRank() == root;
  at::Tensor buf = ex->buffer(tensors[0], is_root, !is_root);
  return launch(
      c10d::OpType::BROADCAST, op, ex, [&] { return transport_->broadcast(buf, root); }, nullptr, tensors, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const std::string op = "reduce";
  check_single(op, tensors);
  const auto device = check_tensors(op, tensors);
  check_root(op, opts.rootRank, getSize());
  const int root = static_cast<int>(opts.rootRank);
  const Reduction r = plan_reduction(op, opts.reduceOp);
  auto ex = make_exchange(device);
  const bool is_root = getRank() == root;
  at::Tensor buf = ex->buffer(tensors[0], true, is_root);
  std::function<void()> post;
  if (r.average && is_root) {
    post = [buf, n = getSize()]() mutable { divide_by(buf, n); };
  }
  return launch(
      c10d::OpType::REDUCE, op, ex,
      [&]() mutable {
        if (!is_root) {
          // The transport may use non-root buffers as scratch; the caller's
          // input stays unchanged, as with NCCL.
          buf = buf.clone();
        }
        if (r.premultiply != 1.0) {
          buf.mul_(r.premultiply);
        }
        return transport_->reduce(buf, root, r.transport_op);
      },
      std::move(post), tensors, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  const std::string op = "all_gather_into_tensor";
  const auto device = check_tensors(op, {input, output});
  TORCH_CHECK_VALUE(
      output.scalar_type() == input.scalar_type(), "myccl: ", op, ": output dtype ", output.scalar_type(),
      " differs from input dtype ", input.scalar_type());
  TORCH_CHECK_VALUE(
      output.numel() == input.numel() * getSize(), "myccl: ", op, ": the output has ", output.numel(),
      " elements but must have world size (", getSize(), ") x input elements (", input.numel(), ") = ",
      input.numel() * getSize());
  auto ex = make_exchange(device);
  at::Tensor in = ex->buffer(input, true, false);
  at::Tensor out = ex->buffer(output, false, true);
  return launch(
      c10d::OpType::_ALLGATHER_BASE, op, ex, [&] { return transport_->allgather(out, in); }, nullptr, {output},
      true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const std::string op = "all_gather";
  check_single(op, inputs);
  TORCH_CHECK_VALUE(outputs.size() == 1, "myccl: ", op, " takes one output list per process, got ", outputs.size());
  auto& outs = outputs[0];
  TORCH_CHECK_VALUE(
      static_cast<int>(outs.size()) == getSize(), "myccl: ", op, ": the output list has ", outs.size(),
      " tensors but the group has ", getSize(), " ranks");
  std::vector<at::Tensor> all = outs;
  all.push_back(inputs[0]);
  const auto device = check_tensors(op, all);
  for (const auto& o : outs) {
    check_same(op, inputs[0], o, "an output tensor");
  }
  auto ex = make_exchange(device);
  at::Tensor in = ex->buffer(inputs[0], true, false);
  at::Tensor out = ex->packed_output(outs);
  return launch(
      c10d::OpType::ALLGATHER, op, ex, [&] { return transport_->allgather(out, in); }, nullptr, outs, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter_tensor";
  const auto device = check_tensors(op, {input, output});
  TORCH_CHECK_VALUE(
      output.scalar_type() == input.scalar_type(), "myccl: ", op, ": output dtype ", output.scalar_type(),
      " differs from input dtype ", input.scalar_type());
  TORCH_CHECK_VALUE(
      input.numel() == output.numel() * getSize(), "myccl: ", op, ": the input has ", input.numel(),
      " elements but must have world size (", getSize(), ") x output elements (", output.numel(), ") = ",
      output.numel() * getSize());
  const Reduction r = plan_reduction(op, opts.reduceOp);
  auto ex = make_exchange(device);
  at::Tensor in = ex->buffer(input, true, false);
  at::Tensor out = ex->buffer(output, false, true);
  std::function<void()> post;
  if (r.average) {
    post = [out, n = getSize()]() mutable { divide_by(out, n); };
  }
  return launch(
      c10d::OpType::_REDUCE_SCATTER_BASE, op, ex,
      [&]() mutable {
        if (r.premultiply != 1.0) {
          in = in.mul(r.premultiply); // a copy: the input must stay unchanged
        }
        return transport_->reduce_scatter(out, in, r.transport_op);
      },
      std::move(post), {output}, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter";
  check_single(op, outputs);
  TORCH_CHECK_VALUE(inputs.size() == 1, "myccl: ", op, " takes one input list per process, got ", inputs.size());
  auto& ins = inputs[0];
  TORCH_CHECK_VALUE(
      static_cast<int>(ins.size()) == getSize(), "myccl: ", op, ": the input list has ", ins.size(),
      " tensors but the group has ", getSize(), " ranks");
  std::vector<at::Tensor> all = ins;
  all.push_back(outputs[0]);
  const auto device = check_tensors(op, all);
  for (const auto& i : ins) {
    check_same(op, outputs[0], i, "an input tensor");
  }
  const Reduction r = plan_reduction(op, opts.reduceOp);
  auto ex = make_exchange(device);
  at::Tensor in = ex->packed_input(ins);
  at::Tensor out = ex->buffer(outputs[0], false, true);
  std::function<void()> post;
  if (r.average) {
    post = [out, n = getSize()]() mutable { divide_by(out, n); };
  }
  return launch(
      c10d::OpType::REDUCE_SCATTER, op, ex,
      [&]() mutable {
        if (r.premultiply != 1.0) {
          in.mul_(r.premultiply); // `in` is myccl's own packed buffer
        }
        at::Tensor out_flat = out.reshape({-1});
        return transport_->reduce_scatter(out_flat, in, r.transport_op);
      },
      std::move(post), outputs, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
    const c10d::AllToAllOptions& /*opts*/) {
  const std::string op = "all_to_all_single";
  const auto device = check_tensors(op, {input, output});
  TORCH_CHECK_VALUE(
      output.scalar_type() == input.scalar_type(), "myccl: ", op, ": output dtype ", output.scalar_type(),
      " differs from input dtype ", input.scalar_type());
  for (auto* splits : {&output_splits, &input_splits}) {
    TORCH_CHECK_VALUE(
        splits->empty() || static_cast<int>(splits->size()) == getSize(), "myccl: ", op, ": ",
        splits == &output_splits ? "output" : "input", "_split_sizes has ", splits->size(),
        " entries but the group has ", getSize(), " ranks");
  }
  auto ex = make_exchange(device);
  at::Tensor in = ex->buffer(input, true, false);
  at::Tensor out = ex->buffer(output, false, true);
  return launch(
      c10d::OpType::ALLTOALL_BASE, op, ex,
      [&] { return transport_->alltoall(out, in, output_splits, input_splits); }, nullptr, {output}, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& /*opts*/) {
  const std::string op = "all_to_all";
  TORCH_CHECK_VALUE(
      static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(), "myccl: ", op,
      " needs one input and one output tensor per rank (", getSize(), "), got ", inputs.size(), " and ",
      outputs.size());
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  const auto device = check_tensors(op, all);
  std::vector<int64_t> out_splits;
  std::vector<int64_t> in_splits;
  for (int i = 0; i < getSize(); ++i) {
    TORCH_CHECK_VALUE(
        outputs[i].scalar_type() == inputs[0].scalar_type() && inputs[i].scalar_type() == inputs[0].scalar_type(),
        "myccl: ", op, ": all tensors must have one dtype");
    out_splits.push_back(outputs[i].numel());
    in_splits.push_back(inputs[i].numel());
  }
  auto ex = make_exchange(device);
  at::Tensor in = ex->packed_input(inputs);
  at::Tensor out = ex->packed_output(outputs);
  return launch(
      c10d::OpType::ALLTOALL, op, ex, [&] { return transport_->alltoall(out, in, out_splits, in_splits); }, nullptr,
      outputs, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const std::string op = "gather";
  check_single(op, inputs);
  check_root(op, opts.rootRank, getSize());
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs = root_list(op, outputs, "gather_list", root, getRank(), getSize());
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outs.begin(), outs.end());
  const auto device = check_tensors(op, all);
  for (const auto& o : outs) {
    check_same(op, inputs[0], o, "a gather_list tensor");
  }
  auto ex = make_exchange(device);
  at::Tensor in = ex->buffer(inputs[0], true, false);
  std::vector<at::Tensor> out_bufs;
  for (const auto& o : outs) {
    out_bufs.push_back(ex->buffer(o, false, true));
  }
  return launch(
      c10d::OpType::GATHER, op, ex, [&] { return transport_->gather(out_bufs, in, root); }, nullptr, outs, true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs, const c10d::ScatterOptions& opts) {
  const std::string op = "scatter";
  check_single(op, outputs);
  check_root(op, opts.rootRank, getSize());
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins = root_list(op, inputs, "scatter_list", root, getRank(), getSize());
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), ins.begin(), ins.end());
  const auto device = check_tensors(op, all);
  for (const auto& i : ins) {
    check_same(op, outputs[0], i, "a scatter_list tensor");
  }
  auto ex = make_exchange(device);
  at::Tensor out = ex->buffer(outputs[0], false, true);
  std::vector<at::Tensor> in_bufs;
  for (const auto& i : ins) {
    in_bufs.push_back(ex->buffer(i, true, false));
  }
  return launch(
      c10d::OpType::SCATTER, op, ex, [&] { return transport_->scatter(out, in_bufs, root); }, nullptr, outputs,
      true);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const std::string op = "send";
  check_single(op, tensors);
  const auto device = check_tensors(op, tensors);
  check_root(op, dst, getSize());
  auto ex = make_exchange(device);
  at::Tensor buf = ex->buffer(tensors[0], true, false);
  return launch(
      c10d::OpType::SEND, op, ex, [&] { return transport_->send(buf, dst, tag); }, nullptr, tensors, false);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const std::string op = "recv";
  check_single(op, tensors);
  const auto device = check_tensors(op, tensors);
  check_root(op, src, getSize());
  auto ex = make_exchange(device);
  at::Tensor buf = ex->buffer(tensors[0], false, true);
  return launch(
      c10d::OpType::RECV, op, ex, [&] { return transport_->recv(buf, src, tag); }, nullptr, tensors, false);
}

c10::intrusive_ptr<c10d::Work> MycclBackend::barrier(const c10d::BarrierOptions& opts) {
  // The device of the caller's latest operation (CPU before any): a barrier
  // orders nothing on a device, but its Work's future needs one.
  c10::Device device = c10::kCPU;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    device = last_device_;
  }
  if (opts.device.has_value() && opts.device->type() == c10::DeviceType::PrivateUse1 && opts.device->has_index()) {
    device = *opts.device;
  }
  auto ex = make_exchange(device);
  return launch(c10d::OpType::BARRIER, "barrier", ex, [&] { return transport_->barrier(); }, nullptr, {}, true);
}

} // namespace kernel_pytorch::distributed

#include "gloo_transport.h"

#include <mutex>

namespace kernel_pytorch::distributed {
namespace {

class GlooTransport final : public Transport {
 public:
  explicit GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo) : gloo_(std::move(gloo)) {}

  std::string name() const override {
    return "gloo";
  }
  BufferKind buffer_kind() const override {
    return BufferKind::kHost;
  }

  WorkPtr allreduce(at::Tensor& buffer, c10d::ReduceOp::RedOpType op) override {
    std::vector<at::Tensor> tensors{buffer};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp(op);
    return backend()->allreduce(tensors, opts);
  }

  WorkPtr broadcast(at::Tensor& buffer, int root) override {
    std::vector<at::Tensor> tensors{buffer};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    return backend()->broadcast(tensors, opts);
  }

  WorkPtr reduce(at::Tensor& buffer, int root, c10d::ReduceOp::RedOpType op) override {
    std::vector<at::Tensor> tensors{buffer};
    c10d::ReduceOptions opts;
    opts.rootRank = root;
    opts.reduceOp = c10d::ReduceOp(op);
    return backend()->reduce(tensors, opts);
  }

  WorkPtr allgather(at::Tensor& output, at::Tensor& input) override {
    return backend()->_allgather_base(output, input);
  }

  WorkPtr reduce_scatter(at::Tensor& output, at::Tensor& input, c10d::ReduceOp::RedOpType op) override {
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = c10d::ReduceOp(op);
    return backend()->_reduce_scatter_base(output, input, opts);
  }

  WorkPtr alltoall(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits) override {
    return backend()->alltoall_base(output, input, output_splits, input_splits);
  }

  WorkPtr gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) override {
    std::vector<std::vector<at::Tensor>> out;
    if (!outputs.empty()) {
      out.push_back(outputs);
    }
    std::vector<at::Tensor> in{input};
    c10d::GatherOptions opts;
    opts.rootRank = root;
    return backend()->gather(out, in, opts);
  }

  WorkPtr scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) override {
    std::vector<at::Tensor> out{output};
    std::vector<std::vector<at::Tensor>> in;
    if (!inputs.empty()) {
      in.push_back(inputs);
    }
    c10d::ScatterOptions opts;
    opts.rootRank = root;
    return backend()->scatter(out, in, opts);
  }

  WorkPtr send(at::Tensor& buffer, int dst, int tag) override {
    std::vector<at::Tensor> tensors{buffer};
    return backend()->send(tensors, dst, tag);
  }

  WorkPtr recv(at::Tensor& buffer, int src, int tag) override {
    std::vector<at::Tensor> tensors{buffer};
    return backend()->recv(tensors, src, tag);
  }

  WorkPtr barrier() override {
    return backend()->barrier();
  }

  void shutdown() override {
    c10::intrusive_ptr<c10d::Backend> gloo;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gloo = std::move(gloo_);
    }
    if (gloo) {
      gloo->shutdown();
      // Ours is the last reference: ProcessGroupGloo's destructor waits for
      // its queued operations and joins its worker threads.
      gloo.reset();
    }
  }

 private:
  c10::intrusive_ptr<c10d::Backend> backend() {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(gloo_, "myccl: the gloo transport was shut down (destroy_process_group()); "
                "create a new group with init_process_group() or new_group()");
    return gloo_;
  }

  std::mutex mutex_;
  c10::intrusive_ptr<c10d::Backend> gloo_; // guarded by mutex_; null once shut down
};

} // namespace

std::unique_ptr<Transport> make_gloo_transport(c10::intrusive_ptr<c10d::Backend> gloo) {
  TORCH_CHECK(gloo, "myccl: the gloo transport needs a gloo backend, got None");
  return std::make_unique<GlooTransport>(std::move(gloo));
}

} // namespace kernel_pytorch::distributed

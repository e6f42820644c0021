// myccl: the torch.distributed backend for my_asic tensors (a c10d::Backend).
//
// Every operation (1) checks its tensors (my_asic, one device, dense,
// contiguous, matching sizes), (2) gives the transport buffers -- host aliases
// of the device memory when the runtime reports it host addressable (no
// copies), else staging copies in pinned host memory moved with the runtime's
// async copies -- (3) starts the transport and (4) returns a MycclWork whose
// epilogue writes results back on the backend's communication stream.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>

#include "myccl_work.h"
#include "transport.h"

namespace kernel_pytorch::distributed {

class MycclBackend final : public c10d::Backend {
 public:
  MycclBackend(int rank, int size, std::unique_ptr<Transport> transport, std::chrono::milliseconds timeout);
  // Finishes the collectives still in flight (each ends by the transport's
  // timeout at the latest), then stops the completion thread.
  ~MycclBackend() override;

  // destroy_process_group() calls it (through c10d's ProcessGroup::shutdown)
  // even when something still holds the group (torch._dynamo does, once
  // imported): finishes the operations in flight, stops the completion
  // thread and shuts the transport down (for gloo: its worker threads end).
  // Later operations raise. Idempotent.
  void shutdown() override;

  const std::string getBackendName() const override {
    return "myccl";
  }
  std::string transport_name() const {
    return transport_->name();
  }
  std::chrono::milliseconds timeout() const {
    return timeout_;
  }

  // Counts the operations issued on this backend. Every rank creates the
  // backend together and issues the same operations, so the counts agree
  // across ranks without a store round trip (ProcessGroupWrapper, i.e.
  // TORCH_DISTRIBUTED_DEBUG=DETAIL, compares them).
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override {
    return sequence_number_.load();
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // The stream myccl's device-side epilogues run on (one per device).
  c10::Stream comm_stream(c10::DeviceIndex device);

 private:
  class Exchange;
  std::shared_ptr<Exchange> make_exchange(c10::Device device);
  c10::intrusive_ptr<c10d::Work> launch(
      c10d::OpType type,
      const std::string& op,
      const std::shared_ptr<Exchange>& exchange,
      const std::function<c10::intrusive_ptr<c10d::Work>()>& start,
      std::function<void()> post,
      std::vector<at::Tensor> outputs,
      bool collective);

  void enqueue_completion(c10::intrusive_ptr<MycclWork> work);
  void run_completions();
  void stop_completion_thread();

  std::unique_ptr<Transport> transport_;
  std::atomic<uint64_t> sequence_number_{0};
  // Collectives whose transport Work has no future complete in issue order
  // on one thread per backend, which waits for the transport and runs
  // myccl's epilogue (the others complete from the transport's callback).
  std::mutex completion_mutex_;
  std::condition_variable completion_cv_;
  std::deque<c10::intrusive_ptr<MycclWork>> completions_; // guarded by completion_mutex_
  bool stopping_ = false;                                  // guarded by completion_mutex_
  std::atomic<bool> shut_down_{false};
  std::thread completion_thread_;
  const std::chrono::milliseconds timeout_;
  std::mutex streams_mutex_;
  std::array<int64_t, 64> comm_stream_ids_{}; // 0: not created yet
  c10::Device last_device_ = c10::kCPU;        // guarded by streams_mutex_; barrier's device
};

} // namespace kernel_pytorch::distributed

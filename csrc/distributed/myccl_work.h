// The Work object myccl returns for every operation.
//
// Completion has two halves: the transport finishing (for gloo: on the host),
// then myccl's epilogue (AVG's division, copies from staging buffers back to
// the device on the backend's communication stream). The epilogue completes a
// c10::ivalue::Future bound to the my_asic device, which records an event on
// the communication stream; wait() (and the future's wait()) then make the
// caller's current stream wait on that event instead of blocking the host for
// the device copies -- the same contract as ProcessGroupNCCL's Work.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <optional>
#include <string>

namespace kernel_pytorch::distributed {

class MycclWork final : public c10d::Work {
 public:
  // epilogue: runs once the transport succeeded, with the communication
  // stream current; returns the tensors the future completes with.
  using Epilogue = std::function<std::vector<at::Tensor>()>;

  MycclWork(
      c10d::OpType type,
      std::string description,
      std::optional<c10::Stream> comm_stream, // none for CPU tensors
      c10::intrusive_ptr<c10d::Work> transport_work,
      Epilogue epilogue,
      bool complete_in_background);

  bool completes_in_background() const {
    return complete_in_background_;
  }

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Waits for the transport, runs the epilogue and completes (or fails) the
  // future; idempotent. Called by wait() and, for collectives, by the
  // backend's completion thread.
  void finish(std::chrono::milliseconds timeout = kNoTimeout);

  // Completes the work from the transport Work's future callback, on the
  // transport's own thread (no extra thread hop). False when the transport
  // Work has no future; the backend's completion thread finishes it then.
  bool complete_with_transport_future();

 private:
  // Runs the epilogue and completes (or fails) the future; idempotent.
  void complete(std::exception_ptr transport_error);

  const std::string description_;
  const std::optional<c10::Stream> comm_stream_;
  c10::intrusive_ptr<c10d::Work> transport_work_;
  Epilogue epilogue_;
  const bool complete_in_background_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex completion_mutex_;
  bool completed_ = false; // guarded by completion_mutex_
};

// Completions running on threads myccl does not own (the transport's) or on
// its completion threads, counted process-wide. Such a thread may drop the
// last reference to a work's output tensors, and releasing a tensor whose
// Python object it keeps alive takes the GIL: once the interpreter is
// finalising, CPython ends that thread mid-unwind and the process aborts
// ("terminate called without an active exception"). The exit hook
// (kernel_pytorch/asic/distributed.py) waits for the count to reach zero
// before finalisation starts.
void background_completion_started();
void background_completion_finished();
// True when none is running; waits at most `timeout` (call without the GIL).
bool wait_for_background_completions(std::chrono::milliseconds timeout);

} // namespace kernel_pytorch::distributed

#include "myccl_work.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/core.h"

namespace kernel_pytorch::distributed {
namespace {

std::mutex background_mutex;
std::condition_variable background_idle;
int64_t background_running = 0; // guarded by background_mutex

// Marks the end of a counted completion when it goes out of scope.
struct BackgroundCompletion {
  BackgroundCompletion() = default;
  BackgroundCompletion(const BackgroundCompletion&) = delete;
  BackgroundCompletion& operator=(const BackgroundCompletion&) = delete;
  ~BackgroundCompletion() {
    background_completion_finished();
  }
};

std::exception_ptr annotate(const std::string& description, std::exception_ptr error) {
  auto wrap = [&](const char* what) {
    return std::make_exception_ptr(c10::DistBackendError(
        c10::SourceLocation{__func__, __FILE__, __LINE__}, c10::str("myccl: ", description, " failed: ", what)));
  };
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return wrap(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return wrap(e.what());
  } catch (...) {
    return error;
  }
}

} // namespace

MycclWork::MycclWork(
    c10d::OpType type,
    std::string description,
    std::optional<c10::Stream> comm_stream,
    c10::intrusive_ptr<c10d::Work> transport_work,
    Epilogue epilogue,
    bool complete_in_background)
    : c10d::Work(-1, type),
      description_(std::move(description)),
      comm_stream_(comm_stream),
      transport_work_(std::move(transport_work)),
      epilogue_(std::move(epilogue)),
      complete_in_background_(complete_in_background),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          comm_stream ? std::vector<c10::Device>{comm_stream->device()} : std::vector<c10::Device>{})) {}

void MycclWork::finish(std::chrono::milliseconds timeout) {
  c10::intrusive_ptr<c10d::Work> w;
  {
    std::lock_guard<std::mutex> lock(completion_mutex_);
    if (completed_) {
      return;
    }
    w = transport_work_;
  }
  std::exception_ptr error;
  try {
    w->wait(timeout);
  } catch (...) {
    error = std::current_exception();
  }
  complete(error);
}

bool MycclWork::complete_with_transport_future() {
  c10::intrusive_ptr<c10::ivalue::Future> transport_future;
  try {
    transport_future = transport_work_->getFuture();
  } catch (const c10::Error&) {
    return false; // e.g. gloo's _reduce_scatter_base
  }
  if (!transport_future) {
    return false;
  }
  // The callback owns the work until the transport finishes, and lets go of
  // it (maybe the last reference) inside the counted region; the future
  // drops the emptied callback afterwards. No reference cycle outlives the
  // operation.
  auto holder = std::make_shared<c10::intrusive_ptr<MycclWork>>(c10::intrusive_ptr<MycclWork>::reclaim_copy(this));
  background_completion_started();
  transport_future->addCallback([holder](c10::ivalue::Future& done) {
    if (!*holder) {
      return;
    }
    BackgroundCompletion counted; // ends after `self` is released (reverse declaration order)
    c10::intrusive_ptr<MycclWork> self = std::move(*holder);
    self->complete(done.hasError() ? done.exception_ptr() : nullptr);
  });
  return true;
}

void MycclWork::complete(std::exception_ptr transport_error) {
  std::lock_guard<std::mutex> lock(completion_mutex_);
  if (completed_) {
    return;
  }
  completed_ = true;
  if (transport_error) {
    future_->setError(annotate(description_, transport_error));
  } else {
    // The epilogue's device work and the future's completion event go on
    // the communication stream, whatever thread the transport finished on.
    std::optional<c10::Stream> previous;
    if (comm_stream_) {
      previous = exchange_current_stream(*comm_stream_);
    }
    try {
      future_->markCompleted(c10::IValue(epilogue_()));
    } catch (...) {
      future_->setError(annotate(description_, std::current_exception()));
    }
    if (previous) {
      exchange_current_stream(*previous);
    }
  }
  epilogue_ = nullptr; // drops the buffers it holds
  transport_work_.reset();
}

bool MycclWork::isCompleted() {
  if (!complete_in_background_) {
    // Point-to-point: finish here once the transport has, not only in wait().
    c10::intrusive_ptr<c10d::Work> w;
    {
      std::lock_guard<std::mutex> lock(completion_mutex_);
      if (!completed_) {
        w = transport_work_;
      }
    }
    if (w && w->isCompleted()) {
      complete(w->exception());
    }
  }
  return future_->completed();
}

bool MycclWork::isSuccess() const {
  return future_->completed() && !future_->hasError();
}

std::exception_ptr MycclWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

bool MycclWork::wait(std::chrono::milliseconds timeout) {
  if (!complete_in_background_) {
    finish(timeout); // point-to-point: completes on the waiting thread, as gloo's do
  } else if (timeout != kNoTimeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!future_->completed()) {
      TORCH_CHECK_WITH(
          DistBackendError, std::chrono::steady_clock::now() < deadline, "myccl: ", description_,
          " did not finish within ", timeout.count(), " ms");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Blocks for the transport, then orders the current stream after the
  // epilogue's device work through the future's events (no host sync).
  future_->wait();
  if (future_->hasError()) {
    std::rethrow_exception(future_->exception_ptr());
  }
  return true;
}

void MycclWork::synchronize() {
  wait(kNoTimeout);
}

std::vector<at::Tensor> MycclWork::result() {
  wait(kNoTimeout);
  return future_->value().toTensorVector();
}

c10::intrusive_ptr<c10::ivalue::Future> MycclWork::getFuture() {
  TORCH_CHECK(
      complete_in_background_, "myccl: ", description_,
      " has no future (point-to-point work completes in wait(), as with gloo)");
  return future_;
}

void background_completion_started() {
  std::lock_guard<std::mutex> lock(background_mutex);
  ++background_running;
}

void background_completion_finished() {
  std::lock_guard<std::mutex> lock(background_mutex);
  if (--background_running == 0) {
    background_idle.notify_all();
  }
}

bool wait_for_background_completions(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(background_mutex);
  return background_idle.wait_for(lock, timeout, [] { return background_running == 0; });
}

} // namespace kernel_pytorch::distributed

// The transport under myccl: the one place a chip team puts its own
// collective library (the role NCCL plays for CUDA).
//
// myccl (myccl_backend.h) does everything device specific -- argument checks,
// ordering against my_asic streams, host aliases or staging copies, AVG and
// PREMUL_SUM, Work objects -- and hands the transport plain buffers:
//
//  * BufferKind::kHost: CPU tensors. They alias device memory when the
//    runtime says it is host addressable, else they are staging copies.
//    GlooTransport (gloo_transport.h) is this kind.
//  * BufferKind::kDevice: my_asic tensors, for a library that moves device
//    memory itself (DMA, a chip-to-chip fabric).
//
// Contract: every call is made in the same order on every rank of the group
// (as with any c10d backend), starts the operation and returns without
// waiting. The returned Work's wait() blocks until the buffers may be read
// and throws a c10::Error on failure or when the group's timeout passes (a
// dead peer must not hang). Works of collectives must also complete their
// getFuture(); point-to-point Works need only wait(). Reductions get SUM,
// PRODUCT, MIN or MAX only (myccl derives AVG and PREMUL_SUM from SUM).
// Buffers are dense and contiguous.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kernel_pytorch::distributed {

enum class BufferKind { kHost, kDevice };

class Transport {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  virtual ~Transport() = default;

  // Shown in error messages ("gloo").
  virtual std::string name() const = 0;
  virtual BufferKind buffer_kind() const = 0;

  // In place on `buffer`.
  virtual WorkPtr allreduce(at::Tensor& buffer, c10d::ReduceOp::RedOpType op) = 0;
  virtual WorkPtr broadcast(at::Tensor& buffer, int root) = 0;
  // The result lands in `buffer` on `root` only.
  virtual WorkPtr reduce(at::Tensor& buffer, int root, c10d::ReduceOp::RedOpType op) = 0;
  // output = the inputs of ranks 0..size-1, concatenated (output.numel() == size * input.numel()).
  virtual WorkPtr allgather(at::Tensor& output, at::Tensor& input) = 0;
  // input = size chunks of output's size; rank r gets the reduction of chunk r.
  virtual WorkPtr reduce_scatter(at::Tensor& output, at::Tensor& input, c10d::ReduceOp::RedOpType op) = 0;
  // Chunk i of input (input_splits[i] rows; empty splits = equal) goes to rank i;
  // chunk j of output comes from rank j.
  virtual WorkPtr alltoall(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits) = 0;
  // outputs: one buffer per rank on root, empty elsewhere.
  virtual WorkPtr gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) = 0;
  // inputs: one buffer per rank on root, empty elsewhere.
  virtual WorkPtr scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) = 0;
  virtual WorkPtr send(at::Tensor& buffer, int dst, int tag) = 0;
  virtual WorkPtr recv(at::Tensor& buffer, int src, int tag) = 0;
  virtual WorkPtr barrier() = 0;

  // Called once, when the process group is shut down (destroy_process_group)
  // and myccl has completed its operations: waits for the transport's own
  // operations in flight, then releases its threads and connections. Later
  // calls may raise.
  virtual void shutdown() = 0;
};

} // namespace kernel_pytorch::distributed

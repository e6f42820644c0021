"""Rank programs exercising every myccl collective (run by ranks.py).

Rank r contributes values derived from r, so the tests can state the
expected result of each collective in closed form.
"""

import importlib
import os
from datetime import timedelta

import torch
import torch.distributed as dist

import kernel_pytorch  # noqa: F401  (registers my_asic and myccl)


def init(backend="my_asic:myccl,cpu:gloo", timeout_s=30, **kwargs):
    """Joins the run's process group (file:// rendezvous from ranks.py)."""
    dist.init_process_group(
        backend,
        init_method=os.environ["KP_INIT_METHOD"],
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )


def device():
    """One my_asic device per local rank when there are enough, like CUDA; else my_asic:0."""
    local_rank = int(os.environ["LOCAL_RANK"])
    count = torch.my_asic.device_count()
    return torch.device("my_asic", local_rank if count > local_rank else 0)


def _full(value, n=3, dtype=torch.float32):
    return torch.full((n,), value, dtype=dtype, device=device())


def _list(t):
    assert t.device.type == "my_asic", t.device
    return t.cpu().tolist()


def every_collective(rank, world):
    """Runs each collective once and returns its result on this rank, by name."""
    init()
    dev = device()
    torch.my_asic.set_device(dev)
    out = {"device": str(dev), "backend": dist.get_backend(), "transport_host_addressable":
           torch.my_asic.get_device_properties(dev).host_addressable}

    for name, op in [("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("product", dist.ReduceOp.PRODUCT),
                     ("min", dist.ReduceOp.MIN), ("max", dist.ReduceOp.MAX)]:
        t = _full(float(rank + 1))
        dist.all_reduce(t, op=op)
        out[f"all_reduce_{name}"] = _list(t)
    t = _full(rank + 1, dtype=torch.int64)
    dist.all_reduce(t)
    out["all_reduce_int64_sum"] = _list(t)
    t = _full(rank + 1, dtype=torch.bfloat16)
    dist.all_reduce(t)
    out["all_reduce_bf16_sum"] = _list(t)
    t = _full(float(rank + 1))
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    out["all_reduce_premul_sum_half"] = _list(t)
    big = torch.arange(100_000, dtype=torch.float32, device=dev) * (rank + 1)
    dist.all_reduce(big)
    out["all_reduce_large_checksum"] = float(big.sum().item())

    # async: the work's wait() makes results visible to later device work
    t = _full(float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    out["all_reduce_async_then_compute"] = _list(t * 2)
    t = _full(float(rank + 1))
    fut = dist.all_reduce(t, async_op=True).get_future()
    out["all_reduce_future_value"] = _list(fut.wait()[0])

    side = torch.my_asic.Stream()
    with torch.my_asic.stream(side):
        t = _full(float(rank + 1))
        dist.all_reduce(t, async_op=True).wait()
        out["all_reduce_on_a_side_stream"] = _list(t + 1)

    t = _full(float(rank * 10))
    dist.broadcast(t, src=world - 1)
    out["broadcast_from_last"] = _list(t)

    t = _full(float(rank + 1))
    dist.reduce(t, dst=0)
    out["reduce_to_0"] = _list(t)

    gathered = [torch.empty(2, device=dev) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([rank, -rank], dtype=torch.float32, device=dev))
    out["all_gather"] = [_list(g) for g in gathered]
    flat = torch.empty(2 * world, device=dev)
    dist.all_gather_into_tensor(flat, torch.tensor([rank, -rank], dtype=torch.float32, device=dev))
    out["all_gather_into_tensor"] = _list(flat)

    inputs = [torch.full((2,), float(rank * 100 + i), device=dev) for i in range(world)]
    result = torch.empty(2, device=dev)
    dist.reduce_scatter(result, inputs)
    out["reduce_scatter"] = _list(result)
    stacked = torch.cat(inputs)
    result = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(result, stacked)
    out["reduce_scatter_tensor"] = _list(result)
    result = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(result, stacked, op=dist.ReduceOp.AVG)
    out["reduce_scatter_tensor_avg"] = _list(result)
    out["reduce_scatter_input_unchanged"] = _list(stacked) == [v for i in range(world) for v in [rank * 100.0 + i] * 2]

    send = [torch.tensor([float(rank * 10 + j)], device=dev) for j in range(world)]
    recv = [torch.empty(1, device=dev) for _ in range(world)]
    dist.all_to_all(recv, send)
    out["all_to_all"] = [_list(r) for r in recv]
    single_in = torch.tensor([float(rank * 10 + j) for j in range(world)], device=dev)
    single_out = torch.empty(world, device=dev)
    dist.all_to_all_single(single_out, single_in)
    out["all_to_all_single"] = _list(single_out)
    # uneven: rank r sends j+1 copies of (10r + j) to rank j
    in_splits = [j + 1 for j in range(world)]
    out_splits = [rank + 1] * world
    uneven_in = torch.cat([torch.full((j + 1,), float(rank * 10 + j), device=dev) for j in range(world)])
    uneven_out = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(uneven_out, uneven_in, out_splits, in_splits)
    out["all_to_all_single_uneven"] = _list(uneven_out)

    gather_list = [torch.empty(2, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.tensor([rank, rank * rank], dtype=torch.float32, device=dev), gather_list, dst=0)
    out["gather_to_0"] = [_list(g) for g in gather_list] if rank == 0 else None

    scatter_list = [torch.full((2,), float(i * 7), device=dev) for i in range(world)] if rank == 0 else None
    got = torch.empty(2, device=dev)
    dist.scatter(got, scatter_list, src=0)
    out["scatter_from_0"] = _list(got)

    # ring: send to the next rank, receive from the previous
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    incoming = torch.empty(3, device=dev)
    reqs = [dist.isend(_full(float(rank)), nxt), dist.irecv(incoming, prv)]
    for r in reqs:
        r.wait()
    out["isend_irecv_ring"] = _list(incoming)
    if rank == 0:
        dist.send(_full(42.0), 1)
    elif rank == 1:
        t = torch.empty(3, device=dev)
        dist.recv(t, 0)
        out["send_recv_0_to_1"] = _list(t)

    dist.barrier()
    out["barrier"] = True

    cpu = torch.full((2,), float(rank + 1))
    dist.all_reduce(cpu)
    out["cpu_tensor_through_gloo"] = cpu.tolist()
    dist.destroy_process_group()
    out["gloo_worker_threads_after_destroy"] = _gloo_worker_threads()
    return out


def _gloo_worker_threads():
    """How many of gloo's worker threads ("pt_gloo_runloop") this process still runs; None off Linux.

    A process group that outlives destroy_process_group keeps them, and one of
    them may then drop a finished collective's tensors, which takes the GIL,
    while the interpreter is exiting: CPython ends the thread mid-unwind and
    the process aborts ("terminate called without an active exception").
    """
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    count = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().strip() == "pt_gloo_runloop"
        except OSError:
            continue  # the thread ended meanwhile
    return count


def shutdown_while_something_holds_the_group(rank, world):
    """destroy_process_group() with the group object still referenced (as torch._dynamo does once imported)."""
    init(backend="my_asic:myccl")
    dev = device()
    torch.my_asic.set_device(dev)
    importlib.import_module("torch._dynamo")  # after init: it keeps a reference to the group

    group = dist.group.WORLD
    t = _full(float(rank + 1))
    dist.all_reduce(t)
    dist.destroy_process_group()
    out = {"all_reduce": _list(t), "gloo_worker_threads_after_destroy": _gloo_worker_threads()}
    try:
        group.allreduce([_full(1.0)]).wait()
        out["after_shutdown"] = "no error"
    except RuntimeError as e:
        out["after_shutdown"] = str(e).splitlines()[0]
    out["device_still_usable"] = _list(_full(2.0) * 3)
    return out

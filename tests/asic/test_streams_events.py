"""Streams and events through torch.my_asic, torch.Stream and torch.Event.

Ordering tests run in a subprocess with a throttled copy link
(MY_ASIC_COPY_BANDWIDTH_GBPS), so an asynchronous copy stays observably pending
for a while; they check completion states, never durations.
"""

import pytest
import torch

from device_subprocess import last_line, run_python

pytestmark = pytest.mark.usefixtures("device_count")

# 0.05 GB/s: a 32 MB copy stays in flight for ~0.6 s.
SLOW_LINK = {"MY_ASIC_COPY_BANDWIDTH_GBPS": "0.05"}


def test_new_stream_is_not_the_default_stream():
    assert torch.my_asic.Stream() != torch.my_asic.default_stream()


def test_stream_context_makes_stream_current_and_restores():
    side = torch.my_asic.Stream()
    with torch.my_asic.stream(side):
        assert torch.my_asic.current_stream() == side
    assert torch.my_asic.current_stream() == torch.my_asic.default_stream()


def test_stream_context_switches_to_the_streams_device(two_devices):
    side = torch.my_asic.Stream(device=1)
    with torch.my_asic.stream(side):
        assert torch.my_asic.current_device() == 1
    assert torch.my_asic.current_device() == 0


def test_generic_torch_stream_uses_current_device(two_devices):
    torch.my_asic.set_device(1)
    stream = torch.Stream("my_asic")
    assert stream.device == two_devices[1]


def test_event_completes_after_synchronize():
    event = torch.my_asic.Event()
    event.record()
    event.synchronize()
    assert event.query()


def test_timing_events_measure_non_negative_milliseconds():
    start = torch.my_asic.Event(enable_timing=True)
    end = torch.my_asic.Event(enable_timing=True)
    start.record()
    torch.ones(1000, device="my_asic").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def test_generic_torch_event_records_on_my_asic_stream():
    event = torch.Event("my_asic")
    event.record(torch.my_asic.current_stream())
    event.synchronize()
    assert event.query()


def test_my_asic_event_is_a_torch_event():
    assert isinstance(torch.my_asic.Event(), torch.Event)
    assert isinstance(torch.Event("my_asic"), torch.my_asic.Event)


def test_non_blocking_copy_is_pending_until_synchronize():
    out = run_python(
        """
        import torch, kernel_pytorch
        host = torch.full((8 << 20,), 3.0).pin_memory()  # 32 MB
        device = torch.empty_like(host, device="my_asic")
        device.copy_(host, non_blocking=True)
        pending = not torch.my_asic.current_stream().query()
        torch.my_asic.synchronize()
        done = torch.my_asic.current_stream().query()
        print(pending, done, bool((device.cpu() == 3.0).all()))
        """,
        env=SLOW_LINK,
    )
    assert last_line(out) == "True True True"


def test_stream_waiting_on_event_is_not_done_before_the_events_work():
    out = run_python(
        """
        import torch, kernel_pytorch
        host = torch.full((8 << 20,), 5.0).pin_memory()
        device = torch.empty_like(host, device="my_asic")
        side = torch.my_asic.Stream()
        with torch.my_asic.stream(side):
            device.copy_(host, non_blocking=True)
            copied = side.record_event()
        main = torch.my_asic.current_stream()
        main.wait_event(copied)
        waiting = not main.query()
        result = device.clone()  # ordered after the copy by the wait
        print(waiting, bool((result.cpu() == 5.0).all()))
        """,
        env=SLOW_LINK,
    )
    assert last_line(out) == "True True"


def test_stream_priority_is_reported_like_cuda():
    assert torch.my_asic.Stream().priority == 0
    assert torch.my_asic.Stream(priority=-1).priority == -1
    assert torch.my_asic.default_stream().priority == 0


def test_positive_stream_priority_is_rejected_like_cuda():
    with pytest.raises(ValueError, match="priority to be less than or equal to 0, got 5"):
        torch.my_asic.Stream(priority=5)
    with pytest.raises(ValueError, match="got 3"):
        torch.Stream("my_asic", priority=3)


def test_stream_priority_below_the_highest_is_clamped_like_cuda():
    assert torch.my_asic.Stream(priority=-5).priority == -1


def test_set_stream_with_a_non_stream_says_what_it_expects():
    with pytest.raises(TypeError, match=r"expects a stream .*got int.*torch.my_asic.Stream\(\)"):
        torch.my_asic.set_stream(3)
    assert torch.my_asic.current_stream() == torch.my_asic.default_stream()

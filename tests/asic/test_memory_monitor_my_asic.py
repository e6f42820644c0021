"""MemoryMonitor on my_asic: crossings with hysteresis, seen on the allocation path too.

Each test runs in a fresh process with a 64 MiB device, so fractions of its
memory are a few MiB of tensors.
"""

from device_subprocess import last_line, run_python

SMALL_DEVICE = {"MY_ASIC_MEMORY_MB": "64"}


def test_crossings_fire_once_each_with_hysteresis():
    out = run_python(
        """
        import torch, kernel_pytorch
        from kernel_pytorch.hardware_abstraction import MemoryMonitor
        levels = []
        m = MemoryMonitor("my_asic:0", warning=0.5, critical=0.75, hysteresis=0.1,
                          on_warning=lambda e: levels.append(e.level), on_critical=lambda e: levels.append(e.level),
                          on_normal=lambda e: levels.append(e.level))
        mib = 2**20 // 4
        a = torch.empty(36 * mib, device="my_asic")   # ~56%: warning
        m.check(); m.check()
        b = torch.empty(14 * mib, device="my_asic")   # ~78%: critical
        m.check()
        del b; torch.my_asic.empty_cache()           # ~56%: inside the band, no event
        m.check()
        del a; torch.my_asic.empty_cache()           # ~0%: normal again
        m.check()
        a = torch.empty(36 * mib, device="my_asic")   # warning again: a new crossing
        m.check()
        print(",".join(levels))
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "warning,critical,normal,warning"


def test_allocation_path_sees_a_spike_between_samples():
    out = run_python(
        """
        import torch, kernel_pytorch
        from kernel_pytorch.hardware_abstraction import MemoryMonitor
        events = []
        with MemoryMonitor("my_asic:0", warning=0.5, critical=0.75, interval_s=3600,
                           on_warning=events.append, on_critical=events.append):
            x = torch.empty(52 * 2**20 // 4, device="my_asic")   # ~81%, long before the next sample
            print([(e.level, e.source) for e in events])
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "[('warning', 'allocation'), ('critical', 'allocation')]"


def test_a_stopped_monitor_no_longer_watches_allocations():
    out = run_python(
        """
        import torch, kernel_pytorch
        from kernel_pytorch.hardware_abstraction import MemoryMonitor
        events = []
        m = MemoryMonitor("my_asic:0", warning=0.5, interval_s=3600, on_warning=events.append).start()
        m.stop()
        x = torch.empty(52 * 2**20 // 4, device="my_asic")
        print(len(events), m.running)
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "0 False"

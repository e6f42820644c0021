"""The caching allocator's settings: MY_ASIC_ALLOC_CONF, PYTORCH_ALLOC_CONF and
torch.my_asic.memory._set_allocator_settings (PYTORCH_CUDA_ALLOC_CONF's syntax).

Settings read from the environment are fixed when a process first allocates, so
those tests run in a fresh process with a 256 MiB device; run-time settings are
tested the same way, so no test leaves a cap behind in the pytest process.
"""

import pytest
import torch

from device_subprocess import last_line, run_python, run_python_process

MiB = 1 << 20
SMALL_DEVICE = {"MY_ASIC_MEMORY_MB": "256"}


def run(code, **env):
    return last_line(run_python(code, env={**SMALL_DEVICE, **env}))


def test_max_pool_size_refuses_beyond_it_with_the_usual_out_of_memory_message():
    out = run(
        """
        import torch, kernel_pytorch
        keep = torch.empty(48 * 2**20, dtype=torch.uint8, device="my_asic")
        try:
            torch.empty(32 * 2**20, dtype=torch.uint8, device="my_asic")
        except torch.OutOfMemoryError as e:
            m = str(e).splitlines()[0]
            print(m.startswith("my_asic out of memory. Tried to allocate 32.00 MiB"),
                  "MY_ASIC_ALLOC_CONF=max_pool_size_mb:64" in m, "max pool size" in m)
        """,
        MY_ASIC_ALLOC_CONF="max_pool_size_mb:64",
    )
    assert out == "True True True"


def test_max_pool_size_allows_allocations_up_to_it():
    out = run(
        """
        import torch, kernel_pytorch
        a = torch.ones(32 * 2**20, dtype=torch.uint8, device="my_asic")
        b = torch.ones(32 * 2**20, dtype=torch.uint8, device="my_asic")
        print(torch.my_asic.memory_reserved() == 64 * 2**20, int(b[:8].cpu().sum()))
        """,
        MY_ASIC_ALLOC_CONF="max_pool_size_mb:64",
    )
    assert out == "True 8"


def test_max_pool_size_gives_cached_blocks_back_before_refusing():
    out = run(
        """
        import torch, kernel_pytorch
        a = torch.empty(48 * 2**20, dtype=torch.uint8, device="my_asic")
        del a  # cached, still reserved
        b = torch.empty(60 * 2**20, dtype=torch.uint8, device="my_asic")
        print(torch.my_asic.memory_reserved() // 2**20)
        """,
        MY_ASIC_ALLOC_CONF="max_pool_size_mb:64",
    )
    assert out == "60"


def test_memory_stats_report_the_settings_and_the_limit():
    out = run(
        """
        import torch, kernel_pytorch
        s = torch.my_asic.memory_stats()
        print(s["max_pool_size"] // 2**20, s["pool_limit"] // 2**20, s["max_split_size"] // 2**20,
              s["growth_factor"], s["garbage_collection_threshold"])
        """,
        MY_ASIC_ALLOC_CONF="max_pool_size_mb:128,max_split_size_mb:32,growth_factor:2,garbage_collection_threshold:0.5",
    )
    assert out == "128 128 32 2.0 0.5"


def test_memory_stats_report_no_limit_by_default():
    out = run(
        """
        import torch, kernel_pytorch
        s = torch.my_asic.memory_stats()
        print(s["max_pool_size"], s["pool_limit"], s["max_split_size"], s["initial_pool_size"])
        """
    )
    assert out == "-1 -1 -1 0"


def test_the_error_handler_sees_the_pool_limit_and_retries_after_empty_cache():
    out = run(
        """
        import torch, kernel_pytorch
        held = [torch.empty(48 * 2**20, dtype=torch.uint8, device="my_asic")]
        seen = []
        def handler(error):
            seen.append(error.message)
            held.clear()
            torch.my_asic.empty_cache()
            return True
        torch.my_asic.set_error_handler(handler)
        x = torch.ones(48 * 2**20, dtype=torch.uint8, device="my_asic")
        print(len(seen), "max_pool_size_mb:64" in seen[0], int(x[:4].sum().item()))
        """,
        MY_ASIC_ALLOC_CONF="max_pool_size_mb:64",
    )
    assert out == "1 True 4"


def test_initial_pool_size_is_reserved_at_first_allocation_and_serves_later_ones():
    out = run(
        """
        import torch, kernel_pytorch
        first = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")
        after_first = torch.my_asic.memory_stats()
        more = [torch.empty(8 * 2**20, dtype=torch.uint8, device="my_asic") for _ in range(5)]
        after = torch.my_asic.memory_stats()
        print(after_first["reserved_bytes.all.current"] // 2**20, after["num_device_alloc"],
              after["reserved_bytes.all.current"] // 2**20)
        """,
        MY_ASIC_ALLOC_CONF="initial_pool_size_mb:64",
    )
    assert out == "64 1 64"


def test_freed_parts_of_a_segment_merge_and_empty_cache_returns_the_segment():
    out = run(
        """
        import torch, kernel_pytorch
        parts = [torch.empty(8 * 2**20, dtype=torch.uint8, device="my_asic") for _ in range(4)]
        del parts
        whole = torch.empty(64 * 2**20, dtype=torch.uint8, device="my_asic")  # needs the merged segment
        n = torch.my_asic.memory_stats()["num_device_alloc"]
        del whole
        torch.my_asic.empty_cache()
        print(n, torch.my_asic.memory_reserved())
        """,
        MY_ASIC_ALLOC_CONF="initial_pool_size_mb:64",
    )
    assert out == "1 0"


def test_growth_factor_two_doubles_the_pool_when_it_grows():
    out = run(
        """
        import torch, kernel_pytorch
        a = torch.empty(16 * 2**20, dtype=torch.uint8, device="my_asic")
        b = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")   # new 16 MiB segment
        c = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")   # cut from it
        s = torch.my_asic.memory_stats()
        print(s["reserved_bytes.all.current"] // 2**20, s["num_device_alloc"])
        """,
        MY_ASIC_ALLOC_CONF="growth_factor:2",
    )
    assert out == "32 2"


def test_without_growth_factor_each_segment_fits_its_request():
    out = run(
        """
        import torch, kernel_pytorch
        a = torch.empty(16 * 2**20, dtype=torch.uint8, device="my_asic")
        b = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")
        c = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")
        s = torch.my_asic.memory_stats()
        print(s["reserved_bytes.all.current"] // 2**20, s["num_device_alloc"])
        """
    )
    assert out == "24 3"


def test_max_split_size_keeps_big_cached_blocks_for_big_requests():
    out = run(
        """
        import torch, kernel_pytorch
        big = torch.empty(64 * 2**20, dtype=torch.uint8, device="my_asic")
        del big  # cached 64 MiB block, above max_split_size
        small = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")
        s = torch.my_asic.memory_stats()
        print(s["num_device_alloc"], s["oversize_segments.current"])
        """,
        MY_ASIC_ALLOC_CONF="max_split_size_mb:32",
    )
    assert out == "2 1"


def test_without_max_split_size_a_big_cached_block_is_split():
    out = run(
        """
        import torch, kernel_pytorch
        big = torch.empty(64 * 2**20, dtype=torch.uint8, device="my_asic")
        del big
        small = torch.empty(4 * 2**20, dtype=torch.uint8, device="my_asic")
        print(torch.my_asic.memory_stats()["num_device_alloc"], torch.my_asic.memory_allocated() // 2**20)
        """
    )
    assert out == "1 4"


def test_garbage_collection_threshold_frees_cached_segments_before_the_pool_passes_it():
    out = run(
        """
        import torch, kernel_pytorch
        a = torch.empty(40 * 2**20, dtype=torch.uint8, device="my_asic")
        b = torch.empty(30 * 2**20, dtype=torch.uint8, device="my_asic")
        del a  # 40 MiB cached
        c = torch.empty(50 * 2**20, dtype=torch.uint8, device="my_asic")  # 30 + 40 + 50 > 0.8 x 128
        s = torch.my_asic.memory_stats()
        print(s["reserved_bytes.all.current"] // 2**20, s["num_ooms"])
        """,
        MY_ASIC_ALLOC_CONF="max_pool_size_mb:128,garbage_collection_threshold:0.8",
    )
    assert out == "80 0"


def test_pytorch_alloc_conf_reaches_my_asic():
    out = run(
        """
        import torch, kernel_pytorch
        print(torch.my_asic.memory_stats()["max_split_size"] // 2**20, torch.my_asic.memory._get_allocator_settings())
        """,
        PYTORCH_ALLOC_CONF="max_split_size_mb:40,expandable_segments:True",
    )
    assert out == "40 max_split_size_mb:40"


def test_my_asic_alloc_conf_wins_over_pytorch_alloc_conf():
    out = run(
        """
        import torch, kernel_pytorch
        print(torch.my_asic.memory._get_allocator_settings())
        """,
        PYTORCH_ALLOC_CONF="max_split_size_mb:40,max_pool_size_mb:100",
        MY_ASIC_ALLOC_CONF="max_split_size_mb:60",
    )
    assert out == "max_pool_size_mb:100,max_split_size_mb:60"


def test_set_allocator_settings_at_run_time_changes_only_the_keys_it_names():
    out = run(
        """
        import torch, kernel_pytorch
        torch.my_asic.memory._set_allocator_settings("max_pool_size_mb:32")
        print(torch.my_asic.memory._get_allocator_settings(), torch.my_asic.memory_stats()["pool_limit"] // 2**20)
        """,
        MY_ASIC_ALLOC_CONF="max_split_size_mb:60",
    )
    assert out == "max_pool_size_mb:32,max_split_size_mb:60 32"


def test_a_run_time_pool_limit_names_the_call_in_the_out_of_memory_message():
    out = run(
        """
        import torch, kernel_pytorch
        torch.my_asic.memory._set_allocator_settings("max_pool_size_mb:16")
        try:
            torch.empty(32 * 2**20, dtype=torch.uint8, device="my_asic")
        except torch.OutOfMemoryError as e:
            print('_set_allocator_settings("max_pool_size_mb:16")' in str(e))
        """
    )
    assert out == "True"


@pytest.mark.skipif(
    tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 12),
    reason="my_asic joins torch's allocator-settings hook from torch 2.12 on",
)
def test_the_generic_accelerator_call_reaches_my_asic():
    out = run(
        """
        import torch, kernel_pytorch
        torch._C._accelerator_setAllocatorSettings("max_pool_size_mb:48")
        print(torch.my_asic.memory_stats()["max_pool_size"] // 2**20)
        """
    )
    assert out == "48"


@pytest.mark.parametrize(
    "settings, expected",
    [
        ("max_pool_mb:64", r"unknown key 'max_pool_mb' \(did you mean 'max_pool_size_mb'\?\)\. Valid keys: "),
        ("colour:red", r"unknown key 'colour'\. Valid keys: garbage_collection_threshold, growth_factor"),
        ("max_pool_size_mb:lots", r"max_pool_size_mb needs a whole number of MiB, got 'lots'"),
        ("max_pool_size_mb:-5", r"max_pool_size_mb needs a whole number of MiB >= 0, got '-5'"),
        ("max_pool_size_mb:1.5", r"max_pool_size_mb needs a whole number of MiB >= 0, got '1.5'"),
        ("max_split_size_mb:4", r"max_split_size_mb must be >= 20 MiB, got 4"),
        ("garbage_collection_threshold:1.5", r"garbage_collection_threshold must be a fraction in \(0, 1\)"),
        ("growth_factor:0.5", r"growth_factor must be in \[1, 16\]"),
        ("max_pool_size_mb", r"'max_pool_size_mb' is not a key:value pair"),
        ("max_pool_size_mb:8,initial_pool_size_mb:16", r"initial_pool_size_mb \(16\) is above max_pool_size_mb \(8\)"),
    ],
)
def test_invalid_run_time_settings_raise_value_error_naming_the_key(settings, expected):
    out = run(
        f"""
        import re, torch, kernel_pytorch
        try:
            torch.my_asic.memory._set_allocator_settings({settings!r})
        except ValueError as e:
            print(bool(re.search({expected!r}, str(e))) or str(e))
        """
    )
    assert out == "True"


def test_invalid_run_time_settings_change_nothing():
    out = run(
        """
        import torch, kernel_pytorch
        torch.my_asic.memory._set_allocator_settings("max_pool_size_mb:64")
        try:
            torch.my_asic.memory._set_allocator_settings("max_pool_size_mb:32,growth_factor:0")
        except ValueError:
            pass
        print(torch.my_asic.memory._get_allocator_settings())
        """
    )
    assert out == "max_pool_size_mb:64"


def test_an_invalid_environment_setting_is_a_clear_error_at_first_allocation_not_a_crash():
    completed = run_python_process(
        """
        import torch, kernel_pytorch
        try:
            torch.empty(4, device="my_asic")
        except ValueError as e:
            print("caught:", str(e).splitlines()[0])
        print(torch.ones(2).sum().item())
        """,
        env={**SMALL_DEVICE, "MY_ASIC_ALLOC_CONF": "max_pool_sise_mb:64"},
    )
    assert completed.returncode == 0, completed.stderr
    assert "caught: MY_ASIC_ALLOC_CONF: unknown key 'max_pool_sise_mb' (did you mean 'max_pool_size_mb'?)" in completed.stdout


def test_unknown_keys_in_pytorch_alloc_conf_belong_to_other_devices_and_are_ignored():
    out = run(
        """
        import torch, kernel_pytorch
        x = torch.ones(4, device="my_asic")
        print(x.sum().item(), repr(torch.my_asic.memory._get_allocator_settings()))
        """,
        PYTORCH_ALLOC_CONF="expandable_segments:True,roundup_power2_divisions:[256:1,>:4]",
    )
    assert out == "4.0 ''"


def test_set_allocator_settings_rejects_a_non_string():
    out = run(
        """
        import torch, kernel_pytorch
        try:
            torch.my_asic.memory._set_allocator_settings({"max_pool_size_mb": 64})
        except TypeError as e:
            print("key:value" in str(e))
        """
    )
    assert out == "True"


def test_lowering_the_pool_limit_gives_cached_memory_back_before_it_serves_a_request():
    out = run(
        """
        import torch, kernel_pytorch
        a = torch.empty(48 * 2**20, dtype=torch.uint8, device="my_asic")
        del a  # a cached 48 MiB segment
        torch.my_asic.memory._set_allocator_settings("max_pool_size_mb:32")
        reserved = torch.my_asic.memory_reserved()
        try:
            torch.empty(40 * 2**20, dtype=torch.uint8, device="my_asic")
            print(reserved, "served")
        except torch.OutOfMemoryError:
            print(reserved, "refused")
        """
    )
    assert out == "0 refused"

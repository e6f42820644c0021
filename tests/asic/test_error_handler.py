"""torch.my_asic.set_error_handler: device errors reach the handler before the user.

Each test runs in a fresh process with a 64 MiB device.
"""

from device_subprocess import last_line, run_python

SMALL_DEVICE = {"MY_ASIC_MEMORY_MB": "64"}


def test_out_of_memory_reaches_the_handler_with_a_structured_error():
    out = run_python(
        """
        import torch, kernel_pytorch
        seen = []
        torch.my_asic.set_error_handler(seen.append)
        try:
            torch.empty(100 * 2**20, dtype=torch.uint8, device="my_asic")
        except torch.OutOfMemoryError:
            pass
        e = seen[0]
        print(len(seen), e.device, e.kind, e.op, e.requested_bytes, e.retryable, "out of memory" in e.message)
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == f"1 my_asic:0 out_of_memory allocation {100 * 2**20} True True"


def test_a_handler_that_frees_memory_gets_the_allocation_retried():
    out = run_python(
        """
        import torch, kernel_pytorch
        held = [torch.empty(40 * 2**20, dtype=torch.uint8, device="my_asic")]
        def free_and_retry(error):
            held.clear()
            torch.my_asic.empty_cache()
            return True
        torch.my_asic.set_error_handler(free_and_retry)
        x = torch.ones(40 * 2**20, dtype=torch.uint8, device="my_asic")
        print(int(x[-1024:].sum().item()) == 1024, len(held), torch.my_asic.memory_stats()["num_ooms"] >= 1)
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "True 0 True"


def test_a_failed_retry_raises_the_usual_out_of_memory_error_once():
    out = run_python(
        """
        import torch, kernel_pytorch
        calls = []
        torch.my_asic.set_error_handler(lambda e: calls.append(e) or True)
        try:
            torch.empty(100 * 2**20, dtype=torch.uint8, device="my_asic")
            print("no error")
        except torch.OutOfMemoryError as e:
            print(len(calls), "my_asic out of memory" in str(e))
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "1 True"


def test_an_exception_in_the_handler_does_not_hide_the_device_error():
    out = run_python(
        """
        import warnings, torch, kernel_pytorch
        def broken(error):
            raise ValueError("handler bug")
        torch.my_asic.set_error_handler(broken)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                torch.empty(100 * 2**20, dtype=torch.uint8, device="my_asic")
            except torch.OutOfMemoryError:
                print("oom", any("handler bug" in str(w.message) for w in caught))
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "oom True"


def test_removing_the_handler():
    out = run_python(
        """
        import torch, kernel_pytorch
        calls = []
        torch.my_asic.set_error_handler(calls.append)
        torch.my_asic.set_error_handler(None)
        try:
            torch.empty(100 * 2**20, dtype=torch.uint8, device="my_asic")
        except torch.OutOfMemoryError:
            pass
        print(len(calls), torch.my_asic.get_error_handler())
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "0 None"


def test_the_hal_handler_covers_my_asic():
    out = run_python(
        """
        import torch, kernel_pytorch
        from kernel_pytorch.hardware_abstraction import set_error_handler
        seen = []
        set_error_handler(seen.append)
        try:
            torch.empty(100 * 2**20, dtype=torch.uint8, device="my_asic")
        except torch.OutOfMemoryError:
            pass
        print([(e.device, e.kind) for e in seen])
        """,
        env=SMALL_DEVICE,
    )
    assert last_line(out) == "[('my_asic:0', 'out_of_memory')]"

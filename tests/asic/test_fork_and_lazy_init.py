"""The runtime initialises lazily, and a process forked after that cannot use it.

Each test runs in a fresh interpreter: initialisation is per process.
"""

from device_subprocess import last_line, run_python


def test_import_does_not_initialise_runtime():
    out = run_python(
        """
        import torch, kernel_pytorch
        print(torch.my_asic.is_initialized())
        """
    )
    assert last_line(out) == "False"


def test_configuration_calls_are_queued_without_initialising():
    out = run_python(
        """
        import torch, kernel_pytorch
        torch.my_asic.manual_seed_all(0)
        torch.my_asic.empty_cache()
        print(torch.my_asic.is_initialized())
        """
    )
    assert last_line(out) == "False"


def test_first_device_tensor_initialises_runtime():
    out = run_python(
        """
        import torch, kernel_pytorch
        torch.ones(1, device="my_asic")
        print(torch.my_asic.is_initialized())
        """
    )
    assert last_line(out) == "True"


def test_forked_child_after_initialisation_gets_clear_error():
    out = run_python(
        """
        import os, torch, kernel_pytorch
        torch.ones(1, device="my_asic")
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(1, device="my_asic")
                os._exit(2)  # the child must not be able to use the device
            except RuntimeError as error:
                os._exit(0 if "spawn" in str(error) else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert last_line(out) == "0"


def test_forked_child_sees_device_as_unavailable():
    out = run_python(
        """
        import os, torch, kernel_pytorch
        torch.ones(1, device="my_asic")
        pid = os.fork()
        if pid == 0:
            os._exit(0 if (not torch.my_asic.is_available() and torch.my_asic.device_count() == 0
                           and not torch.my_asic.is_initialized()) else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert last_line(out) == "0"


def test_forked_child_lazy_init_names_spawn():
    out = run_python(
        """
        import os, torch, kernel_pytorch
        torch.ones(1, device="my_asic")
        pid = os.fork()
        if pid == 0:
            try:
                torch.my_asic.current_device()
                os._exit(2)
            except RuntimeError as error:
                os._exit(0 if "'spawn' start method" in str(error) else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert last_line(out) == "0"


def test_fork_before_initialisation_leaves_child_free_to_use_device():
    out = run_python(
        """
        import os, torch, kernel_pytorch
        pid = os.fork()
        if pid == 0:
            ok = torch.ones(2, device="my_asic").sum().item() == 2.0
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert last_line(out) == "0"


def test_forked_child_error_is_worded_like_cudas():
    # Tools match CUDA's sentence: "Cannot re-initialize CUDA in forked subprocess. To use CUDA with
    # multiprocessing, you must use the 'spawn' start method".
    out = run_python(
        """
        import os, torch, kernel_pytorch
        torch.ones(1, device="my_asic")
        pid = os.fork()
        if pid == 0:
            expected = ("Cannot re-initialize my_asic in forked subprocess. To use my_asic with "
                        "multiprocessing, you must use the 'spawn' start method")
            results = []
            for call in (lambda: torch.my_asic.current_device(), lambda: torch.ones(1, device="my_asic")):
                try:
                    call()
                    results.append(False)
                except RuntimeError as error:
                    results.append(expected in str(error))
            os._exit(0 if all(results) else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert last_line(out) == "0"

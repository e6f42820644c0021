"""A training loop that grows its batch until memory runs out, with the monitor and the handler.

The warning and critical callbacks come first, in that order, then the error
handler (which frees what the loop caches and empties the allocator's cache),
and the loop carries on at a smaller batch with correct results.
"""

from device_subprocess import last_line, run_python


def test_growing_batch_gets_warning_critical_then_handler_and_continues():
    out = run_python(
        """
        import torch, kernel_pytorch
        from kernel_pytorch.hardware_abstraction import MemoryMonitor

        log = []
        kept = []  # activations the loop keeps as it grows (what the handler drops)

        def handler(error):
            log.append("handler:" + error.kind)
            kept.clear()
            torch.my_asic.empty_cache()
            return True  # retry the allocation once, now that memory is free

        def handler_ran():
            return any(entry.startswith("handler") for entry in log)

        torch.my_asic.set_error_handler(handler)
        torch.manual_seed(0)
        model = torch.nn.Linear(256, 256).to("my_asic")
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        batch, largest, good_steps_after, finite = 64, 64, 0, True
        with MemoryMonitor("my_asic:0", warning=0.90, critical=0.95, interval_s=3600,
                           on_warning=lambda e: log.append("warning"),
                           on_critical=lambda e: log.append("critical")):
            while good_steps_after < 3:
                handled = handler_ran()
                try:
                    x = torch.randn(batch, 256, device="my_asic")
                    loss = model(x).square().mean()
                    opt.zero_grad(); loss.backward(); opt.step()
                    finite = finite and bool(torch.isfinite(loss).item())
                    if handled:
                        good_steps_after += 1
                    elif not handler_ran():
                        kept.append(x)
                except torch.OutOfMemoryError:
                    pass  # the retry failed too: the smaller batch below
                if handler_ran():
                    if not handled:
                        batch //= 2  # continue at a smaller batch
                else:
                    batch = batch * 21 // 20 + 1  # 5% more per step
                    largest = batch
        first = [entry for i, entry in enumerate(log) if entry not in log[:i]]  # first occurrences, in order
        print(first, finite, batch < largest, len(kept))
        """,
        env={"MY_ASIC_MEMORY_MB": "128"},
    )
    assert last_line(out) == "['warning', 'critical', 'handler:out_of_memory'] True True 0"

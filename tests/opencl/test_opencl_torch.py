"""my_asic tensors, ops and training on an OpenCL device (PoCL in CI, a GPU where present)."""

import json

from opencl_process import run_on_opencl, run_on_opencl_process

KERNEL_OPS = ("rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul", "apply_rope", "softmax",
              "decode_attention", "prefill_attention", "matmul_vec")


def test_the_device_is_the_opencl_device_under_its_own_name():
    out = run_on_opencl("""
        import json, torch, kernel_pytorch
        print(json.dumps({"name": torch.my_asic.get_device_name(), "simulated": torch.my_asic.is_simulated(),
                          "count": torch.my_asic.device_count(),
                          "total": torch.my_asic.get_device_properties(0).total_memory}))
    """)
    info = json.loads(out)
    assert info["name"].endswith("(OpenCL)") and not info["simulated"]
    assert info["count"] >= 1 and info["total"] > 0


def test_tensors_round_trip_in_every_dtype_including_views_at_offsets():
    run_on_opencl("""
        import torch, kernel_pytorch
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool):
            x = (torch.arange(1000) % 7).to(dtype)
            d = x.to("my_asic")
            assert torch.equal(d.cpu(), x), dtype
            assert torch.equal(d[13:500:3].cpu(), x[13:500:3]), dtype
        y = torch.randn(64, 33)
        assert torch.equal(y.to("my_asic").t().contiguous().cpu(), y.t().contiguous())
        z = torch.randn(4096).pin_memory()
        assert torch.equal(z.to("my_asic", non_blocking=True).cpu(), z)
    """)


def test_ops_without_opencl_kernels_run_through_the_cpu_fallback():
    run_on_opencl("""
        import torch, kernel_pytorch
        torch.manual_seed(0)
        a, b = torch.randn(32, 48), torch.randn(48, 16)
        da, db = a.to("my_asic"), b.to("my_asic")
        torch.testing.assert_close((da @ db).cpu(), a @ b)
        torch.testing.assert_close((da.sum(0) * 2 + 1).cpu(), a.sum(0) * 2 + 1)
        torch.testing.assert_close(da[da > 0].cpu(), a[a > 0])
        torch.testing.assert_close(torch.cat([da, da]).cpu(), torch.cat([a, a]))
    """)


def test_the_kernel_table_matches_the_cpu_in_every_dtype_without_falling_back():
    out = run_on_opencl("""
        import json, torch, kernel_pytorch
        from kernel_pytorch import ops
        torch.manual_seed(0)
        dev = "my_asic"
        tol = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.float16: dict(atol=2e-3, rtol=2e-3),
               torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
        torch.my_asic.reset_fallback_stats()
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            def same(fn, *args):
                want = fn(*[a if not torch.is_tensor(a) else a for a in args])
                got = fn(*[a.to(dev) if torch.is_tensor(a) else a for a in args])
                if isinstance(want, tuple):
                    for w, g in zip(want, got):
                        torch.testing.assert_close(g.cpu(), w, **tol[dt])
                else:
                    torch.testing.assert_close(got.cpu(), want, **tol[dt])
            # widths divisible by 4 take the vector paths, the others the scalar ones
            for cols in (300, 301):
                x = torch.randn(5, cols, dtype=dt); r = torch.randn(5, cols, dtype=dt); w = torch.randn(cols, dtype=dt)
                same(ops.rms_norm, x, w, 1e-6)
                same(ops.fused_add_rms_norm, x, r, w, 1e-6)
                same(ops.silu, x)
                same(ops.softmax, x * 4)
            same(ops.softmax, torch.randn(3, 9000, dtype=dt))  # longer than a row kept in registers
            same(ops.silu_and_mul, torch.randn(7, 2 * 130, dtype=dt))
            q = torch.randn(2, 5, 4, 64, dtype=dt)
            cos, sin = torch.randn(5, 32, dtype=dt), torch.randn(5, 32, dtype=dt)
            same(ops.apply_rope, q, cos, sin, False)
            same(ops.apply_rope, q, cos, sin, True)
            same(ops.apply_rope, q, cos.float(), sin.float(), False)
            q12, c6, s6 = torch.randn(2, 3, 2, 12, dtype=dt), torch.randn(3, 6, dtype=dt), torch.randn(3, 6, dtype=dt)
            same(ops.apply_rope, q12, c6, s6, False)
            same(ops.apply_rope, q12, c6, s6, True)
            qd = torch.randn(3, 8, 64, dtype=dt)
            kc, vc = torch.randn(3, 2, 300, 64, dtype=dt), torch.randn(3, 2, 300, 64, dtype=dt)
            same(ops.decode_attention, qd, kc, vc, None, None)
            same(ops.decode_attention, qd, kc, vc, torch.tensor([1, 150, 300]), None)
            # few heads, long cache: split over the cache and merged
            same(ops.decode_attention, torch.randn(1, 2, 64, dtype=dt), torch.randn(1, 1, 1000, 64, dtype=dt),
                 torch.randn(1, 1, 1000, 64, dtype=dt), torch.tensor([777]), None)
            # 16 query heads per kv head: two work-groups of up to 8 heads each
            same(ops.decode_attention, torch.randn(1, 32, 64, dtype=dt), torch.randn(1, 2, 300, 64, dtype=dt),
                 torch.randn(1, 2, 300, 64, dtype=dt), None, None)
            same(ops.decode_attention, torch.randn(2, 2, 30, dtype=dt), torch.randn(2, 2, 40, 30, dtype=dt),
                 torch.randn(2, 2, 40, 30, dtype=dt), None, None)
            qp = torch.randn(2, 4, 37, 64, dtype=dt)
            kp_, vp = torch.randn(2, 2, 45, 64, dtype=dt), torch.randn(2, 2, 45, 64, dtype=dt)
            same(ops.prefill_attention, qp, kp_, vp, True, None)
            same(ops.prefill_attention, qp, kp_, vp, False, 0.3)
            same(ops.matmul_vec, torch.randn(70, 513, dtype=dt), torch.randn(513, dtype=dt))
        print(json.dumps(torch.my_asic.fallback_stats()))
    """)
    stats = json.loads(out.strip().splitlines()[-1])
    fell_back = {op: n for op, n in stats.items() if any(op.endswith("::" + k) for k in
                                                           ("rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul",
                                                            "apply_rope", "softmax", "decode_attention",
                                                            "prefill_attention", "matmul_vec"))}
    assert fell_back == {}


def test_kernel_table_ops_on_misaligned_views_and_every_head_dim_match_the_cpu():
    # Vector loads need 4-element aligned buffers: views that start one or two
    # elements into their storage must take the scalar paths, and decode
    # attention's split-K kernel (d / 8 work-items per key row) must hold for
    # the head sizes it accepts.
    run_on_opencl("""
        import torch, kernel_pytorch
        from kernel_pytorch import ops
        torch.manual_seed(0)
        dev = "my_asic"
        tol = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.float16: dict(atol=2e-3, rtol=2e-3),
               torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
        def shifted(t, by):  # the same values in a device buffer that starts `by` elements earlier
            flat = torch.cat([torch.zeros(by, dtype=t.dtype), t.reshape(-1)]).to(dev)
            return flat[by:].view(t.shape)
        torch.my_asic.reset_fallback_stats()
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            def check(fn, args, by):
                want = fn(*args)
                got = fn(*[shifted(a, by) if torch.is_tensor(a) and a.dim() > 1 else
                           (a.to(dev) if torch.is_tensor(a) else a) for a in args])
                for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                    torch.testing.assert_close(g.cpu(), w, **tol[dt])
            for by in (1, 2, 4):
                x, r, w = torch.randn(5, 256, dtype=dt), torch.randn(5, 256, dtype=dt), torch.randn(256, dtype=dt)
                check(lambda x, w: ops.rms_norm(x, w, 1e-6), (x, w), by)
                check(lambda x, r, w: ops.fused_add_rms_norm(x, r, w, 1e-6), (x, r, w), by)
                check(ops.silu, (x,), by)
                check(ops.softmax, (x * 4,), by)
                q, cos, sin = torch.randn(2, 5, 4, 64, dtype=dt), torch.randn(5, 32, dtype=dt), torch.randn(5, 32, dtype=dt)
                check(lambda q, c, s: ops.apply_rope(q, c, s, False), (q, cos, sin), by)
                qd, kc, vc = torch.randn(2, 8, 64, dtype=dt), torch.randn(2, 2, 200, 64, dtype=dt), torch.randn(2, 2, 200, 64, dtype=dt)
                check(lambda q, k, v: ops.decode_attention(q, k, v, None, None), (qd, kc, vc), by)
                check(lambda w, x: ops.matmul_vec(w, x), (torch.randn(9, 256, dtype=dt), torch.randn(256, dtype=dt)), by)
            for d in (8, 16, 128, 256):
                for heads, kv_heads in ((4, 4), (12, 2), (8, 1)):
                    qd = torch.randn(2, heads, d, dtype=dt)
                    kc, vc = torch.randn(2, kv_heads, 700, d, dtype=dt), torch.randn(2, kv_heads, 700, d, dtype=dt)
                    for lengths in (None, torch.tensor([1, 533])):
                        want = ops.decode_attention(qd, kc, vc, lengths, None)
                        got = ops.decode_attention(qd.to(dev), kc.to(dev), vc.to(dev),
                                                   None if lengths is None else lengths.to(dev), None)
                        torch.testing.assert_close(got.cpu(), want, **tol[dt])
                    qp = torch.randn(2, heads, 37, d, dtype=dt)
                    kp_, vp = torch.randn(2, kv_heads, 45, d, dtype=dt), torch.randn(2, kv_heads, 45, d, dtype=dt)
                    for causal in (True, False):
                        want = ops.prefill_attention(qp, kp_, vp, causal, None)
                        got = ops.prefill_attention(qp.to(dev), kp_.to(dev), vp.to(dev), causal, None)
                        torch.testing.assert_close(got.cpu(), want, **tol[dt])
        stats = torch.my_asic.fallback_stats()
        assert not any(op.endswith(k) for op in stats for k in ("rms_norm", "silu", "apply_rope", "softmax",
                                                                "decode_attention", "prefill_attention",
                                                                "matmul_vec")), stats
    """)


def test_split_attention_kernel_regimes_match_the_cpu():
    # The split kernel (one work-group per batch, kv head, 4 query heads and
    # slice of the cache; teams of d / 8 work-items per row; warp shuffles on
    # NVIDIA, local memory elsewhere): caches that end inside a block, GQA
    # ratios 1, 4 and 8 (two groups of 4 heads), head sizes whose team is and
    # is not a power of two, per-sequence lengths, and a batch of one that
    # splits the cache across compute units and merges the slices.
    run_on_opencl("""
        import torch, kernel_pytorch
        from kernel_pytorch import ops
        torch.manual_seed(0)
        dev = "my_asic"
        tol = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}
        torch.my_asic.reset_fallback_stats()
        for dt in (torch.float32, torch.bfloat16):
            for d in (64, 96, 128):
                for heads, kv_heads in ((1, 1), (4, 1), (8, 1), (8, 2)):
                    for batch, cache, lengths in ((1, 1000, None), (2, 37, None), (2, 1000, [1000, 261])):
                        q = torch.randn(batch, heads, d, dtype=dt)
                        k, v = (torch.randn(batch, kv_heads, cache, d, dtype=dt) for _ in range(2))
                        lens = None if lengths is None else torch.tensor(lengths)
                        want = ops.decode_attention(q, k, v, lens, None)
                        got = ops.decode_attention(q.to(dev), k.to(dev), v.to(dev),
                                                   None if lens is None else lens.to(dev), None)
                        torch.testing.assert_close(got.cpu(), want, **tol[dt], msg=f"{dt} d={d} {heads}/{kv_heads} {batch}x{cache}")
                q = torch.randn(1, 8, 45, d, dtype=dt)
                k, v = (torch.randn(1, 1, 47, d, dtype=dt) for _ in range(2))
                want = ops.prefill_attention(q, k, v, True, None)
                got = ops.prefill_attention(q.to(dev), k.to(dev), v.to(dev), True, None)
                torch.testing.assert_close(got.cpu(), want, **tol[dt])
        stats = torch.my_asic.fallback_stats()
        assert not any(op.endswith(("decode_attention", "prefill_attention")) for op in stats), stats
    """)


def test_a_small_training_run_matches_the_cpu():
    out = run_on_opencl("""
        import json, torch, kernel_pytorch
        from torch import nn
        def train(device):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10)).to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            gen = torch.Generator().manual_seed(1)
            losses = []
            for _ in range(5):
                x = torch.randn(8, 1, 8, 8, generator=gen).to(device)
                y = torch.randint(0, 10, (8,), generator=gen).to(device)
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
                losses.append(loss.item())
            return losses
        print(json.dumps([train("cpu"), train("my_asic")]))
    """)
    cpu, device = json.loads(out.strip().splitlines()[-1])
    assert all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(cpu, device)), (cpu, device)


def test_out_of_memory_raises_torch_oom_and_the_device_stays_usable():
    run_on_opencl("""
        import torch, kernel_pytorch
        try:
            torch.empty(48 << 20, dtype=torch.uint8, device="my_asic")
            raise SystemExit("no error")
        except torch.OutOfMemoryError as e:
            assert "48.00 MiB" in str(e) and "free" in str(e), str(e)
        x = torch.ones(1000, device="my_asic")
        assert x.sum().item() == 1000
    """, options="memory_mb=32")


def test_a_kernel_build_failure_names_the_cause_and_the_fix_and_copies_still_work():
    run_on_opencl("""
        import torch, kernel_pytorch
        from kernel_pytorch import ops
        x = torch.randn(4, 8).to("my_asic")
        try:
            ops.silu(x)
            raise SystemExit("no error")
        except RuntimeError as e:
            text = str(e)
            assert "building the OpenCL kernels" in text and "build_options" in text, text
            assert "kernels=0" in text, text
        assert x.cpu().shape == (4, 8)
    """, options="build_options=-cl-no-such-option")


def test_a_bad_device_filter_fails_with_the_device_list_and_the_fix():
    done = run_on_opencl_process("""
        import torch, kernel_pytorch
        torch.zeros(1, device="my_asic")
    """, options="device=no-such-device")
    assert done.returncode != 0
    assert "no OpenCL device matches" in done.stderr and "MY_ASIC_OPENCL_DEVICE" in done.stderr


def test_register_custom_device_finds_the_opencl_runtime_by_file_name():
    out = run_on_opencl("""
        import torch, kernel_pytorch
        from kernel_pytorch.hardware_abstraction.privateuse1_integration import (
            CustomDeviceBackend, PrivateUse1Config, register_custom_device)
        class OpenCLChip(CustomDeviceBackend):
            def __init__(self):
                super().__init__("my_asic")
            def initialize_device(self, i):
                return True
            def get_device_count(self):
                return 1
            def get_device_properties(self, i):
                return {"name": "Chip0", "memory": 256}
        register_custom_device(OpenCLChip(), PrivateUse1Config(backend_library="libkpdr_opencl.so"))
        print(torch.my_asic.get_device_name(0), torch.my_asic.get_device_properties(0).total_memory)
        assert torch.equal(torch.arange(5, device="my_asic").cpu(), torch.arange(5))
    """, env={"MY_ASIC_RUNTIME": ""})
    assert out.split()[0] == "Chip0" and int(out.split()[1]) == 256 << 20


def test_a_tiny_llama_trains_20_steps_like_the_cpu_on_the_kernel_table():
    out = run_on_opencl("""
        import json, torch, kernel_pytorch
        from kernel_pytorch import ops
        def train(device):
            torch.manual_seed(0)
            model = ops.TinyLlama(vocab_size=64, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                                  intermediate_size=128, max_positions=32).to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            gen = torch.Generator().manual_seed(1)
            losses = []
            for _ in range(20):
                tokens = torch.randint(0, 64, (2, 17), generator=gen).to(device)
                logits = model(tokens[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), tokens[:, 1:].reshape(-1))
                opt.zero_grad(); loss.backward(); opt.step()
                losses.append(loss.item())
            return losses
        cpu = train("cpu")
        torch.my_asic.reset_fallback_stats()
        device = train("my_asic")
        stats = torch.my_asic.fallback_stats()
        print(json.dumps([cpu, device, {k: v for k, v in stats.items() if k.startswith("kernel_pytorch::")}]))
    """)
    cpu, device, kernel_fallbacks = json.loads(out.strip().splitlines()[-1])
    assert all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(cpu, device)), (cpu, device)
    forward_ops = {"kernel_pytorch::" + op for op in KERNEL_OPS}
    assert not forward_ops & set(kernel_fallbacks), kernel_fallbacks

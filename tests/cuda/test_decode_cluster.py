"""decode_attention's cluster kernel computes the same function as the reference.

Each scenario runs in a fresh process whose tuning cache file holds the
configuration under test for every shape it runs, so the op launches exactly
that configuration (whatever the tuner would have picked on this GPU):

* the cluster kernel (split -2 / -4 / -8: one thread block cluster per
  (sequence, kv head), each block a static range of tiles; -102 / -104: the
  tiles claimed dynamically from a counter in rank 0's shared memory; the
  softmax states merged through distributed shared memory) at lengths below the
  cache length (down to 0 and 1), odd cache lengths, GQA groups that do not
  fill a block's heads, head_dim 64 / 80 / 128, a strided cache, and inside a
  CUDA graph replayed with new lengths; checked against the float64
  reference, and (on sm_90) that the cluster kernel is what ran.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))

DECODE_CASES = [
    # B, H, Hkv, T, D, lengths
    (3, 8, 2, 1000, 128, None),
    (2, 6, 2, 333, 64, None),            # group 3: a second head block of one head; odd T
    (4, 8, 2, 3000, 128, [1, 3000, 1234, 129]),
    (2, 32, 8, 4097, 128, [0, 4097]),    # length 0 gives zeros; odd T
    (1, 4, 4, 5000, 80, None),           # head_dim below the padded 128
    (2, 16, 1, 20000, 128, [20000, 7]),  # MQA: 16 heads in two blocks of 8
]

DECODE_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    import kernel_pytorch.ops as kops
    import references as ref
    from references import TOL
    cases, split = json.loads(sys.argv[2]), int(sys.argv[3])
    torch.manual_seed(0)

    def check(out, expected, dtype):
        tol = TOL[dtype]
        torch.testing.assert_close(out.double(), expected, atol=tol["atol"], rtol=tol["rtol"])

    for dtype in (torch.bfloat16, torch.float16):
        for B, H, Hkv, T, D, lengths in cases:
            q = torch.randn(B, H, D, device="cuda").to(dtype)
            k = torch.randn(B, Hkv, T, D, device="cuda").to(dtype)
            v = torch.randn(B, Hkv, T, D, device="cuda").to(dtype)
            lens = None if lengths is None else torch.tensor(lengths, device="cuda")
            check(kops.decode_attention(q, k, v, lens), ref.decode_attention(q, k, v, lens), dtype)
    # A strided cache: 1500 of 4096 allocated positions.
    big_k = torch.randn(2, 2, 4096, 128, device="cuda").to(torch.bfloat16)
    big_v = torch.randn_like(big_k)
    q = torch.randn(2, 8, 128, device="cuda").to(torch.bfloat16)
    k, v = big_k[:, :, :1500], big_v[:, :, :1500]
    check(kops.decode_attention(q, k, v), ref.decode_attention(q, k, v), torch.bfloat16)

    # Captured in a CUDA graph, replayed with new lengths and queries.
    B, H, Hkv, T, D = 8, 32, 8, 4096, 128
    q = torch.randn(B, H, D, device="cuda").to(torch.bfloat16)
    k = torch.randn(B, Hkv, T, D, device="cuda").to(torch.bfloat16)
    v = torch.randn_like(k)
    lens = torch.full((B,), T, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        kops.decode_attention(q, k, v, lens)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kops.decode_attention(q, k, v, lens)
    for new in ([4096] * 8, [1, 2, 63, 64, 65, 1000, 4095, 3], [0] * 8):
        lens.copy_(torch.tensor(new, device="cuda"))
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        check(out, ref.decode_attention(q, k, v, lens), torch.bfloat16)

    # Which kernel ran.
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        kops.decode_attention(q, k, v, lens)
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if "kp::cuda" in e.name})
    print(json.dumps({"kernels": names, "entries": kops.tuning_entries()}))
""")


def _key(op, shape):
    return f"{op}|bfloat16|{shape}|{torch.cuda.get_device_name(0)}"


def _bucket(v):
    p = 1
    while p < v:
        p <<= 1
    return p


def _decode_shape(B, H, Hkv, T, D):
    return f"batch={B},heads={H},kv_heads={Hkv},head_dim={D},T<={_bucket(T)}"


def _run(tmp_path, entries, script, *args):
    cache = tmp_path / "tuning.json"
    cache.write_text(json.dumps({"version": 2, "entries": entries}))
    env = dict(os.environ, KP_TUNING_CACHE=str(cache))
    env.pop("PYTHONSAFEPATH", None)
    res = subprocess.run([sys.executable, "-c", script, *args], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("split", [-2, -4, -8, -102, -104])
def test_the_decode_cluster_kernel_matches_the_reference(tmp_path, split):
    shapes = {_decode_shape(*c[:5]) for c in DECODE_CASES}
    shapes |= {_decode_shape(2, 8, 2, 1500, 128), _decode_shape(8, 32, 8, 4096, 128)}
    entries = {}
    for dtype in ("bfloat16", "float16"):
        for shape in shapes:
            entries[f"decode_attention|{dtype}|{shape}|{torch.cuda.get_device_name(0)}"] = {
                "threads": 128, "split": split, "us": 1.0}
    got = _run(tmp_path, entries, DECODE_SCRIPT, HERE, json.dumps(DECODE_CASES), str(split))
    assert {e["split"] for e in got["entries"]} == {split}
    if torch.cuda.get_device_capability(0) >= (9, 0):
        # The cluster kernel (its last template argument true), and no combine kernel.
        assert got["kernels"] and all("decode_attention_mma_kernel" in n and "true, true>" in n
                                      for n in got["kernels"]), got["kernels"]

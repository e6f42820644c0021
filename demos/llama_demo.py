"""A small Llama-style model on kernel_pytorch.ops, on cpu and my_asic, checked against plain PyTorch.

Builds TinyLlama with random (seeded) weights, runs the prefill of a prompt
and a greedy decode of ``--tokens`` new tokens with ``use_kernels=True`` on
each device, and replays the same token sequence through the same weights
with ``use_kernels=False`` (plain PyTorch: the reference). Prints the largest
logit differences, tokens per second, ``backend_info()`` and my_asic's
``fallback_stats()``; exits with status 1 if any logits disagree beyond the
tolerance or the generated tokens differ.

    python demos/llama_demo.py [--tokens 32] [--prompt-length 16] [--device cpu|my_asic|all]
"""

import argparse
import copy
import sys
import time

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic)
import kernel_pytorch.ops as kops
from kernel_pytorch import asic

TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 1e-1}


def build_model(args):
    torch.manual_seed(args.seed)
    return kops.TinyLlama(vocab_size=args.vocab, hidden_size=args.hidden, num_layers=args.layers,
                          num_heads=args.heads, num_kv_heads=args.kv_heads, intermediate_size=args.intermediate,
                          max_positions=args.prompt_length + args.tokens + 1).eval()


def sync(device):
    if device.type == "my_asic":
        torch.my_asic.synchronize(device)


@torch.no_grad()
def generate(model, prompt, new_tokens, device):
    """Greedy decoding with a KV cache: returns (tokens, per-step logits, prefill s, decode s)."""
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + new_tokens)
    start = time.perf_counter()
    logits = [model(prompt, cache)[:, -1]]
    sync(device)
    prefill_s = time.perf_counter() - start
    tokens = [logits[-1].argmax(-1)]
    start = time.perf_counter()
    for _ in range(new_tokens - 1):
        logits.append(model(tokens[-1][:, None], cache)[:, -1])
        tokens.append(logits[-1].argmax(-1))
    sync(device)
    return torch.stack(tokens, 1), torch.stack(logits, 1), prefill_s, time.perf_counter() - start


@torch.no_grad()
def replay(model, prompt, tokens):
    """Logits of the plain model fed the same tokens (so a near-tie cannot make the paths diverge)."""
    cache = model.new_cache(prompt.shape[0], prompt.shape[1] + tokens.shape[1])
    logits = [model(prompt, cache)[:, -1]]
    for i in range(tokens.shape[1] - 1):
        logits.append(model(tokens[:, i:i + 1], cache)[:, -1])
    return torch.stack(logits, 1)


def run_on(device, base, prompt, args, dtype):
    fused = copy.deepcopy(base).to(device=device, dtype=dtype)
    plain = copy.deepcopy(fused).set_use_kernels(False)
    prompt = prompt.to(device)
    generate(fused, prompt, 2, device)  # warm up (allocator, first-call costs)
    if device.type == "my_asic":
        asic.reset_fallback_stats()
    tokens, logits, prefill_s, decode_s = generate(fused, prompt, args.tokens, device)
    fallback = asic.fallback_stats() if device.type == "my_asic" else None
    reference = replay(plain, prompt, tokens)
    plain_tokens = reference.argmax(-1)
    diff = (logits.float() - reference.float()).abs().max().item()
    return {
        "device": str(device), "tokens": tokens.cpu(), "diff": diff, "same_tokens": torch.equal(tokens, plain_tokens),
        "prefill_tok_s": prompt.numel() / prefill_s, "decode_tok_s": prompt.shape[0] * (args.tokens - 1) / decode_s,
        "fallback": fallback,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "my_asic", "all"], default="all")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens to generate (>= 2)")
    parser.add_argument("--prompt-length", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--intermediate", type=int, default=688)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.tokens < 2:
        parser.error("--tokens must be at least 2")

    dtype = getattr(torch, args.dtype)
    devices = [torch.device("cpu")]
    if args.device in ("my_asic", "all"):
        if not hasattr(torch, "my_asic") or torch.my_asic.device_count() == 0:
            if args.device == "my_asic":
                parser.error("my_asic is not available in this process (see MY_ASIC_ENABLE)")
            print("my_asic not available: running on cpu only")
        else:
            devices = [torch.device("my_asic")] if args.device == "my_asic" else devices + [torch.device("my_asic")]

    base = build_model(args)
    prompt = torch.randint(0, args.vocab, (args.batch, args.prompt_length), generator=torch.Generator().manual_seed(1))
    print(f"TinyLlama: {args.layers} layers, hidden {args.hidden}, {args.heads} heads / {args.kv_heads} kv heads, "
          f"{sum(p.numel() for p in base.parameters()) / 1e6:.2f} M parameters, {args.dtype}; "
          f"prompt {args.batch}x{args.prompt_length}, {args.tokens} new tokens")
    print("backend_info():", kops.backend_info())

    ok = True
    results = [run_on(d, base, prompt, args, dtype) for d in devices]
    tolerance = TOLERANCE[dtype]
    for r in results:
        good = r["diff"] <= tolerance and r["same_tokens"]
        ok &= good
        print(f"{r['device']:>8}: max |logits - plain PyTorch logits| = {r['diff']:.2e} (tolerance {tolerance:g}), "
              f"same tokens: {r['same_tokens']}, prefill {r['prefill_tok_s']:.0f} tok/s, "
              f"decode {r['decode_tok_s']:.1f} tok/s  {'OK' if good else 'MISMATCH'}")
        if r["fallback"] is not None:
            ours = {k: v for k, v in r["fallback"].items() if k.startswith("kernel_pytorch::")}
            print(f"{'':>8}  fallback_stats(): {r['fallback'] or '{}'}  (kernel_pytorch ops among them: {ours or 'none'})")
    if len(results) == 2:
        same = torch.equal(results[0]["tokens"], results[1]["tokens"])
        ok &= same
        print(f"cpu and my_asic generated the same tokens: {same}")
    print("tokens:", results[0]["tokens"][0].tolist())
    print("PASS" if ok else "FAIL: the fused model disagrees with plain PyTorch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""my_asic in one screen: the devices, a tensor round trip, a few training steps.

    python demos/my_asic_demo.py
"""

import torch

import kernel_pytorch  # noqa: F401  (registers the my_asic device)


def device_summary() -> None:
    print(f"torch {torch.__version__}; accelerator: {torch.accelerator.current_accelerator()}")
    for i in range(torch.my_asic.device_count()):
        props = torch.my_asic.get_device_properties(i)
        free, total = torch.my_asic.mem_get_info(i)
        print(
            f"  my_asic:{i}  {props.name:<12} {total / 2**30:6.1f} GiB total, {free / 2**30:6.1f} GiB free, "
            f"{props.multi_processor_count} compute units"
        )


def round_trip() -> None:
    x = torch.randn(3, 4)
    on_device = x.to("my_asic")
    back = (on_device * 2 + 1).cpu()
    print(f"round trip: {tuple(x.shape)} -> {on_device.device} -> cpu, exact: {torch.equal(back, x * 2 + 1)}")
    moved = on_device.to("my_asic:1")
    print(f"device to device: {on_device.device} -> {moved.device}, equal: {torch.equal(moved.cpu(), x)}")


def train(device: str, steps: int = 5) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    inputs = torch.randn(64, 16, generator=gen)
    targets = torch.randint(0, 4, (64,), generator=gen)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs.to(device)), targets.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    device_summary()
    round_trip()
    on_asic, on_cpu = train("my_asic"), train("cpu")
    for step, (a, c) in enumerate(zip(on_asic, on_cpu)):
        print(f"  step {step}: loss my_asic {a:.6f}  cpu {c:.6f}")
    same = all(abs(a - c) <= 1e-6 * max(1.0, abs(c)) for a, c in zip(on_asic, on_cpu))
    print(f"training on my_asic matches the CPU: {same}")
    print(f"peak memory on my_asic:0: {torch.my_asic.max_memory_allocated(0) / 2**10:.1f} KiB; "
          f"ops run by the CPU fallback: {len(torch.my_asic.fallback_stats())}")


if __name__ == "__main__":
    main()

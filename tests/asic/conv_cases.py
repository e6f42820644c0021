"""Convolution, max pooling and batch norm (forward and backward) compared with torch on the CPU.

``SCRIPT`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator's host_addressable=0 mode, or the OpenCL runtime). ``GROUP`` picks the cases
("conv", "pool" or "batch_norm"). It prints one JSON line: the number of cases checked, the
fallback calls of every op, and the layouts the device returned where the CPU's differ.
"""

SCRIPT = r'''
import json, torch, kernel_pytorch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
dev = "my_asic"
DTYPES = [getattr(torch, name) for name in DTYPE_NAMES]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=4e-2, atol=8e-2)}
checked = 0
layouts = []

def compare(got, ref, dtype, name, scale=1.0):
    assert got.device.type == dev, (name, got.device)
    tol = {k: v * scale for k, v in TOL[dtype].items()}
    torch.testing.assert_close(got.cpu().float(), ref.float(), **tol, msg=lambda m: f"{name} {dtype}: {m}")

def check(fn, *inputs, name, grads=True, dtype=torch.float32, layout=None, scale=1.0):
    """fn (forward, then backward of a random gradient) on device tensors in `dtype` vs on
    float32 CPU copies of the same rounded values."""
    global checked
    values = [t.to(dtype).float() for t in inputs]
    outs = {}
    for device in ("cpu", dev):
        args = [(v if device == "cpu" else v.to(dtype).to(dev)) for v in values]
        if layout is not None:
            args = [layout(a) for a in args]
        args = [a.detach().requires_grad_(grads) for a in args]
        out = fn(*args)
        result = [out]
        if grads:
            torch.manual_seed(1)
            g = torch.randn(out.shape).to(dtype).float()
            out.backward(g if device == "cpu" else g.to(dtype).to(dev))
            result += [a.grad for a in args]
        outs[device] = result
        if device == dev and out.dim() == 4 and out.is_contiguous(memory_format=torch.channels_last) != \
                outs["cpu"][0].is_contiguous(memory_format=torch.channels_last):
            layouts.append(name)
    for i, (ref, got) in enumerate(zip(outs["cpu"], outs[dev])):
        assert got.dtype == dtype, (name, i, got.dtype)
        compare(got, ref, dtype, f"{name} [{'output' if i == 0 else f'grad {i - 1}'}]", scale)
    checked += 1

channels_last = lambda t: t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t
r = torch.randn
torch.my_asic.reset_fallback_stats()
for dt in DTYPES:
    if GROUP == "conv":
        s = 1 if dt == torch.float32 else 4  # 16-bit columns are rounded before col2im sums them
        check(lambda x, w, b: F.conv2d(x, w, b, padding=1), r(2, 3, 9, 8), r(5, 3, 3, 3), r(5), name="conv2d pad 1", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(0, 2), dilation=(1, 2)), r(2, 4, 11, 10), r(6, 4, 3, 2), r(6),
              name="conv2d stride/padding/dilation", dtype=dt, scale=s)
        check(lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2), r(3, 4, 8, 8), r(6, 2, 3, 3), name="conv2d groups=2 no bias", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=4), r(2, 4, 7, 7), r(8, 1, 3, 3), r(8), name="conv2d depthwise", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv2d(x, w, b, padding="same", dilation=2), r(2, 3, 8, 9), r(4, 3, 3, 3), r(4), name="conv2d padding=same", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv2d(x, w, b, padding=1), r(2, 3, 8, 8), r(5, 3, 3, 3), r(5), name="conv2d channels_last",
              dtype=dt, layout=channels_last, scale=s)
        check(lambda x, w, b: F.conv2d(x[:, :, ::2, 1:], w, b, padding=1), r(2, 3, 14, 9), r(5, 3, 3, 3), r(5),
              name="conv2d non-contiguous input", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv2d(x, w.transpose(2, 3), b), r(2, 3, 8, 8), r(5, 3, 3, 2), r(5), name="conv2d non-contiguous weight", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2), r(3, 4, 17), r(6, 2, 3), r(6),
              name="conv1d stride/padding/dilation/groups", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv2d(x, w, b), r(3, 8, 8), r(4, 3, 3, 3), r(4), name="conv2d unbatched", dtype=dt, scale=s)
        # Transposed convolution: the same products with forward and input gradient exchanged.
        check(lambda x, w, b: F.conv_transpose2d(x, w, b), r(2, 3, 5, 6), r(3, 4, 3, 3), r(4), name="conv_transpose2d", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1), r(2, 4, 5, 5), r(4, 3, 3, 3), r(3),
              name="conv_transpose2d stride 2 output_padding", dtype=dt, scale=s)
        check(lambda x, w: F.conv_transpose2d(x, w, stride=(2, 1), padding=(0, 1), dilation=(1, 2), groups=2), r(2, 4, 6, 7),
              r(4, 3, 2, 3), name="conv_transpose2d groups/dilation no bias", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=2, output_padding=2), r(3, 4, 9), r(4, 2, 5), r(2),
              name="conv_transpose1d", dtype=dt, scale=s)
        check(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), r(2, 3, 4, 4), r(3, 5, 2, 2), r(5), name="conv_transpose2d channels_last",
              dtype=dt, layout=channels_last, scale=s)
        if dt == torch.float32:
            # Columns of more than one chunk (2^24 elements): the weight gradient sums chunks.
            check(lambda x, w, b: F.conv2d(x, w, b, padding=1), r(8, 64, 64, 64), r(2, 64, 3, 3), r(2), name="conv2d chunked columns",
                  dtype=dt, scale=10)
    elif GROUP == "pool":
        check(lambda x: F.max_pool2d(x, 2), r(2, 3, 8, 8), name="max_pool2d 2x2", dtype=dt)
        check(lambda x: F.avg_pool2d(x, 2), r(2, 3, 8, 8), name="avg_pool2d 2x2", dtype=dt)
        check(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), r(2, 3, 9, 7), name="avg_pool2d overlapping windows, padding", dtype=dt)
        check(lambda x: F.avg_pool2d(x, (3, 2), stride=1, ceil_mode=True), r(3, 8, 7), name="avg_pool2d unbatched ceil_mode", dtype=dt)
        check(lambda x: F.avg_pool2d(x, 2), r(2, 3, 8, 8), name="avg_pool2d channels_last", dtype=dt, layout=channels_last)
        check(lambda x: F.adaptive_avg_pool2d(x, (4, 4)), r(2, 3, 8, 8), name="adaptive_avg_pool2d to a divisor", dtype=dt)
        check(lambda x: F.interpolate(x, scale_factor=2), r(2, 3, 5, 4), name="upsample nearest x2", dtype=dt)
        check(lambda x: F.interpolate(x, size=(7, 3)), r(2, 3, 5, 4), name="upsample nearest to a size", dtype=dt)
        check(lambda x: F.interpolate(x, scale_factor=1.5), r(1, 2, 4, 6), name="upsample nearest x1.5", dtype=dt)
        check(lambda x: F.max_pool2d(x, 3, stride=2, padding=1), r(2, 3, 9, 7), name="max_pool2d overlapping windows", dtype=dt)
        check(lambda x: F.max_pool2d(x, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)), r(2, 2, 9, 9), name="max_pool2d dilation", dtype=dt)
        check(lambda x: F.max_pool2d(x, 3, stride=2, ceil_mode=True), r(1, 2, 8, 8), name="max_pool2d ceil_mode", dtype=dt)
        check(lambda x: F.max_pool2d(x, 2), r(2, 3, 8, 6), name="max_pool2d channels_last", dtype=dt, layout=channels_last)
        check(lambda x: F.max_pool2d(x[:, :, 1:, ::2], 2), r(2, 3, 9, 12), name="max_pool2d non-contiguous", dtype=dt)
        check(lambda x: F.max_pool2d(x, 2), r(3, 8, 8), name="max_pool2d unbatched", dtype=dt)
        check(lambda x: F.max_pool1d(x, 3, stride=2), r(2, 3, 11), name="max_pool1d", dtype=dt)
        x = r(2, 3, 9, 9).to(dt)
        ref = F.max_pool2d(x.float(), 3, 2, 1, return_indices=True)[1]
        got = F.max_pool2d(x.to(dev), 3, 2, 1, return_indices=True)[1]
        assert got.dtype == torch.int64 and torch.equal(got.cpu(), ref), "max_pool2d indices differ"
        checked += 1
    elif GROUP == "unfold":
        check(lambda x: F.unfold(x, (3, 2), dilation=(1, 2), padding=(1, 0), stride=(2, 1)), r(2, 3, 9, 8), name="unfold", dtype=dt)
        check(lambda x: F.unfold(x, 2, stride=2), r(3, 8, 8), name="unfold unbatched", dtype=dt)
        check(lambda x: F.unfold(x, 3, padding=1), r(2, 3, 6, 5), name="unfold channels_last", dtype=dt, layout=channels_last)
        s = 1 if dt == torch.float32 else 4
        check(lambda c: F.fold(c, (7, 6), (3, 2), dilation=(1, 2), padding=(1, 0), stride=(2, 1)), r(2, 18, 16), name="fold", dtype=dt, scale=s)
        check(lambda c: F.fold(c[:, ::2], (6, 6), 3, padding=1, stride=2), r(18, 18), name="fold unbatched non-contiguous", dtype=dt, scale=s)
    elif GROUP == "batch_norm":
        s = 1 if dt == torch.float32 else 2
        for layout, name in ((None, "contiguous"), (channels_last, "channels_last")):
            cpu_bn = nn.BatchNorm2d(4, momentum=0.3)
            with torch.no_grad():
                cpu_bn.weight.uniform_(0.5, 1.5); cpu_bn.bias.uniform_(-1, 1)
                cpu_bn.running_mean.uniform_(-1, 1); cpu_bn.running_var.uniform_(0.5, 2)
            # float32 parameters and statistics beside a 16-bit input, as autocast runs batch norm
            dev_bn = nn.BatchNorm2d(4, momentum=0.3).to(dev)
            dev_bn.load_state_dict(cpu_bn.state_dict())
            params = lambda bn: (bn.weight, bn.bias)
            x = (r(3, 4, 5, 6) * 3 + 2)
            check(lambda x: cpu_bn(x) if x.device.type == "cpu" else dev_bn(x), x, name=f"batch_norm2d training {name}",
                  dtype=dt, layout=layout, scale=s)
            compare(dev_bn.running_mean, cpu_bn.running_mean, torch.float32, "running_mean")
            compare(dev_bn.running_var, cpu_bn.running_var, torch.float32, "running_var")
            for p_dev, p_cpu in zip(params(dev_bn), params(cpu_bn)):
                compare(p_dev.grad, p_cpu.grad, dt, "batch_norm weight/bias grad", 4 * s)
            cpu_bn.eval(); dev_bn.eval()
            check(lambda x: cpu_bn(x) if x.device.type == "cpu" else dev_bn(x), x, name=f"batch_norm2d eval {name}", dtype=dt,
                  layout=layout, scale=s)
        plain_cpu = nn.BatchNorm1d(5, affine=False)
        plain_dev = nn.BatchNorm1d(5, affine=False).to(dev)
        check(lambda x: plain_cpu(x) if x.device.type == "cpu" else plain_dev(x), r(8, 5, 7), name="batch_norm1d affine=False (N, C, L)",
              dtype=dt, scale=s)
        check(lambda x: plain_cpu(x) if x.device.type == "cpu" else plain_dev(x), r(8, 5), name="batch_norm1d (N, C)", dtype=dt, scale=s)
        compare(plain_dev.running_var, plain_cpu.running_var, torch.float32, "running_var affine=False")
stats = torch.my_asic.fallback_stats()
# Bad arguments keep ATen's errors (the entries never see them: the fallback raises).
errors = []
def expect_error(fn, text):
    try:
        fn()
    except RuntimeError as e:
        assert text in str(e), (text, str(e))
        errors.append(text)
        return
    raise SystemExit(f"no error containing {text!r}")
if GROUP == "conv":
    expect_error(lambda: F.conv2d(torch.randn(1, 3, 5, 5, device=dev), torch.randn(2, 4, 3, 3, device=dev)), "channels")
    expect_error(lambda: F.conv2d(torch.randn(1, 3, 2, 2, device=dev), torch.randn(2, 3, 3, 3, device=dev)), "Kernel size")
elif GROUP == "pool":
    expect_error(lambda: F.max_pool2d(torch.randn(1, 1, 4, 4, device=dev), 2, padding=2), "pad should be")
print(json.dumps({"checked": checked, "fallbacks": stats, "layouts": layouts, "errors": errors}))
'''

# The ops this slice makes native: none of them may fall back.
CONV_OPS = ("aten::im2col", "aten::col2im", "aten::convolution", "aten::convolution_backward", "aten::max_pool2d_with_indices",
            "aten::avg_pool2d", "aten::avg_pool2d_backward", "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d_backward", "aten::upsample_nearest2d", "aten::upsample_nearest2d_backward",
            "aten::max_pool2d_with_indices_backward", "aten::native_batch_norm", "aten::native_batch_norm_backward",
            "aten::_native_batch_norm_legit")


def script(group, dtypes=("float32", "bfloat16")):
    """SCRIPT for one group of cases and the given dtype names."""
    return f"GROUP = {group!r}\nDTYPE_NAMES = {list(dtypes)!r}\n" + SCRIPT


def own_fallbacks(fallbacks):
    """The fallback counts of this slice's ops."""
    return {op: n for op, n in fallbacks.items() if op.split(".")[0] in CONV_OPS}

"""Random fills and dropout on a my_asic device whose memory the host cannot address.

``script()`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator with MY_ASIC_HOST_ADDRESSABLE=0, or the OpenCL runtime). It prints one JSON line:
the checks passed, the fallback calls of the ops the random entry serves
(runtime_random.cpp), and the errors raised for arguments ATen rejects.
"""

ROUTED_OPS = ("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "native_dropout",
              "native_dropout_backward", "multinomial", "aminmax", "_assert_async", "argmax", "max", "min")

SCRIPT = r'''
import json, math, torch, kernel_pytorch
import torch.nn.functional as F
dev = "my_asic"
checked = []
torch.my_asic.reset_fallback_stats()

def ok(name, condition, detail=""):
    assert condition, f"{name}: {detail}"
    checked.append(name)

N = 1 << 20
torch.manual_seed(0)
for dt in (torch.float32, torch.bfloat16, torch.float16):
    x = torch.randn(N, device=dev, dtype=dt).float()
    ok(f"randn {dt}: mean 0, std 1", abs(x.mean().item()) < 0.01 and abs(x.std().item() - 1) < 0.01, (x.mean(), x.std()))
    u = torch.rand(N, device=dev, dtype=dt).float()
    ok(f"rand {dt}: in [0, 1], mean 1/2", 0 <= u.min().item() and u.max().item() <= 1 and abs(u.mean().item() - 0.5) < 0.01)
y = torch.empty(N, device=dev).normal_(3.0, 0.5)
ok("normal_(3, 0.5)", abs(y.mean().item() - 3) < 0.01 and abs(y.std().item() - 0.5) < 0.01)
y = torch.empty(N, device=dev).uniform_(-2.0, 5.0)
ok("uniform_(-2, 5)", -2 <= y.min().item() and y.max().item() < 5 and abs(y.mean().item() - 1.5) < 0.02)
e = torch.empty(N, device=dev).exponential_(4.0)
ok("exponential_(4)", e.min().item() >= 0 and abs(e.mean().item() - 0.25) < 0.005)
b = torch.empty(N, device=dev, dtype=torch.bool).bernoulli_(0.3)
ok("bernoulli_(0.3) into bool", abs(b.float().mean().item() - 0.3) < 0.005)
b = torch.empty(N, device=dev).bernoulli_(0.9)
ok("bernoulli_(0.9) into float", set(b.unique().cpu().tolist()) == {0.0, 1.0} and abs(b.mean().item() - 0.9) < 0.005)
for dt, low, high in ((torch.int64, -7, 9), (torch.int32, 0, 1000), (torch.int64, 0, 2 ** 40), (torch.float32, -3, 4),
                      (torch.bool, 0, 2), (torch.bfloat16, 0, 200)):
    r = torch.randint(low, high, (N,), device=dev, dtype=dt)
    v = r.cpu().to(torch.int64) if dt != torch.bool else r.cpu().long()
    ok(f"randint [{low}, {high}) {dt}", r.dtype == dt and v.min().item() >= low and v.max().item() < high
       and (high - low > 1000 or v.unique().numel() == high - low), (v.min(), v.max()))
r = torch.empty(64, device=dev, dtype=torch.int64).random_(10)
ok("random_(to)", 0 <= r.min().item() and r.max().item() < 10)
strided = torch.zeros(8, 6, device=dev)
strided[:, ::2].normal_()
ok("normal_ on a strided view writes only it", (strided[:, 1::2] == 0).all().item() and (strided[:, ::2] != 0).all().item())

# Reproducible: manual_seed, a my_asic Generator, the generator's state.
torch.manual_seed(7); first = torch.randn(1000, device=dev).cpu()
torch.manual_seed(7); again = torch.randn(1000, device=dev).cpu()
nxt = torch.randn(1000, device=dev).cpu()
ok("manual_seed reproduces a sequence", torch.equal(first, again) and not torch.equal(again, nxt))
g = torch.Generator(dev).manual_seed(11)
a = torch.rand(100, device=dev, generator=g).cpu()
g.manual_seed(11)
ok("a my_asic Generator reproduces its sequence", torch.equal(a, torch.rand(100, device=dev, generator=g).cpu()))
state = torch.my_asic.get_rng_state()
a = torch.randint(0, 100, (50,), device=dev).cpu()
torch.my_asic.set_rng_state(state)
ok("set_rng_state replays", torch.equal(a, torch.randint(0, 100, (50,), device=dev).cpu()))

# Dropout: the kept fraction, the scale, the gradient through the same mask; eval is identity.
x = torch.randn(256, 512, device=dev, requires_grad=True)
out = F.dropout(x, p=0.25, training=True)
kept = out != 0
ok("dropout keeps 1 - p", abs(kept.float().mean().item() - 0.75) < 0.01)
ok("dropout scales by 1 / (1 - p)", torch.allclose(out[kept].cpu(), (x[kept] / 0.75).detach().cpu()))
out.backward(torch.ones_like(out))
ok("dropout's gradient is mask / (1 - p)", torch.allclose(x.grad.cpu(), kept.float().cpu() / 0.75))
ok("eval dropout is the identity", torch.equal(F.dropout(x, 0.5, training=False), x))
ok("dropout p=1 zeroes", (F.dropout(x, 1.0) == 0).all().item())
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 4)).to(dev)
model(torch.randn(8, 16, device=dev)).sum().backward()
ok("a model with dropout trains a step", all(p.grad is not None for p in model.parameters()))
with torch.device(dev):
    layer = torch.nn.Linear(64, 64)
w = layer.weight.cpu()
bound = 1 / math.sqrt(64)
ok("nn.Linear built on the device is initialised (kaiming_uniform_)", w.abs().max().item() <= bound and w.std().item() > bound / 3)

# multinomial (sampling in generate()): the categories' frequencies, zero probabilities never drawn.
probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 1.0, 0.0]])
draws = torch.multinomial(probs.to(dev), 20000, replacement=True).cpu()
freq = torch.stack([torch.bincount(row, minlength=4).float() / 20000 for row in draws])
ok("multinomial with replacement draws each category at its probability",
   draws.shape == (2, 20000) and (freq - probs).abs().max().item() < 0.015, freq)
singles = torch.cat([torch.multinomial(probs.to(dev), 1) for _ in range(1000)], 1).cpu()
freq = torch.stack([torch.bincount(row, minlength=4).float() / 1000 for row in singles])
ok("multinomial of one sample draws each category at its probability", (freq - probs).abs().max().item() < 0.05, freq)
distinct = torch.multinomial(torch.ones(6, device=dev, dtype=torch.bfloat16), 6).cpu()
ok("multinomial without replacement draws distinct categories", sorted(distinct.tolist()) == list(range(6)))
torch.manual_seed(5); first = torch.multinomial(probs[0].to(dev), 8, replacement=True).cpu()
torch.manual_seed(5)
ok("multinomial follows the device generator", torch.equal(first, torch.multinomial(probs[0].to(dev), 8, replacement=True).cpu()))

stats = {op: n for op, n in torch.my_asic.fallback_stats().items() if op.split("::")[1].split(".")[0] in ROUTED_OPS}
errors = []
for bad, text in ((lambda: torch.empty(3, device=dev).normal_(0, -1), "std"),
                  (lambda: torch.empty(3, device=dev).uniform_(2, 1), "from"),
                  (lambda: torch.empty(3, device=dev).bernoulli_(1.5), "p"),
                  (lambda: torch.empty(3, device=dev).exponential_(-1), "lambda"),
                  (lambda: torch.multinomial(torch.tensor([0.5, -1.0], device=dev), 1), "element < 0"),
                  (lambda: torch.multinomial(torch.tensor([1.0, float("inf")], device=dev), 2, True), "element < 0"),
                  (lambda: torch.multinomial(torch.zeros(2, 3, device=dev), 2, True), "sum of probabilities"),
                  (lambda: torch.multinomial(torch.ones(3, device=dev), 4), "without replacement")):
    try:
        bad()
        errors.append("no error")
    except RuntimeError as err:
        errors.append(text if text in str(err) else str(err))
ok("the device stays usable", torch.randn(4, device=dev).cpu().shape == (4,))
print(json.dumps({"checked": len(checked), "fallbacks": stats, "errors": errors}))
'''


def script():
    """SCRIPT with the routed op names."""
    return f"ROUTED_OPS = {ROUTED_OPS!r}\n" + SCRIPT

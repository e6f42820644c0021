"""What the case scripts share (indexing_cases.py, scan_cases.py, sort_cases.py).

A case script runs in a fresh process whose my_asic device the caller configures (the simulator
with MY_ASIC_HOST_ADDRESSABLE=0, or the OpenCL runtime), compares ops on my_asic with torch on
the CPU and prints its result as one JSON line. :func:`case_script` puts :data:`PRELUDE` (the
helpers the cases call) before a case module's SCRIPT; :func:`result_of` reads the result back.
The tests of both runtimes assert the same things on it, through the case module.
"""

import json

from device_subprocess import last_line

# Defines, for the script after it: dev, checked (the count of cases), to_dev, note, check,
# routed_fallbacks and errors_of; starts with the fallback counts cleared.
PRELUDE = r'''
import json, torch, kernel_pytorch
torch.manual_seed(0)
dev = "my_asic"
checked = 0

def to_dev(v):
    return v.to(dev) if isinstance(v, torch.Tensor) else v

def note(name):
    """Counts one checked case; with DEBUG, prints (and clears) the fallbacks it caused."""
    global checked
    checked += 1
    if DEBUG and torch.my_asic.fallback_stats():
        print(name, torch.my_asic.fallback_stats()); torch.my_asic.reset_fallback_stats()

def check(fn, *inputs, name, exact=False, tol=None):
    """fn on device copies of the inputs equals fn on the CPU inputs: exactly for integers, bool and
    exact=True, else within tol (FLOAT32_TOL for float32, HALF_TOL for 16-bit floats by default)."""
    ref = fn(*inputs)
    got = fn(*[to_dev(t) for t in inputs])
    refs, gots = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    for r, g in zip(refs, gots):
        assert g.device.type == dev and g.dtype == r.dtype and g.shape == r.shape, (name, g.dtype, r.dtype, g.shape, r.shape)
        if exact or not r.dtype.is_floating_point:
            assert torch.equal(g.cpu(), r), (name, g.cpu(), r)
        else:
            t = tol or (FLOAT32_TOL if r.dtype == torch.float32 else HALF_TOL)
            torch.testing.assert_close(g.cpu(), r, equal_nan=True, **t, msg=lambda m: f"{name}: {m}")
    note(name)

def routed_fallbacks():
    """The fallback calls so far of the ops named in ROUTED_OPS (op -> calls)."""
    return {op: n for op, n in torch.my_asic.fallback_stats().items()
            if op.split("::")[1].split(".")[0] in ROUTED_OPS}

def errors_of(calls, kinds=(IndexError, RuntimeError), with_type=True):
    """The first line of the error each call raises ("no error" for one that raises none),
    prefixed by the error's type unless with_type is false."""
    errors = []
    for call in calls:
        try:
            call()
            errors.append("no error")
        except kinds as e:
            errors.append((type(e).__name__ + ": " if with_type else "") + str(e).splitlines()[0])
    return errors

torch.my_asic.reset_fallback_stats()
'''


def case_script(body, routed_ops, debug=False, float32_tol=None, half_tol=None):
    """PRELUDE then ``body`` as one script.

    routed_ops: the ops whose fallbacks ``routed_fallbacks()`` reports; debug: print each case's
    fallbacks; float32_tol / half_tol: ``check``'s default tolerances (dicts of rtol and atol)
    for float32 and 16-bit float results (cases that compare exactly need none).
    """
    settings = {"DEBUG": debug, "ROUTED_OPS": tuple(routed_ops), "FLOAT32_TOL": float32_tol, "HALF_TOL": half_tol}
    return "".join(f"{name} = {value!r}\n" for name, value in settings.items()) + PRELUDE + body


def result_of(stdout):
    """The result a case script printed (its last line, JSON)."""
    return json.loads(last_line(stdout))

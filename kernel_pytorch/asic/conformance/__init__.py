"""The conformance kit: does a kpdr runtime make a complete PyTorch device?

A chip team that implements ``csrc/runtime/kpdr.h`` runs

    kernel-pytorch conformance --runtime path/to/libyourchip.so [--options "k=v;..."] [--full] [--json out.json]

(or ``python -m pytest --kp-runtime path/to/libyourchip.so tests/conformance`` in a source
checkout) and gets the ABI contract checks, PyTorch's operator and module databases
forward and backward against the CPU, training parity with the CPU, the fallback counts
of the kernel-table ops, and a report with pass rates and each failure's first error
line. Every part runs in child processes: a crashing runtime fails its section loudly,
never the kit. See docs/device_runtime_abi.md, "The conformance kit".
"""

from kernel_pytorch.asic.conformance.kit import BARS, SECTIONS, Report, SectionResult, run_conformance
from kernel_pytorch.asic.conformance.runtimes import (
    BUNDLED_RUNTIMES,
    RuntimeNotFound,
    RuntimeUnderTest,
    resolve_runtime,
)

__all__ = [
    "BARS", "BUNDLED_RUNTIMES", "SECTIONS", "Report", "RuntimeNotFound", "RuntimeUnderTest", "SectionResult",
    "resolve_runtime", "run_conformance",
]

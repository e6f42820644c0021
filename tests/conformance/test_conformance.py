"""The conformance kit's short form against every runtime this checkout has.

Each section of the kit (kernel_pytorch.asic.conformance) is one test per runtime:
the ABI contract, PyTorch's op_db forward and backward and module_db against the
CPU, training parity and the kernel-table ops. A section passes when it meets its
bar (kit.BARS) with no crash; the assertion message carries the kit's report.
"""

import pytest

from conformance_results import record_section
from kernel_pytorch.asic.conformance import run_conformance

# torch.testing._internal (op_db, module_db) needs the expecttest package,
# which torch does not depend on.
pytest.importorskip("expecttest", reason="torch.testing._internal (op_db, module_db) needs the expecttest package")


@pytest.mark.parametrize("section", ["abi", "op_db", "module_db", "training", "kernels"])
def test_runtime_meets_the_bar(runtime_config, runtime_under_test, section, kp_full):
    report = run_conformance(runtime_under_test, full=kp_full, sections=[section],
                             require_kernels=runtime_config.require_kernels)
    record_section(runtime_config, runtime_under_test, report)
    assert report.ok, "\n" + report.text()


@pytest.mark.slow
@pytest.mark.parametrize("section", ["op_db", "module_db"])
def test_runtime_meets_the_bar_in_the_full_sweep(runtime_config, runtime_under_test, section):
    # The whole op_db (every OpInfo) and module_db (every input of every ModuleInfo):
    # tens of minutes per runtime on 2 cores, so only with -m slow.
    report = run_conformance(runtime_under_test, full=True, sections=[section])
    record_section(runtime_config, runtime_under_test, report)
    assert report.ok, "\n" + report.text()

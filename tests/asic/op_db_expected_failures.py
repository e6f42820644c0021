"""OpInfos of PyTorch's operator database that my_asic is known to fail.

One reviewed list for the conformance suite (test_op_db_conformance.py):
op id -> {"forward" | "backward": reason}. A listed result that starts
passing fails the suite, so the list cannot rot.
"""

_NO_SPARSE = "my_asic has no sparse COO/CSR tensors yet (issue 9, item 5)"

EXPECTED_FAILURES = {
    # The sample is a view whose as_strided reads storage outside the view;
    # copying the sample between devices copies only the view, so the bytes
    # outside it differ by construction (harness limitation, not the device).
    "as_strided.partial_views": {
        "forward": "reads storage outside the copied view",
        "backward": "reads storage outside the copied view",
    },
    # Forward agrees with the CPU; backward's gauge-invariance check
    # (linalg_eig_backward) trips on my_asic's grads for the first sample.
    # Not yet understood: both run LAPACK on the same values.
    "linalg.eig": {"backward": "linalg_eig_backward gauge check trips on my_asic (under investigation)"},
    "sparse.mm.reduce": {"forward": _NO_SPARSE, "backward": _NO_SPARSE},
    "sparse.sampled_addmm": {"forward": _NO_SPARSE, "backward": _NO_SPARSE},
    "to_sparse": {"forward": _NO_SPARSE, "backward": _NO_SPARSE},
}

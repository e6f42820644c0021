"""Indexing, embedding, cat, integer and index-dependent pointwise ops on the simulator with
device memory the host cannot address (MY_ASIC_HOST_ADDRESSABLE=0): they run through the
runtime's gather, scatter and pointwise entries (kpdr.h's core-op section), equal torch on the
CPU for every dtype (duplicate and negative indices, non-contiguous operands), none of them
falls back, and out-of-range indices raise IndexError naming the index."""

import json

from case_runner import result_of
from device_subprocess import last_line, run_python
from indexing_cases import assert_cases, assert_errors, script


def _run():
    return result_of(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"}))


def test_indexing_and_integer_ops_match_the_cpu_without_falling_back():
    assert_cases(_run())


def test_out_of_range_indices_raise_index_errors_naming_the_index():
    assert_errors(_run()["errors"])


def test_cat_and_arange_compute_their_shapes_without_python_meta_kernels():
    # ATen's meta kernels for cat and arange are Python: a shape taken from them
    # held the GIL per call and imported torch._dynamo on first use, which then
    # kept torch.distributed's process groups alive past destroy_process_group.
    out = last_line(run_python("""
        import json, sys, torch, kernel_pytorch
        x = torch.arange(2, 11, 3, device="my_asic")
        y = torch.cat([x.view(1, 3), x.view(1, 3).float()], dim=0)
        print(json.dumps({"values": y.cpu().tolist(), "dtype": str(y.dtype),
                          "imported": "torch._dynamo" in sys.modules,
                          "fallbacks": torch.my_asic.fallback_stats()}))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"}))
    result = json.loads(out)
    assert result == {"values": [[2.0, 5.0, 8.0], [2.0, 5.0, 8.0]], "dtype": "torch.float32",
                      "imported": False, "fallbacks": {}}


def test_cat_reports_aten_errors_for_inputs_it_cannot_join():
    out = last_line(run_python("""
        import json, torch, kernel_pytorch
        d = "my_asic"
        cases = [([torch.ones(2, 3, device=d), torch.ones(2, 4, device=d)], 0),
                 ([torch.ones(2, 3, device=d), torch.ones(2, 3, 1, device=d)], 0),
                 ([torch.tensor(1.0, device=d)], 0),
                 ([torch.ones(2, 3, device=d)], 2)]
        errors = []
        for tensors, dim in cases:
            try:
                torch.cat(tensors, dim)
                errors.append("no error")
            except (RuntimeError, IndexError) as e:
                errors.append(str(e).splitlines()[0])
        legacy = torch.cat([torch.tensor([], device=d), torch.tensor([], device=d)], dim=1)
        print(json.dumps({"errors": errors, "legacy": list(legacy.shape)}))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"}))
    result = json.loads(out)
    errors = result["errors"]
    assert "Sizes of tensors must match except in dimension 0" in errors[0]
    assert "Tensors must have same number of dimensions: got 2 and 3" in errors[1]
    assert "zero-dimensional tensor (at position 0) cannot be concatenated" in errors[2]
    assert "Dimension out of range" in errors[3]
    assert result["legacy"] == [0]

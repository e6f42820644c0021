"""fallback_report / track_fallbacks: which ops of a user's code fell back, and what it cost."""

import json

from device_subprocess import last_line, run_python


def test_the_report_names_each_fallen_back_op_with_calls_and_bytes_copied():
    # Non-host-addressable memory: every fallback copies its operands to the host and back.
    out = run_python("""
        import json, torch, kernel_pytorch
        x = torch.randn(256, 64, device="my_asic")   # 64 KiB of float32
        report = torch.my_asic.fallback_report(lambda: torch.lgamma(x) + 1, print_report=False)
        rows = {r.op: (r.calls, r.bytes_copied) for r in report.rows}
        print(json.dumps({"rows": rows, "device": report.result.device.type, "text": str(report)}))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    result = json.loads(last_line(out))
    calls, copied = result["rows"]["aten::lgamma"]
    # lgamma (no entry serves it): 64 KiB to the host and its 64 KiB result back.
    assert calls == 1 and copied == 2 * 256 * 64 * 4
    assert result["device"] == "my_asic"
    assert "aten::lgamma" in result["text"] and "MiB copied" in result["text"]


def test_the_report_counts_only_its_own_block_and_leaves_global_counters_alone():
    out = run_python("""
        import json, torch, kernel_pytorch
        x = torch.randn(100, device="my_asic")
        torch.lgamma(x)
        before = torch.my_asic.fallback_stats()
        with torch.my_asic.track_fallbacks() as report:
            torch.lgamma(x); torch.lgamma(x)
        after = torch.my_asic.fallback_stats()
        with torch.my_asic.track_fallbacks() as quiet:
            (x * 2).sum()
        print(json.dumps({"calls": {r.op: r.calls for r in report.rows}, "before": before.get("aten::lgamma"),
                          "after": after.get("aten::lgamma"), "quiet": [r.op for r in quiet.rows]}))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "1"})
    result = json.loads(last_line(out))
    assert result["calls"] == {"aten::lgamma": 2}
    assert (result["before"], result["after"]) == (1, 3)
    assert result["quiet"] == []


def test_a_report_without_fallbacks_says_so():
    out = run_python("""
        import torch, kernel_pytorch
        torch.my_asic.fallback_report(lambda: torch.ones(3, device="my_asic") * 2)
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "1"})
    assert "no op fell back" in out


def test_the_cli_runs_a_script_and_prints_its_fallback_rows_as_json(tmp_path):
    user_script = tmp_path / "model.py"
    user_script.write_text(
        "import sys, torch, kernel_pytorch\n"
        "x = torch.randn(64, device='my_asic')\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    torch.lgamma(x)\n")
    out = run_python(f"""
        import sys
        from kernel_pytorch.cli import main
        sys.exit(main(["fallbacks", "--json", {str(user_script)!r}, "3"]))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    rows = {r["op"]: r for r in json.loads(last_line(out))}
    assert rows["aten::lgamma"]["calls"] == 3
    assert rows["aten::lgamma"]["bytes_copied"] == 3 * 2 * 64 * 4

"""Command line: ``python -m kernel_pytorch devices|backends|select|estimate|conformance [--json]``.

``devices``   every device the HAL finds: vendor, memory (GB = 1e9 bytes), peak TFLOPS
``backends``  each torch backend with ✓/✗, the reason for ✗, and the recommended one
``select``    the device ``HardwareAdapter.get_optimal_device_hal`` picks, with the
              reason every other device was rejected (exit status 1 when none fits)
``estimate``  inference memory of a decoder model (weights, KV cache, activations)
``conformance``  the conformance kit against a kpdr runtime (ABI contract, op_db and
              module_db vs the CPU, training parity, kernel-table fallbacks); exit
              status 1 when a section is below its bar
``fallbacks`` runs a Python script and lists the ATen ops that fell back to the
              CPU on my_asic: op, calls, bytes copied between host and device

``--json`` prints one JSON document for scripts instead of the tables. Bad
arguments (an unknown vendor, a negative size) exit with status 2 and a message
naming the problem.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional, Sequence

from .distributed_scale.hardware_adapter import HardwareAdapter
from .hardware_abstraction.backends import discover_backends, format_backend_summary
from .hardware_abstraction.hal_core import PRECISIONS, precision_key
from .hardware_abstraction.memory_estimation import estimate_inference_memory
from .hardware_abstraction.selection import SelectionVerdict, parse_vendor_list

__all__ = ["main", "build_parser"]

_TABLE_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


def _format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _tflops_cell(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def _command_devices(args: argparse.Namespace) -> int:
    capabilities = HardwareAdapter(enable_hal=True).get_cross_vendor_capabilities()
    if args.json:
        print(json.dumps({"devices": capabilities["cross_vendor_devices"], "unavailable_vendors": capabilities["unavailable_vendors"]}, indent=2))
        return 0
    headers = ["DEVICE", "VENDOR", "NAME", "ARCHITECTURE", "TOTAL GB", "FREE GB", *(f"{p} TFLOPS" for p in _TABLE_PRECISIONS)]
    rows = []
    for device in capabilities["cross_vendor_devices"]:
        where = device["device"] if device["torch_usable"] else f"{device['device']} (no torch)"
        rows.append(
            [
                where,
                device["vendor"],
                device["name"],
                device["architecture"],
                f"{device['memory_total_gb']:.1f}",
                f"{device['memory_free_gb']:.1f}",
                *(_tflops_cell(device["peak_tflops"].get(p)) for p in _TABLE_PRECISIONS),
            ]
        )
    print(_format_table(headers, rows))
    print("Peak TFLOPS: dense, theoretical (datasheet clock); '-' = not supported or unknown.")
    simulated = [d["device"] for d in capabilities["cross_vendor_devices"] if d["simulated"] and d["shares_host_memory"]]
    if simulated:
        print(f"Simulated devices ({', '.join(simulated)}) keep their memory in host RAM, shared with the CPU: "
              f"their FREE GB is capped by the host's available memory.")
    for device in capabilities["cross_vendor_devices"]:
        if device["overcommitted"]:
            print(f"overcommitted: {device['device']}: {device['overcommitted']}")
    for device in capabilities["cross_vendor_devices"]:
        for what, error in device["unreadable"].items():
            print(f"could not read: {device['device']}: {what} ({error})")
    for vendor, reason in capabilities["unavailable_vendors"].items():
        print(f"not found: {vendor}: {reason}")
    opencl = [d for d in capabilities["cross_vendor_devices"] if d["vendor"] == "opencl"]
    if opencl:
        print("To run my_asic on an OpenCL device (the bundled OpenCL kpdr runtime):")
        for device in opencl:
            print(f"  {device['device']}: MY_ASIC_RUNTIME=opencl MY_ASIC_RUNTIME_OPTIONS=\"device={device['name']}\" "
                  f"python your_script.py")
        print("  or in Python, before the first use: torch.my_asic.select_runtime(\"opencl\", \"device=...\")")
    return 0


def _command_backends(args: argparse.Namespace) -> int:
    if args.json:
        payload = [
            {
                "name": info.name.value,
                "available": info.available,
                "reason": info.reason,
                "devices": [
                    {"device": spec.label, "name": spec.name}
                    for spec in info.devices
                ],
                "device": None if info.torch_device is None else str(info.torch_device),
            }
            for info in discover_backends()
        ]
        print(json.dumps(payload, indent=2))
        return 0
    print(format_backend_summary())
    return 0


def _verdict_record(verdict: SelectionVerdict) -> Dict[str, Any]:
    spec = verdict.device
    return {
        "device": spec.label,
        "vendor": spec.vendor.value,
        "index": spec.index,
        "name": spec.name,
        "rank": verdict.rank,
        "reasons": list(verdict.reasons),
        "free_memory_gb": verdict.free_memory_gb,
        "memory_headroom_gb": verdict.memory_headroom_gb,
        "peak_tflops": verdict.peak_tflops,
    }


def _command_select(args: argparse.Namespace) -> int:
    adapter = HardwareAdapter(enable_hal=True)
    verdicts = adapter.explain_device_selection(args.memory_gb, args.tflops, args.vendors, args.dtype)
    chosen = verdicts[0] if verdicts and verdicts[0].accepted else None
    if args.json:
        print(
            json.dumps(
                {
                    "requirement": {"memory_gb": args.memory_gb, "tflops": args.tflops, "dtype": args.dtype, "vendors": [v.value for v in args.vendors] if args.vendors else None},
                    "selected": None if chosen is None else _verdict_record(chosen),
                    "verdicts": [_verdict_record(v) for v in verdicts],
                },
                indent=2,
            )
        )
    else:
        if chosen is None:
            print(f"no device has {args.memory_gb:g} GB free and {args.tflops:g} {args.dtype} TFLOPS")
        else:
            spec = chosen.device
            print(f"selected: {spec.device} [{spec.vendor.value}] {spec.name}")
        for verdict in verdicts:
            print(f"  {verdict}")
    return 0 if chosen is not None else 1


def _command_estimate(args: argparse.Namespace) -> int:
    estimate = estimate_inference_memory(
        hidden=args.hidden,
        intermediate=args.intermediate,
        layers=args.layers,
        vocab=args.vocab,
        heads=args.heads,
        kv_heads=args.kv_heads,
        max_seq_len=args.max_seq_len,
        bytes_per_param=args.bytes_per_param,
        batch_size=args.batch_size,
        gated_mlp=not args.no_gated_mlp,
        tie_word_embeddings=args.tie_word_embeddings,
    )
    if args.json:
        print(json.dumps({"parameter_count": estimate.parameter_count, **estimate.breakdown()}, indent=2))
    else:
        print(estimate)
    return 0


def _command_conformance(args: argparse.Namespace) -> int:
    from .asic.conformance import resolve_runtime, run_conformance

    runtime = resolve_runtime(args.runtime, args.options)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    report = run_conformance(runtime, full=args.full, sections=sections, steps=args.steps,
                             require_kernels=args.require_kernels, progress=not args.quiet, jobs=args.jobs)
    print(report.text())
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report.to_json(), out, indent=2)
        print(f"  JSON report: {args.json}")
    return 0 if report.ok else 1


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def _vendor_list(text: str):
    try:
        return parse_vendor_list(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _dtype_key(text: str) -> str:
    try:
        return precision_key(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _command_fallbacks(args: argparse.Namespace) -> int:
    import os
    import runpy
    import sys

    if not os.path.isfile(args.script):
        raise ValueError(f"no such script: {args.script!r}")
    from .asic.fallback import track_fallbacks

    saved_argv = sys.argv
    sys.argv = [args.script, *args.script_args]
    status = 0
    try:
        with track_fallbacks() as report:
            try:
                runpy.run_path(args.script, run_name="__main__")
            except SystemExit as done:
                status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        sys.argv = saved_argv
    if args.json:
        print(json.dumps([{"op": r.op, "calls": r.calls, "bytes_copied": r.bytes_copied} for r in report.rows]))
    else:
        print(report)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m kernel_pytorch`` argument parser."""
    parser = argparse.ArgumentParser(prog="python -m kernel_pytorch", description="kernel_pytorch hardware tools")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{devices,backends,select,estimate,conformance,fallbacks}")

    devices = commands.add_parser("devices", help="list every device with memory and peak TFLOPS")
    devices.add_argument("--json", action="store_true", help="print JSON instead of a table")
    devices.set_defaults(handler=_command_devices)

    backends = commands.add_parser("backends", help="show which torch backends are usable and why not")
    backends.add_argument("--json", action="store_true", help="print JSON instead of the summary")
    backends.set_defaults(handler=_command_backends)

    select = commands.add_parser("select", help="pick the best device for a memory/compute requirement")
    select.add_argument("--memory-gb", type=_non_negative_float, required=True, help="free memory needed, GB (1e9 bytes)")
    select.add_argument("--tflops", type=_non_negative_float, default=0.0, help="dense peak needed for --dtype, TFLOPS")
    select.add_argument("--dtype", type=_dtype_key, default="bf16", help=f"precision of the requirement ({', '.join(PRECISIONS)}); default bf16")
    select.add_argument("--vendors", type=_vendor_list, default=None, help="comma-separated vendors to consider, best first (e.g. nvidia,amd)")
    select.add_argument("--json", action="store_true", help="print JSON instead of text")
    select.set_defaults(handler=_command_select)

    estimate = commands.add_parser("estimate", help="estimate inference memory of a decoder model")
    estimate.add_argument("--hidden", type=int, required=True, help="hidden size")
    estimate.add_argument("--intermediate", type=int, required=True, help="MLP intermediate size")
    estimate.add_argument("--layers", type=int, required=True, help="decoder layers")
    estimate.add_argument("--vocab", type=int, required=True, help="vocabulary size")
    estimate.add_argument("--heads", type=int, required=True, help="attention heads")
    estimate.add_argument("--kv-heads", type=int, default=None, help="key/value heads (GQA); default: --heads")
    estimate.add_argument("--max-seq-len", type=int, default=2048, help="tokens the KV cache holds; default 2048")
    estimate.add_argument("--bytes-per-param", type=float, default=2.0, help="bytes per weight: 2 bf16/fp16, 1 int8, 0.5 int4")
    estimate.add_argument("--batch-size", type=int, default=1, help="sequences served at once; default 1")
    estimate.add_argument("--no-gated-mlp", action="store_true", help="two-matrix MLP (GPT-2/OPT) instead of gate/up/down")
    estimate.add_argument("--tie-word-embeddings", action="store_true", help="LM head shares the embedding")
    estimate.add_argument("--json", action="store_true", help="print JSON (bytes) instead of text")
    estimate.set_defaults(handler=_command_estimate)

    conformance = commands.add_parser("conformance", help="test a kpdr device runtime: ABI, op_db, module_db, training")
    conformance.add_argument("--runtime", required=True, help="path of the runtime library (.so), or a bundled one: myasic, opencl")
    conformance.add_argument("--options", default="", help="the runtime's kpdrInit option string, e.g. 'host_addressable=0'")
    conformance.add_argument("--full", action="store_true", help="the whole op_db and module_db (long) instead of a representative subset")
    conformance.add_argument("--sections", default="abi,op_db,module_db,training,kernels", help="comma-separated sections to run (default: all)")
    conformance.add_argument("--steps", type=_positive_int, default=20, help="training steps per model; default 20")
    conformance.add_argument("--jobs", type=_positive_int, default=1, help="op_db/module_db child processes side by side (CPU cores); default 1")
    conformance.add_argument("--require-kernels", action="store_true", help="fail when a kernel-table op falls back to the CPU")
    conformance.add_argument("--json", metavar="OUT", default=None, help="also write the report as JSON to OUT")
    conformance.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    conformance.set_defaults(handler=_command_conformance)

    fallbacks = commands.add_parser("fallbacks", help="run a script and list the my_asic ops that fell back to the CPU")
    fallbacks.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    fallbacks.add_argument("script", help="Python script to run (as __main__)")
    fallbacks.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    fallbacks.set_defaults(handler=_command_fallbacks)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as error:
        # Library-level validation (e.g. heads not dividing hidden) is bad user input too.
        parser.exit(2, f"{parser.prog} {args.command}: error: {error}\n")

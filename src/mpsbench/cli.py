"""The ``mpsbench`` command: list models and devices, and time one workload outside asv."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mpsbench import command
from mpsbench.builds import history
from mpsbench.fleet import doctor
from mpsbench.measure import devices, models, preselect, selection
from mpsbench.regressions import alerts, bisection, compare, rank_ops
from mpsbench.results import merge, record
from mpsbench.site import report

if TYPE_CHECKING:
    from mpsbench.measure.workloads import Workload


def cmd_models(args: argparse.Namespace) -> int:
    rows = [["model", "seed batch", "batch sizes", "needs", "description"]]
    for spec in models.REGISTRY.values():
        sizes = ",".join(str(size) for size in spec.batch_sizes)
        needs = ",".join(spec.requires) or "-"
        rows.append([spec.name, str(spec.seed_batch_size), sizes, needs, spec.description])
    print(command.table(rows))
    return 0


def _torch() -> Any:
    """torch, or one line saying this command measures and torch is missing (the rest of the CLI runs without it)."""
    try:
        import torch
    except ImportError as exc:
        raise command.UserError(f"this command needs torch, which is not installed here ({exc}): pip install torch") from None
    return torch


def cmd_devices(args: argparse.Namespace) -> int:
    selection.selected_devices()  # a bad MPSBENCH_DEVICES: one line, before anything runs (scripts/bench calls this first)
    torch = _torch()
    if args.usable:  # for scripts: MPSBENCH_DEVICES=$(mpsbench devices --usable)
        print(",".join(name for name in devices.NAMES if devices.get(name).usable))
        return 0
    rows = [["device", "usable", "details"]]
    for name in devices.NAMES:
        found = devices.get(name).availability()
        rows.append([name, "yes" if found.usable else "no", found.reason])
    print(f"torch {torch.__version__}")
    print(command.table(rows))
    return 0


def _parse_int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise command.UserError(f"{what} must be a whole number, got {text!r}") from None


def cmd_run(args: argparse.Namespace) -> int:
    _torch()
    from mpsbench.measure import timing, workloads  # torch: imported where something is measured, so the rest runs without it

    try:
        kinds = workloads.KINDS if args.kind == "both" else (workloads.check_kind(args.kind),)
    except workloads.WorkloadError as exc:
        raise command.UserError(str(exc)) from None
    spec = models.get(args.model)
    device = devices.get(args.device)
    batch_size = spec.seed_batch_size if args.batch_size is None else _parse_int(args.batch_size, "--batch-size")
    models.check_batch_size(spec, batch_size)
    found = device.availability()
    if not found.usable:
        raise command.UserError(f"device {device} is not usable here: {found.reason}")
    rows = [["workload", "model", "device", "batch", "ms/step", "samples/s", "calls"]]
    for kind in kinds:
        if (kind == "inference" and spec.trainable is not None) or (kind == "training" and not spec.trains):
            continue
        workload = _build_or_explain(kind, device, spec.name, batch_size)
        workload.warm_up()
        result = timing.time_steps(workload, min_seconds=args.seconds)
        rows.append([
            kind, spec.name, device, str(batch_size),
            f"{result.seconds_per_step * 1e3:.3f}", f"{result.samples_per_second:.1f}",
            f"{result.calls}x{result.steps_per_call}",
        ])
        workloads.forget()
    print(command.table(rows))
    if device == "cpu":
        print(f"cpu threads: {devices.cpu_threads()}")
    return 0


def _build_or_explain(kind: str, device: str, model: str, batch_size: int) -> Workload:
    from mpsbench.measure import workloads

    try:
        return workloads.build(kind, device, model, batch_size)
    except workloads.WorkloadError as exc:
        raise command.UserError(str(exc)) from None
    except Exception as exc:
        if devices.is_out_of_memory(exc):
            raise command.UserError(f"{model} at batch {batch_size} does not fit in {device} memory") from None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = command.OneLineParser(
        prog="mpsbench",
        description="PyTorch training and inference benchmarks for mps, cuda and cpu (asv suite helpers).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    commands.add_parser("models", help="list the registered models").set_defaults(func=cmd_models)
    devices_command = commands.add_parser("devices", help="list devices and whether they are usable here")
    devices_command.add_argument("--usable", action="store_true",
                                 help="print only the usable devices, comma-separated (a value for MPSBENCH_DEVICES)")
    devices_command.set_defaults(func=cmd_devices)
    run = commands.add_parser("run", help="time one model outside asv for a quick look")
    run.add_argument("model", help=f"one of: {', '.join(models.NAMES)}")
    run.add_argument("--device", default="cpu", help=f"one of: {', '.join(devices.NAMES)} (default cpu)")
    run.add_argument("--batch-size", default=None, help="default: the model's seed batch size")
    run.add_argument("--kind", default="both", help="training, inference or both (default both)")
    run.add_argument("--seconds", type=float, default=1.0, help="least time spent timing each workload")
    run.set_defaults(func=cmd_run)
    history.add_subcommands(commands)  # build, timeline, machine
    report.add_subcommand(commands)
    record.add_subcommand(merge.add_subcommand(commands))  # record is an action of `mpsbench results`, beside merge
    for module in (alerts, preselect, rank_ops, doctor, compare, bisection):
        module.add_subcommand(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return command.run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())

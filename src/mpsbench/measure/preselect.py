"""Tell asv beforehand which combinations this run times, so that it starts no process for the rest.

asv 0.6 starts a process for every parameter combination it selects, and one
whose ``setup`` only skips (an absent device, a combination outside the
default selection) is no exception. Under ``forkserver`` such a process costs
about 12 ms on the project's CPU machine; under ``spawn``, asv's launch
method on macOS, it imports torch again, about 5 s (docs/budget.md). The
suite has about 3,000 combinations per build, and a machine times a few
hundred of them.

Each combination's reason comes from :mod:`mpsbench.measure.selection`'s
table, which every ``setup`` (or ``setup_cache``) asks too, so a preselected
run records the same numbers as a plain one; the left-out combinations are
simply not run instead of being recorded as n/a, and results recorded for
them earlier are kept.

A device is left out only when this machine plainly lacks it (no NVIDIA
driver for cuda, not Apple silicon for mps), never because the torch of
``.venv`` cannot use it: the benchmarked build's torch may differ, and its
``setup`` decides.
"""

from __future__ import annotations

import argparse
import ast
import functools
import itertools
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpsbench import command, progress
from mpsbench.measure import devices, selection

log = progress.logger(__name__)


class PreselectError(command.UserError):
    """Nothing to select, or no suite where one was named."""


@dataclass(frozen=True)
class Combination:
    """One parameter combination of one benchmark, named the way asv's ``-b`` sees it."""

    name: str  # "benchmark_models.Training.time_step('cpu', 'mlp', 8)", or a bare name
    reason: str | None  # why this run leaves it out; None: it runs


def discover(benchmark_dir: Path) -> list[Any]:
    """asv_runner's own discovery of the suite, so that names and param reprs are exactly asv's.

    Imports the package under its folder's name, as asv does; another suite
    imported earlier under the same name is set aside for the while.
    """
    from asv_runner.discovery import disc_benchmarks

    root = benchmark_dir.resolve()
    if not (root / "__init__.py").is_file():
        raise PreselectError(f"{benchmark_dir} is not a benchmark package (no __init__.py); pass the suite's")
    package = root.name
    saved = {name: module for name, module in sys.modules.items() if name == package or name.startswith(package + ".")}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(root.parent))
    try:
        return list(disc_benchmarks(str(root)))
    finally:
        sys.path.remove(str(root.parent))
        for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)


def combinations(benchmarks: Sequence[Any]) -> Iterator[Combination]:
    """Every combination of every benchmark, with the reason this run leaves it out (from asv's names and reprs)."""
    absent = functools.cache(devices.absent_reason)
    for benchmark in benchmarks:
        if not benchmark.params:
            yield Combination(benchmark.name, None)
            continue
        owner = benchmark.name.split(".")[-2]  # "benchmark_models.Training.time_step": the class
        at = list(benchmark.param_names).index("device") if "device" in benchmark.param_names else None
        for shown in itertools.product(*benchmark.params):
            params = [ast.literal_eval(value) for value in shown]  # asv keeps each value's repr
            reason = absent(params[at]) if at is not None else None
            yield Combination(f"{benchmark.name}({', '.join(shown)})", reason or selection.left_out(owner, *params))


def regex(selected: Sequence[str]) -> str:
    """One anchored pattern matching exactly these names under asv's ``re.search``."""
    if not selected:  # asv would stop with "No benchmarks selected"; say why first
        raise PreselectError("no benchmark combination runs on this machine with this MPSBENCH_DEVICES")
    return "^(?:" + "|".join(re.escape(name) for name in selected) + ")$"


def pattern(benchmark_dir: Path, bench: Sequence[str] = ()) -> tuple[str, int, int]:
    """The ``-b`` pattern of this run's combinations, how many it names and how many the suite has.

    ``bench``: only the combinations that one of these regexes finds (asv's ``-b`` meaning).
    """
    found = list(combinations(discover(benchmark_dir)))
    selected = [combination.name for combination in found if combination.reason is None
                and (not bench or any(re.search(regex, combination.name) for regex in bench))]
    return regex(selected), len(selected), len(found)


def cmd_preselect(args: argparse.Namespace) -> int:
    if args.list:
        for combination in combinations(discover(args.benchmark_dir)):
            print(f"{combination.name}\t{combination.reason or 'runs'}")
        return 0
    selected, count, total = pattern(args.benchmark_dir)
    print(selected)
    log.info(f"asv will run {count} of the suite's {total} combinations")
    return 0


def add_subcommand(commands: Any) -> None:
    """Register ``mpsbench preselect`` on the CLI's subparsers."""
    parser = commands.add_parser(
        "preselect", help="print an asv -b pattern naming exactly the combinations this run times",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--benchmark-dir", type=Path, default=Path("benchmarks"),
                        help="the suite's benchmark package (default: benchmarks)")
    parser.add_argument("--list", action="store_true",
                        help="print every combination, a tab, and why this run leaves it out ('runs' if it does not)")
    parser.set_defaults(func=cmd_preselect)

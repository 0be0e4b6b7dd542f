"""Every name taken from asv's and asv_runner's code (asv's public API is its CLI), imported when
used; tests/test_asv_internals.py fails on versions other than those read from."""

from __future__ import annotations

import importlib
from typing import Any

ASV = "0.6.6"
ASV_RUNNER = "0.3.2"

# name: (module, attribute or None for the module, where used)
USES: dict[str, tuple[str, str | None, str]] = {
    "make_argparser": ("asv.commands", "make_argparser", "core.asv, core.asv_saving"),
    "Config": ("asv.config", "Config", "core.asv, core.asv_saving, regressions.fresh"),
    "get_environments": ("asv.environment", "get_environments", "core.asv"),
    "ExistingEnvironment": ("asv.environment", "ExistingEnvironment", "core.asv_saving"),
    "runner": ("asv.runner", None, "core.asv_saving: run functions and Results methods"),
    "run_command": ("asv.commands.run", None, "core.asv_saving rebinds its run_benchmarks"),
    "asv_main": ("asv.main", "main", "core.asv_saving"),
    "BenchmarkResult": ("asv.runner", "BenchmarkResult", "core.asv_saving"),
    "combine_profile_data": ("asv.runner", "_combine_profile_data", "core.asv_saving"),
    "load_json": ("asv.util", "load_json", "core.asvconf, results.recorded"),
    "UserError": ("asv.util", "UserError", "results.recorded"),
    "human_value": ("asv.util", "human_value", "regressions.rank_ops"),
    "Machine": ("asv.machine", "Machine", "results.recorded: .api_version"),
    "Results": ("asv.results", "Results", "results.recorded: .load"),
    "get_filename": ("asv.results", "get_filename", "results.recorded"),
    "get_result_hash_from_prefix": (
        "asv.results",
        "get_result_hash_from_prefix",
        "results.recorded",
    ),
    "iter_results_paths": ("asv.results", "iter_results_paths", "results.recorded"),
    "Benchmarks": ("asv.benchmarks", "Benchmarks", "regressions.fresh"),
    "get_err": ("asv_runner.statistics", "get_err", "regressions.rule"),
    "SkipNotImplemented": (
        "asv_runner.benchmarks.mark",
        "SkipNotImplemented",
        "measure.skips, regressions.serve_build",
    ),
    "get_benchmark_from_name": (
        "asv_runner.discovery",
        "get_benchmark_from_name",
        "regressions.serve_build, regressions.profile_step",
    ),
    "disc_benchmarks": ("asv_runner.discovery", "disc_benchmarks", "measure.preselect"),
}
STANDALONE = {  # import asv_runner themselves
    "regressions/serve_build.py": "runs as python -S in asv's environment, which may lack mpsbench",
}
# Relied on without importing it.
RELIED = (
    "site.patches: the statements and tags of asv's published pages it rewrites",
    "core.asv_saving.skip_reason: asv_runner's 'asv: skipped: <repr>' line",
    "core.asv_saving._rounds: asv's get_rounds",
    "measure.models: asv_runner.server imported in asv's forkserver and its children",
    "core.asv.RUN_BUILDS: asv's discovery installs each branch's newest build when one is refused",
    "core.asv.end: a forkserver's command ends 'run_server DIR SOCKET', SOCKET in a folder"
    " asv-forkserver-* removed only when asv ends normally",
)


def __getattr__(name: str) -> Any:
    if name not in USES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute, _ = USES[name]
    found = importlib.import_module(module)
    return found if attribute is None else getattr(found, attribute)

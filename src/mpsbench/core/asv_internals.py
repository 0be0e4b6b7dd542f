"""Every name mpsbench takes from asv's and asv_runner's Python code (asv's public API is its CLI),
imported when first used (asv's environments hold only asv_runner). tests/test_asv_internals.py
fails on other versions than those read from, naming each use to re-check; only the STANDALONE
modules import asv_runner themselves."""

from __future__ import annotations

import importlib
from typing import Any

ASV = "0.6.6"
ASV_RUNNER = "0.3.2"

# name: (module, its attribute or None for the module itself, where mpsbench uses it)
USES: dict[str, tuple[str, str | None, str]] = {
    "make_argparser": ("asv.commands", "make_argparser", "core.asv.run_args, asv_saving.main"),
    "Config": ("asv.config", "Config", "core.asv, core.asv_saving, regressions.fresh: .load"),
    "get_environments": ("asv.environment", "get_environments", "core.asv.environment_python"),
    "ExistingEnvironment": ("asv.environment", "ExistingEnvironment", "core.asv_saving"),
    "runner": (
        "asv.runner",
        None,
        "core.asv_saving wraps run_benchmarks, run_benchmark, get_spawner, Results.save; reads"
        " Results.add_result/get_result_keys/get_result_samples",
    ),
    "run_command": ("asv.commands.run", None, "core.asv_saving rebinds its run_benchmarks"),
    "asv_main": ("asv.main", "main", "core.asv_saving.main"),
    "BenchmarkResult": ("asv.runner", "BenchmarkResult", "core.asv_saving._combined"),
    "combine_profile_data": ("asv.runner", "_combine_profile_data", "core.asv_saving._combined"),
    "load_json": ("asv.util", "load_json", "core.asvconf.load, results.recorded.machine_named"),
    "UserError": ("asv.util", "UserError", "results.recorded: what asv's readers raise"),
    "human_value": ("asv.util", "human_value", "regressions.rank_ops.format_ranking"),
    "Machine": ("asv.machine", "Machine", "results.recorded.machine_named: .api_version"),
    "Results": ("asv.results", "Results", "results.recorded.read: .load"),
    "get_filename": ("asv.results", "get_filename", "results.recorded.filename"),
    "get_result_hash_from_prefix": (
        "asv.results",
        "get_result_hash_from_prefix",
        "results.recorded.full_hash",
    ),
    "iter_results_paths": ("asv.results", "iter_results_paths", "results.recorded._results"),
    "Benchmarks": ("asv.benchmarks", "Benchmarks", "regressions.fresh: benchmark_selection"),
    "get_err": ("asv_runner.statistics", "get_err", "regressions.rule.noise"),
    "SkipNotImplemented": (
        "asv_runner.benchmarks.mark",
        "SkipNotImplemented",
        "measure.skips, regressions.serve_build (STANDALONE)",
    ),
    "get_benchmark_from_name": (
        "asv_runner.discovery",
        "get_benchmark_from_name",
        "regressions.serve_build (STANDALONE), regressions.profile_step (set_cache,"
        " _current_params)",
    ),
    "disc_benchmarks": ("asv_runner.discovery", "disc_benchmarks", "measure.preselect.discover"),
}
STANDALONE = {
    "regressions/serve_build.py": "runs as python -S in asv's environment, which may lack mpsbench",
}
# What mpsbench relies on from these versions without importing it; site.patches's statements too.
RELIED = (
    "site.patches: the statements and tags of asv's published pages it rewrites",
    "core.asv_saving.skip_reason: asv_runner's 'asv: skipped: <repr>' line",
    "core.asv_saving._rounds: asv's get_rounds (a benchmark's or -a rounds)",
    "measure.models: asv_runner.server imported in asv's forkserver and its children",
    "core.asv.RUN_BUILDS: asv's discovery installs each branch's newest build when one is refused",
    "core.asv.end: a forkserver's command ends 'run_server DIR SOCKET', SOCKET in a folder"
    " asv-forkserver-* that asv removes only when it ends normally",
)


def __getattr__(name: str) -> Any:
    if name not in USES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute, _ = USES[name]
    found = importlib.import_module(module)
    return found if attribute is None else getattr(found, attribute)

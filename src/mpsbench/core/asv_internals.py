"""Every name taken from asv's and asv_runner's code; tests fail on other versions."""

from __future__ import annotations

import importlib
from typing import Any

ASV = "0.6.6"
ASV_RUNNER = "0.3.2"

_SAME_NAME = {
    "asv.commands": ("make_argparser",),
    "asv.config": ("Config",),
    "asv.environment": ("get_environments", "ExistingEnvironment"),
    "asv.machine": ("Machine",),
    "asv.results": ("Results", "get_filename", "get_result_hash_from_prefix", "iter_results_paths"),
    "asv.runner": ("BenchmarkResult",),
    "asv.util": ("load_json", "UserError", "human_value"),
    "asv_runner.benchmarks.mark": ("SkipNotImplemented",),
    "asv_runner.discovery": ("get_benchmark_from_name", "disc_benchmarks"),
    "asv_runner.statistics": ("get_err",),
}
# name: (module, attribute; None: the module)
USES: dict[str, tuple[str, str | None]] = {
    **{name: (module, name) for module, names in _SAME_NAME.items() for name in names},
    "runner": ("asv.runner", None),
    "run_command": ("asv.commands.run", None),
    "asv_main": ("asv.main", "main"),
    "combine_profile_data": ("asv.runner", "_combine_profile_data"),
}
STANDALONE = {
    "regressions/serve_build.py": "runs as python -S in asv's environment, which may lack mpsbench",
}
RELIED = (
    "site.patches: the statements and tags of asv's published pages it rewrites",
    "core.asv_saving.skip_reason: asv_runner's 'asv: skipped: <repr>' line",
    "core.asv_saving._rounds: asv's get_rounds",
    "measure.models: asv_runner.server imported in asv's forkserver and its children",
    "core.asv.RUN_BUILDS: asv's discovery installs each branch's newest build",
    "core.asv.end: a forkserver runs 'run_server DIR SOCKET', SOCKET in an asv-forkserver-* folder"
    " asv removes only when it ends normally",
)


def __getattr__(name: str) -> Any:
    if name not in USES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = USES[name]
    found = importlib.import_module(module)
    return found if attribute is None else getattr(found, attribute)

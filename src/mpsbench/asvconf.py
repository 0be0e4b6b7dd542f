"""Derived asv configurations: the suite's asv.conf.json pointed at another timeline and folders.

Calibration and the integration tests run the real suite, with the real install
command, against a timeline and result folders of their own; this writes the
asv.conf.json they use, derived from the repository's, so that nothing drifts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mpsbench import factor

ROOT = Path(__file__).resolve().parents[2]  # the checkout: asv.conf.json, benchmarks/, src/


def derived(workdir: Path, timeline: Path, branches: list[str], root: Path = ROOT,
            results_dir: Path | None = None) -> Path:
    """Write ``workdir/asv.conf.json``: the suite's config with its own timeline and folders.

    ``results_dir`` (default ``workdir/results``) puts results elsewhere: a scratch folder for
    fresh comparisons that must never reach the recorded results.
    """
    conf: dict[str, Any] = dict(factor.read_config(root / "asv.conf.json"))
    conf.update(
        repo=str(timeline), branches=branches, benchmark_dir=str(root / "benchmarks"),
        env_dir=str(workdir / "env"), results_dir=str(results_dir or workdir / "results"), html_dir=str(workdir / "html"),
    )
    for key in ("install_command", "uninstall_command"):
        conf[key] = [command.replace("{conf_dir}", str(root)) for command in conf[key]]
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2) + "\n")
    return path

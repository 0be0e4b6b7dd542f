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


def derived(workdir: Path, timeline: Path, branches: list[str], root: Path = ROOT) -> Path:
    """Write ``workdir/asv.conf.json``: the suite's config with its own timeline and folders."""
    conf: dict[str, Any] = dict(factor.read_config(root / "asv.conf.json"))
    conf.update(
        repo=str(timeline), branches=branches, benchmark_dir=str(root / "benchmarks"),
        env_dir=str(workdir / "env"), results_dir=str(workdir / "results"), html_dir=str(workdir / "html"),
    )
    for key in ("install_command", "uninstall_command"):
        conf[key] = [command.replace("{conf_dir}", str(root)) for command in conf[key]]
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2) + "\n")
    return path


def scratch(config: Path, workdir: Path) -> Path:
    """Write ``workdir/asv.conf.json``: ``config`` with its results going to ``workdir/results``.

    Everything else (timeline, benchmarks, environments, site) stays where
    ``config`` puts it, as absolute paths, so asv reuses the same environments.
    """
    conf: dict[str, Any] = dict(factor.read_config(config))
    base = config.resolve().parent
    for key, default in (("repo", None), ("benchmark_dir", "benchmarks"), ("env_dir", "env"), ("html_dir", "html")):
        value = conf.get(key, default)
        if value is not None and "://" not in str(value):
            conf[key] = str(base / str(value))
    conf["results_dir"] = str(workdir / "results")
    for key in ("install_command", "uninstall_command", "build_command"):
        conf[key] = [command.replace("{conf_dir}", str(base)) for command in conf.get(key, [])]
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2) + "\n")
    return path


def results_dir(config: Path) -> Path:
    """Where ``config`` keeps its recorded results, as asv resolves it (from the config's folder here)."""
    return config.resolve().parent / str(factor.read_config(config).get("results_dir", "results"))

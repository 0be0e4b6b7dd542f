"""Derived asv configurations: the suite's asv.conf.json pointed at another timeline and folders.

Calibration and the integration tests run the real suite, with the real install
command, against a timeline and result folders of their own; this writes the
asv.conf.json they use, derived from the repository's, so that nothing drifts.
"""

from __future__ import annotations

import json
import re
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


_BRANCHES = re.compile(r'("branches"\s*:\s*)\[[^\]]*\]')


def sync_branches(channels: list[str], timeline: Path, config: Path = factor.CONFIG) -> bool:
    """Make ``config``'s ``branches`` the manifest's channels, if ``config`` walks ``timeline``; True if changed.

    asv publishes only the branches it is told (a channel missing there
    vanishes from the site, "Couldn't find ... in branches"), so the list
    follows the manifest every time the timeline is written. The line is
    rewritten in place, keeping the config's comments; a config that walks
    another repository is left alone.
    """
    if not config.is_file():
        return False
    conf = factor.read_config(config)
    repo = conf.get("repo")
    # asv resolves a relative repo from the working directory, as scripts run it: the config's folder
    if not isinstance(repo, str) or (config.parent / repo).resolve() != timeline.resolve():
        return False
    if conf.get("branches") == channels:
        return False
    text = config.read_text(encoding="utf-8")
    updated, count = _BRANCHES.subn(lambda m: m.group(1) + json.dumps(channels), text, count=1)
    if count != 1:
        raise factor.FactorError(f"{config}: \"branches\" must be a list, to follow the manifest's channels"
                                 f" ({', '.join(channels)}); got {conf.get('branches')!r}")
    config.write_text(updated, encoding="utf-8")
    return True

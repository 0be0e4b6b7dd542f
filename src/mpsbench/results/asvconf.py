"""Derived asv configurations, and this platform's launch method, read from the suite's asv.conf.json.

Calibration, the nightly, compare and the tests run the real suite against timelines and result
folders of their own: deriving their configs from the repository's keeps them from drifting.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mpsbench import command
from mpsbench.regressions import factor

ROOT = Path(__file__).resolve().parents[3]  # the checkout: asv.conf.json, benchmarks/, src/


def launch_method(conf: dict[str, Any], platform: str | None = None) -> str:
    """asv's launch method for ``platform`` (default: this one): its entry in launch_method_by_platform, else launch_method."""
    platform = platform or sys.platform
    table = conf.get("launch_method_by_platform") or {}  # sys.platform -> asv launch method, beside asv's own key
    method = table.get(platform) or conf.get("launch_method") or "spawn"  # asv's "auto" is spawn
    if method not in ("spawn", "forkserver"):
        raise factor.FactorError(f"launch method {method!r} for {platform}: asv knows spawn and forkserver")
    return str(method)


def derived(workdir: Path, timeline: Path, branches: list[str], root: Path = ROOT,
            results_dir: Path | None = None) -> Path:
    """Write ``workdir/asv.conf.json``: the suite's config with its own timeline and folders.

    ``results_dir`` (default ``workdir/results``): a scratch folder keeps fresh comparisons out of the record.
    """
    conf: dict[str, Any] = dict(factor.read_config(root / "asv.conf.json"))
    conf.update(
        repo=str(timeline), branches=branches, benchmark_dir=str(root / "benchmarks"),
        env_dir=str(workdir / "env"), results_dir=str(results_dir or workdir / "results"), html_dir=str(workdir / "html"),
        launch_method=launch_method(conf),  # this platform's, so every asv command on it gets it unasked
    )
    return _write(workdir, conf, root)


def scratch(config: Path, workdir: Path) -> Path:
    """Write ``workdir/asv.conf.json``: ``config`` with its results in ``workdir/results``, the rest absolute (the same envs)."""
    conf: dict[str, Any] = dict(factor.read_config(config))
    base = config.resolve().parent
    for key, default in (("repo", None), ("benchmark_dir", "benchmarks"), ("env_dir", "env"), ("html_dir", "html")):
        value = conf.get(key, default)
        if value is not None and "://" not in str(value):
            conf[key] = str(base / str(value))
    conf["results_dir"] = str(workdir / "results")
    return _write(workdir, conf, base)


def _write(workdir: Path, conf: dict[str, Any], conf_dir: Path) -> Path:
    """Write ``workdir/asv.conf.json``; its commands keep the ``{conf_dir}`` they were written for, not workdir."""
    for key in ("install_command", "uninstall_command", "build_command"):
        if key in conf:
            conf[key] = [command.replace("{conf_dir}", str(conf_dir)) for command in conf[key]]
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2) + "\n")
    return path


_BRANCHES = re.compile(r'("branches"\s*:\s*)\[[^\]]*\]')


def sync_branches(channels: list[str], timeline: Path, config: Path = factor.CONFIG) -> bool:
    """Make ``config``'s ``branches`` the manifest's channels, if ``config`` walks ``timeline``; True if changed.

    asv publishes only the branches it is told (a channel missing there vanishes from the site).
    The line is rewritten in place, keeping the config's comments.
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


def main(argv: list[str] | None = None) -> int:
    """``python -m mpsbench.results.asvconf launch-method [CONFIG]``: print this platform's launch method."""
    parser = command.OneLineParser(prog="python -m mpsbench.results.asvconf")
    parser.add_argument("action", choices=["launch-method"])
    parser.add_argument("config", nargs="?", type=Path, default=factor.CONFIG, metavar="ASV_CONF_JSON")
    parser.set_defaults(func=lambda args: print(launch_method(factor.read_config(args.config))) or 0)
    return command.run(parser, argv)


if __name__ == "__main__":
    sys.exit(main())

"""The suite's asv.conf.json, checked, and configs made from it."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from mpsbench.core import asv_internals, files
from mpsbench.core.errors import UserError

CONFIG = Path("asv.conf.json")
ROOT = Path(__file__).resolve().parents[3]  # compare's build servers import its src/
LAUNCH_METHODS = ("spawn", "forkserver")
FOLDERS = {  # asv's defaults
    "benchmark_dir": "benchmarks",
    "env_dir": "env",
    "results_dir": "results",
    "html_dir": "html",
}


@dataclass(frozen=True)
class AsvConf:
    """Folders resolve from its own."""

    path: Path  # absolute
    raw: dict[str, Any]

    @property
    def root(self) -> Path:
        return self.path.parent

    def folder(self, key: str) -> Path:
        return self.root / str(self.raw.get(key, FOLDERS[key]))

    @property
    def results(self) -> Path:
        return self.folder("results_dir")

    @property
    def benchmarks(self) -> Path:
        return self.folder("benchmark_dir")

    @property
    def html(self) -> Path:
        return self.folder("html_dir")

    @property
    def repo(self) -> Path | None:
        """None where ``repo`` is a URL."""
        repo = self.raw.get("repo")
        return None if repo is None or "://" in repo else (self.root / repo).resolve()

    @property
    def branches(self) -> list[str]:
        return list(self.raw.get("branches", ["main"]))

    @cached_property
    def thresholds(self) -> dict[str, float]:
        return {
            regex: float(value)
            for regex, value in (self.raw.get("regressions_thresholds") or {}).items()
        }

    def launch_method(self, platform: str | None = None) -> str:
        table = self.raw.get("launch_method_by_platform") or {}
        return table.get(platform or sys.platform) or self.raw.get("launch_method") or "spawn"

    def derive(
        self, workdir: Path, timeline: Path, branches: list[str], results: Path | None = None
    ) -> Path:
        """This config in ``workdir``, on another timeline."""
        return self._write(
            workdir,
            results,
            repo=str(timeline),
            branches=branches,
            env_dir=str(workdir / "env"),
            html_dir=str(workdir / "html"),
        )

    def scratch(self, workdir: Path) -> Path:
        """This config in ``workdir``, its results there."""
        if "repo" not in self.raw:  # asv would get the word None
            raise UserError(
                f"{self.path}: repo is missing: it must name the timeline asv walks"
                " (e.g. .asv/timeline)"
            )
        return self._write(workdir, None, repo=str(self.repo or self.raw["repo"]))

    def _write(self, workdir: Path, results: Path | None, **fields: Any) -> Path:
        conf = {
            **self.raw,
            **{key: str(self.folder(key)) for key in FOLDERS},
            "results_dir": str(results or workdir / "results"),
            **fields,
            "launch_method": self.launch_method(),
        }
        for key in ("install_command", "uninstall_command", "build_command"):
            if key in conf:
                conf[key] = [command.replace("{conf_dir}", str(self.root)) for command in conf[key]]
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / CONFIG
        files.write(path, json.dumps(conf, indent=2) + "\n")
        return path

    def sync_branches(self, channels: list[str], timeline: Path) -> bool:
        """To the manifest's channels (asv publishes only those); True if changed."""
        if self.repo != timeline.resolve() or self.raw.get("branches") == channels:
            return False
        updated, count = re.subn(
            r'("branches"\s*:\s*)\[[^\]]*\]',
            lambda m: m.group(1) + json.dumps(channels),
            self.path.read_text(encoding="utf-8"),
            count=1,
        )
        if count != 1:
            raise UserError(
                f"{self.path}: branches must be a list to follow the channels"
                f" {', '.join(channels)}; got {self.raw.get('branches')!r}"
            )
        files.write(self.path, updated)
        self.raw["branches"] = channels
        return True


def load(path: Path = CONFIG) -> AsvConf:
    try:
        raw = asv_internals.load_json(str(path), js_comments=True)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise UserError(f"{path} must hold a JSON object")
    if problem := next(_problems(raw), None):
        raise UserError(f"{path}: {problem}")
    return AsvConf(path.resolve(), raw)


def _problems(raw: dict[str, Any]) -> Iterator[str]:
    table = raw.get("launch_method_by_platform") or {}
    thresholds = raw.get("regressions_thresholds", {})
    branches = raw.get("branches", [])
    for field, what, ok in [
        *((key, "a path", isinstance(raw.get(key, ""), str)) for key in ("repo", *FOLDERS)),
        (
            "branches",
            "a list of branch names",
            isinstance(branches, list) and all(isinstance(b, str) for b in branches),
        ),
        (
            "regressions_thresholds",
            "an object of regexes to fractions",
            isinstance(thresholds, dict),
        ),
        (
            "launch_method_by_platform",
            "an object of platforms to launch methods",
            isinstance(table, dict),
        ),
    ]:
        if not ok:
            yield f"{field} must be {what}, got {raw.get(field)!r}"
    for regex, value in thresholds.items():
        if type(value) not in (int, float) or not 0 <= value < math.inf:
            yield f"regressions_thresholds[{regex!r}] must be a fraction >= 0, got {value!r}"
        try:
            re.compile(regex)
        except re.error as exc:
            yield f"regressions_thresholds has a key {regex!r} that is no regex ({exc})"
    for where, method in [
        ("launch_method", raw.get("launch_method") or "spawn"),
        *((f"launch_method_by_platform[{key!r}]", value) for key, value in table.items()),
    ]:
        if method not in LAUNCH_METHODS:
            yield f"{where} is {method!r}: asv knows {' and '.join(LAUNCH_METHODS)}"

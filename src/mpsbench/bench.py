"""Check the set-up, generate the timeline, write the machine entry, record what each planned asv
run is missing, publish the site (scripts/bench)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mpsbench.builds import defaults, machine, timeline
from mpsbench.context import Suite
from mpsbench.core import asv, progress, text
from mpsbench.core.errors import UserError
from mpsbench.measure import devices, selection
from mpsbench.results import merge, record
from mpsbench.site import publish

log = progress.logger(__name__)


def require_torch() -> Any:
    """torch, or a one-line UserError: the rest of mpsbench runs without it."""
    try:
        import torch
    except ImportError as exc:
        raise UserError(
            f"this command needs torch, which is not installed here ({exc}): pip install torch"
        ) from None
    return torch


def check_setup() -> str:
    selection.selected_devices()
    rows = [["device", "usable", "details"]]
    for name in devices.NAMES:
        found = devices.get(name).availability()
        rows.append([name, "yes" if found.usable else "no", found.reason])
    return f"torch {require_torch().__version__}\n{text.table(rows)}"


def plan(suite: Suite) -> list[asv.RunArgs]:
    """An asv run per Python of the default timeline."""
    platform, planned, skipped = defaults.this_machine(suite.manifest)
    print(defaults.listing(platform, planned, suite.timeline))
    for line in skipped:
        log.info(line)
    runs, folder = [], suite.timeline_path.resolve().parent  # absolute for asv
    for python in defaults.pythons(planned):
        commits = [suite.timeline.commits[item.ref] for item in planned if python in item.pythons]
        hashes = asv.write_hashfile(folder / f"default-py{python}.txt", commits)
        runs.append(asv.run_args(["-E", f"virtualenv:{python}", hashes]))
    return runs


def _state(suite: Suite) -> str:
    digest, refs = hashlib.sha256(), suite.timeline_path / ".git"
    site_code = Path(publish.__file__).parent
    for folder in (suite.conf.results, refs / "refs", refs / "packed-refs", site_code):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else [folder]:
            if path.is_file():
                digest.update(f"{path}\0".encode() + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def publish_site(suite: Suite, only_if_changed: bool = False) -> None:
    results, html = suite.conf.results, suite.conf.html
    if not publish.measured_builds(results):
        log.info(f"nothing recorded in {results} yet: no site to publish")
        return
    stamp, state = merge.beside(results, "-published.txt"), _state(suite)
    unchanged = stamp.is_file() and stamp.read_text() == state and (html / "index.html").is_file()
    if only_if_changed and unchanged:
        log.info(f"the site in {html} is up to date: nothing recorded since it was published")
        return
    publish.publish(suite)
    stamp.write_text(state)


def bench(suite: Suite, asv_args: Sequence[str] = (), remeasure: bool = False) -> int:
    generated = suite.generate()  # ranges are checked against it
    run = asv.run_args(asv_args)
    record.check_meaning(run)
    given, chosen = [], None
    if asv_args:
        if refused := timeline.range_refusal(suite.timeline_path, run.range):
            raise UserError(refused)
        given, chosen = [run], record.select(suite.conf, run.bench) if run.bench else None
    print(check_setup())
    print(timeline.summary(suite.manifest, generated, suite.timeline_path))
    name = machine.write()[0]
    status, published = 0, False
    for run in given or plan(suite):
        launched = run.before("--launch-method", suite.conf.launch_method())
        steps = record.record(suite.conf, name, launched, suite.disk(run), remeasure, chosen)
        with contextlib.closing(steps):  # on any exit: held values said, lock released
            for done in steps:
                status = done.status or status
                if done.recorded and (done.step.tier == "first tier" or done.build_done):
                    publish_site(suite)
                    published = True
    if not published:
        publish_site(suite, only_if_changed=True)
    if status:
        log.info(
            f"asv exited with status {status}: some benchmarks failed (see above);"
            " the site shows the rest"
        )
    return status

"""`mpsbench bisect --nightlies`: the nightlies between two adjacent builds, added on a bisection channel.

A local PEP 503 index (file://) of stand-in torch nightlies, 2026-11-10 to
2026-11-17, the slowdown from 11-15 on (tests/fakes.py's wheels: the torch
module sets the delay the stand-in suite of tests/test_compare.py sleeps). The
manifest's nightly channel holds only 11-10 and 11-17, adjacent: the command
must add nightlies between them, bisect among them through real asv, name
11-15, and leave every existing timeline hash and the recorded results as they were.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import pytest
from tests import fakes
from tests.test_compare import BENCH, ROUNDS, _mpsbench, make_suite

from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve, timeline
from mpsbench.context import Suite
from mpsbench.regressions import nightlies

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
NIGHTS = [f"2026-11-{day}" for day in range(10, 18)]
SLOW_FROM = "2026-11-15"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project whose nightly channel holds 11-10 (fast) and 11-17 (slow), and an index of every night between."""
    base = tmp_path_factory.mktemp("nightlies")
    files = base / "files"
    files.mkdir()
    wheels = [
        fakes.make_wheel(
            files,
            "torch",
            f"2.15.0.dev{night.replace('-', '')}+cpu",
            python=TAG,
            git_version=night.replace("-", "").ljust(40, "0"),
            built=datetime.fromisoformat(f"{night}T03:00:00"),
            module=f"DELAY = {0.06 if night >= SLOW_FROM else 0.02}\n",
        )
        for night in NIGHTS
    ]
    wheels += [
        fakes.make_wheel(
            files, "torchvision", f"0.30.0.dev{night.replace('-', '')}+cpu", python=TAG
        )
        for night in NIGHTS
    ]  # PyTorch's nightly index has both; resolve.nightly pins the day's torchvision
    index = str(fakes.make_index(base / "simple", wheels))
    manifest = mf.Manifest()
    for night in (NIGHTS[0], NIGHTS[-1]):
        build = resolve.nightly(
            night, indexes=(index,), pythons=(TAG,), transformers="none", transformers_index=index
        )
        manifest = mf.append(manifest, "nightly", build)
    mf.save(manifest, base / "builds" / "manifest.json")
    timeline.generate(manifest, base / ".asv" / "timeline")
    make_suite(base)
    return base, index, {path.name: fakes.sha256(path) for path in wheels}


def _refs(repo) -> dict[str, str]:
    listed = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split() for line in listed.splitlines())


@pytest.mark.slow
def test_bisect_adds_nightlies_between_adjacent_builds_and_names_the_first_slow_one(project):
    base, index, digests = project
    before = timeline.compute(
        mf.load(base / "builds" / "manifest.json"), base / ".asv" / "timeline"
    ).commits
    refs = _refs(base / ".asv" / "timeline")
    done = _mpsbench(
        base,
        "bisect",
        "nightly@2026-11-10",
        "nightly@2026-11-17",
        "-b",
        BENCH,
        *ROUNDS,
        "--nightlies",
        "--index",
        index,
        "--transformers-index",
        index,
        "--transformers",
        "none",
    )
    print(
        done.stdout, done.stderr
    )  # shown when the test fails (and with -s: the transcript in docs/explanation/the-rule.md)
    assert done.returncode == 0, done.stdout + done.stderr
    channel = "bisect-nightly-2026-11-10"
    # six nightlies between, three added (the default), spread by date
    assert (
        f"6 nightlies between nightly@2026-11-10 and nightly@2026-11-17; adding 3 spread by date (--nightlies 3)"
        f" on {channel}: 2026-11-12, 2026-11-14, 2026-11-15"
    ) in done.stdout
    assert (
        f"first bad build: {channel}@2026-11-15 (the build before it, {channel}@2026-11-14, is good)"
        in done.stdout
    )
    assert (
        "PyTorch commits to read: bisect-nightly-2026-11-10@2026-11-14 (torch 2.15.0.dev20261114"
        in done.stdout
    )
    # one step measures the three added nightlies together, beside both endpoints (bisection.probes: all of three)
    assert (
        f"mpsbench bisection: step over {channel}@2026-11-12, {channel}@2026-11-14, {channel}@2026-11-15"
        " (3 candidates left)" in done.stderr
    )
    assert (
        f"no nightly between {channel}@2026-11-14 (2026-11-14) and {channel}@2026-11-15"
        in done.stdout
    )

    manifest = mf.load(base / "builds" / "manifest.json")
    added = manifest.channel(channel)
    assert added is not None and added.parent == "nightly@2026-11-10"
    assert [build.id for build in added.builds] == ["2026-11-12", "2026-11-14", "2026-11-15"]
    for build in added.builds:  # pinned like any nightly: the index's wheel and its sha256
        assert (
            build.kind == "nightly"
            and build.torch_version == f"2.15.0.dev{build.id.replace('-', '')}"
        )
        pins = build.pins["linux-x86_64-cpu"]
        assert sorted(pin.name for pin in pins) == ["torch", "torchvision"]
        assert all(
            pin.sha256 == digests[pin.filename] and pin.url.startswith("file://") for pin in pins
        )

    # no existing hash moved: `mpsbench timeline generate` keeps every old commit and ref
    generate = subprocess.run(
        [sys.executable, "-m", "mpsbench.cli", "timeline", "generate"],
        cwd=base,
        capture_output=True,
        text=True,
    )
    assert generate.returncode == 0, generate.stdout + generate.stderr
    after = timeline.compute(manifest, base / ".asv" / "timeline").commits
    assert {name: after[name] for name in before} == before
    now = _refs(base / ".asv" / "timeline")
    assert {ref: now[ref] for ref in refs} == refs
    assert f"refs/heads/{channel}" in now


def test_nightlies_are_picked_spread_by_date_and_named_by_their_stamp():
    days = [f"2026-11-{day}" for day in range(11, 17)]
    assert nightlies.spread(days, 3) == [
        "2026-11-12",
        "2026-11-14",
        "2026-11-15",
    ]  # 4 runs of 1-2 nights
    assert nightlies.spread(days, 1) == ["2026-11-14"]
    assert nightlies.spread(days, 5) == [
        "2026-11-11",
        "2026-11-12",
        "2026-11-14",
        "2026-11-15",
        "2026-11-16",
    ]
    assert nightlies.spread(days[:2], 3) == days[:2]
    assert nightlies.channel_name("nightly@2026-11-10") == "bisect-nightly-2026-11-10"
    assert (
        nightlies.channel_name("bisect-nightly-2026-11-10@2026-11-12")
        == "bisect-nightly-2026-11-10-2026-11-12"
    )
    build = mf.Build(
        id="x",
        torch_version="2.15.0.dev20261114+cpu",
        date="2026-11-15T01:00:00Z",
        git_version="a" * 40,
        kind="nightly",
        pins={},
    )
    assert (
        str(nightlies.day(build)) == "2026-11-14"
    )  # the version's stamp, not the wheel's timestamp


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_bad_nightlies_budget_is_one_line_and_exit_2_before_anything_is_written(
    project, tmp_path, value
):
    base, index, _ = project
    manifest = (base / "builds" / "manifest.json").read_bytes()
    unwritten = tmp_path / "timeline"  # naming the builds would write it
    done = _mpsbench(
        base,
        "bisect",
        "nightly@2026-11-10",
        "nightly@2026-11-17",
        "-b",
        BENCH,
        f"--nightlies={value}",
        "--index",
        index,
        "--timeline",
        str(unwritten),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    says = (
        f"mpsbench: error: argument --nightlies: --nightlies must be a whole number of at least 1, got {value!r}"
        " (see mpsbench bisect --help)"
    )
    assert done.stderr.strip() == says
    assert (base / "builds" / "manifest.json").read_bytes() == manifest
    assert not unwritten.exists()


def test_the_budget_counts_for_the_whole_bisection_and_a_second_run_reuses_the_channel(
    project, tmp_path, capsys
):
    base, index, _ = project
    manifest = mf.load(base / "builds" / "manifest.json")
    manifest = mf.Manifest(
        tuple(c for c in manifest.channels if c.name == "nightly")
    )  # as before any bisect
    mf.save(manifest, tmp_path / "manifest.json")

    def gaps(count: int) -> nightlies.Gaps:
        adding = nightlies.Options(count, (index,), "none", index)
        suite = Suite(manifest_path=tmp_path / "manifest.json", timeline_path=tmp_path / "timeline")
        return nightlies.Gaps(adding, suite)

    one = gaps(1)
    added = one.fill("nightly@2026-11-10", "nightly@2026-11-17")
    assert [build.name for build in added] == [
        "bisect-nightly-2026-11-10@2026-11-14"
    ]  # the middle of six
    assert (
        added[0].commit
        == timeline.compute(mf.load(tmp_path / "manifest.json"), tmp_path / "timeline").commits[
            added[0].name
        ]
    )
    assert (
        one.fill(added[0].name, "nightly@2026-11-17") == []
    )  # the budget is spent: says so, adds nothing
    assert (
        "2 nightlies between bisect-nightly-2026-11-10@2026-11-14 and nightly@2026-11-17 (2026-11-15 .. 2026-11-16)"
        " were not measured: the --nightlies budget (1) is spent"
    ) in capsys.readouterr().out
    saved = (tmp_path / "manifest.json").read_bytes()
    again = gaps(2).fill("nightly@2026-11-10", "nightly@2026-11-17")
    assert [build.name for build in again] == ["bisect-nightly-2026-11-10@2026-11-14"]
    assert "reusing 1 nightlies of bisect-nightly-2026-11-10" in capsys.readouterr().out
    assert (tmp_path / "manifest.json").read_bytes() == saved  # nothing resolved or added again

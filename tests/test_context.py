"""The context a command builds once: asv.conf.json and the manifest parsed once per command, builds named one way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mpsbench import bench, cli
from mpsbench.builds import defaults, disk
from mpsbench.builds import manifest as mf
from mpsbench.context import Suite
from mpsbench.core import asv, asvconf
from mpsbench.measure import quiet
from mpsbench.regressions import fresh
from mpsbench.results import record
from mpsbench.results.watch import Step

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def suite_copy(tmp_path, monkeypatch):
    """The suite's config and manifest in a folder of their own (its benchmarks are the checkout's), run from there."""
    (tmp_path / "builds").mkdir()
    shutil.copy(ROOT / "builds" / "manifest.json", tmp_path / "builds" / "manifest.json")
    conf = asvconf.load(ROOT / "asv.conf.json").raw
    (tmp_path / "asv.conf.json").write_text(
        json.dumps({**conf, "benchmark_dir": str(ROOT / "benchmarks")})
    )
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the machine file
    monkeypatch.setenv("MPSBENCH_DEVICES", "cpu")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stand_in_asv(monkeypatch) -> tuple[list[list[str]], list[Suite]]:
    """asv's own processes stand in: a run measures nothing; what asv was asked to run, and what
    publish was handed."""
    ran: list[list[str]] = []
    published: list[Suite] = []
    monkeypatch.setattr(
        asv,
        "supervise",
        lambda command, cwd, env, tick, every=1.0, output=None: ran.append(command) or 0,
    )
    monkeypatch.setattr(bench.publish, "publish", published.append)
    return ran, published


def test_the_main_command_parses_asv_conf_json_and_the_manifest_once(
    suite_copy, monkeypatch, capsys
):
    parsed: Counter[str] = Counter()
    load_conf, load_manifest = asvconf.load, mf.load
    monkeypatch.setattr(
        asvconf, "load", lambda *args: parsed.update(["asv.conf.json"]) or load_conf(*args)
    )
    monkeypatch.setattr(
        mf, "load", lambda *args: parsed.update(["manifest"]) or load_manifest(*args)
    )
    ran, published = _stand_in_asv(monkeypatch)
    # as if a value were recorded: publish is reached (with none, bench says there is no site yet)
    monkeypatch.setattr(bench.publish, "measured_builds", lambda results: {"a build"})
    assert cli.main(["bench", "-b", r"Training\.time_step\('cpu', 'mlp', 8\)", "release^!"]) == 0
    assert parsed == {"asv.conf.json": 1, "manifest": 1}
    assert len(ran) == 1 and ran[0][-1].startswith("HASHFILE:")  # one asv run, over the one build
    assert published[0].conf.results == suite_copy / ".asv" / "results"
    out = capsys.readouterr().out
    assert out.startswith("torch ") and "timeline written to .asv/timeline" in out


def test_bench_parses_asv_runs_arguments_once_for_the_run(suite_copy, monkeypatch):
    """Checked, planned, sized and recorded from one parse of the arguments given."""
    parsed, run_args = [], asv.run_args
    monkeypatch.setattr(asv, "run_args", lambda args: parsed.append(list(args)) or run_args(args))
    ran, _ = _stand_in_asv(monkeypatch)
    given = ["-b", r"Training\.time_step\('cpu', 'mlp', 8\)", "release^!"]
    assert cli.main(["bench", *given]) == 0
    assert parsed == [given]
    # the launch method goes in front of the given options, as a parse of both would have it
    assert ran[0][ran[0].index("--launch-method") + 1] == asvconf.load().launch_method()


@pytest.mark.parametrize(
    "command",
    [
        ["compare", "release@2.13.0", "release@2.14.1"],
        ["bisect", "release@2.13.0", "release@2.15.0"],
        ["explain", "release@2.13.0", "release@2.14.1"],
    ],
)
def test_compare_bisect_and_explain_read_asv_conf_json_once(
    suite_copy, monkeypatch, capsys, command
):
    """The options' check, the fresh session and its derived config share one read."""
    parsed: Counter[Path] = Counter()
    load_conf = asvconf.load
    monkeypatch.setattr(
        asvconf, "load", lambda *args: parsed.update([Path(*args)]) or load_conf(*args)
    )

    def discover(session: fresh.Session, commit: str) -> str:
        raise cli.UserError("stopped where asv would discover the suite")

    monkeypatch.setattr(fresh.Session, "check_bench", discover)
    row = r"Training\.time_step\('cpu', 'mlp', 8\)"
    options = ["-b", row, "--machine", "box", "--suite-root", str(suite_copy)]
    assert cli.main([*command, *options]) == 2
    assert "stopped where asv would discover the suite" in capsys.readouterr().err
    assert parsed == {suite_copy / "asv.conf.json": 1}


def test_a_run_that_recorded_nothing_publishes_nothing_and_says_so(suite_copy, monkeypatch, capsys):
    _, published = _stand_in_asv(monkeypatch)
    assert cli.main(["bench", "-b", r"Training\.time_step\('cpu', 'mlp', 8\)", "release^!"]) == 0
    assert published == []
    assert "yet: no site to publish" in capsys.readouterr().err


def test_the_default_runs_hashfiles_lie_beside_the_timeline_not_in_a_fixed_folder(
    suite_copy, monkeypatch
):
    # the config's folder has no .asv: its timeline lives elsewhere
    timeline = suite_copy / "elsewhere" / "timeline"
    suite = Suite(suite_copy / "asv.conf.json", suite_copy / "builds" / "manifest.json", timeline)
    platform = defaults.rule_for(suite.manifest, ["linux-x86_64-cuda"])[
        0
    ]  # the same default on any machine
    planned = defaults.schedule(suite.manifest, platform)
    monkeypatch.setattr(defaults, "this_machine", lambda manifest: (platform, planned, []))
    runs = bench.plan(suite)
    assert [run.rest for run in runs] == [
        ["-E", f"virtualenv:{python}"] for python in defaults.pythons(planned)
    ]
    for run, python in zip(runs, defaults.pythons(planned)):
        hashes = Path((run.range or "").removeprefix("HASHFILE:"))
        assert hashes == timeline.parent / f"default-py{python}.txt"
        assert hashes.read_text().split() == [
            suite.timeline.commits[item.ref] for item in planned if python in item.pythons
        ]
    assert not (suite_copy / ".asv").exists()


def test_a_build_is_named_by_channel_at_id_by_tag_or_by_a_timeline_hash(suite_copy):
    suite = Suite()
    commit = suite.timeline.commits["release@2.14.1"]
    assert {suite.name(ref) for ref in ("release@2.14.1", "v2.14.1", commit, commit[:10])} == {
        "release@2.14.1"
    }
    with pytest.raises(
        cli.UserError,
        match="'0000' names 0 timeline commits; give CHANNEL@ID, a tag or a longer hash",
    ):
        suite.name("0000")


@pytest.mark.parametrize("args", [["-b", "Trainingg"], ["bogus^!"], ["--remeasrue"], ["-b", "("]])
def test_bad_asv_arguments_are_one_line_before_the_set_up_is_printed_or_the_machine_written(
    suite_copy, args, capsys
):
    assert cli.main(["bench", *args]) == 2
    said = capsys.readouterr()
    assert said.out == "" and len(said.err.strip().splitlines()) == 1, said
    assert not list((suite_copy / "home").iterdir())  # no machine file


def test_a_bench_run_with_b_starts_asv_only_for_the_combinations_this_machine_times(
    suite_copy, monkeypatch, capsys
):
    """scripts/tiny-bench's -b names mps and cuda rows too: a cpu-only run (MPSBENCH_DEVICES=cpu) would start a process
    for each of them that only skips, on every re-run."""
    ran, _ = _stand_in_asv(monkeypatch)
    tiny = (
        r"^benchmark_models\.(Training|Inference)\.time_step\('(cpu|mps|cuda)', 'mlp', (8|1024)\)$"
    )
    assert cli.main(["bench", "--skip-existing-successful", "-b", tiny, "release^!"]) == 0
    assert len(ran) == 1
    pattern = ran[0][ran[0].index("-b") + 1]
    names = [
        f"benchmark_models.{kind}.time_step('{device}', 'mlp', {batch})"
        for kind in ("Training", "Inference")
        for device in ("cpu", "mps", "cuda")
        for batch in (8, 1024)
    ]
    assert asv.matching(names, [pattern]) == [name for name in names if "'cpu'" in name]
    said = [line for line in capsys.readouterr().err.splitlines() if "would only skip" in line]
    assert len(said) == 1 and "4 of the 12 combinations it finds run here" in said[0], said


FIRST_AND_OTHER = r"Training\.time_step\('cpu', 'mlp', 8\)$|ComputeBoundOps\.time_forward\('cpu'"


def _locked(folder: Path) -> bool:
    """Whether another process finds ``folder``'s lock (core.files.lock's flock) taken."""
    probe = "import fcntl, os, sys; fcntl.flock(os.open(sys.argv[1], os.O_RDONLY), 6)"  # EX|NB
    return subprocess.run([sys.executable, "-c", probe, str(folder)]).returncode != 0


def test_record_yields_each_step_newest_build_first_tier_first_and_closing_it_ends_the_run(
    suite_copy, monkeypatch
):
    suite = Suite()
    suite.generate()
    codes = iter([0, 1])  # the second step's asv fails; later ones succeed

    def supervise(command, cwd, env, tick, every=1.0, output=None):
        output.parent.mkdir(parents=True, exist_ok=True)
        with open(output, "a") as log:
            log.write("asv's lines\n")
        return next(codes, 0)

    monkeypatch.setattr(asv, "supervise", supervise)
    # every build installs here (this machine's pins and disk are tests/test_record_plan.py's)
    monkeypatch.setattr(disk, "facts", lambda build, python: disk.Facts(0, "installed", True))
    older, newest = (suite.timeline.commits[f"release@{id_}"] for id_ in ("2.14.1", "2.15.0"))
    run = asv.run_args(["-b", FIRST_AND_OTHER, "release~2..release"])
    finished = list(record.record(suite.conf, "box", run, suite.disk(run)))
    assert [(f.step.commit, f.step.tier, f.build_done, f.status) for f in finished] == [
        (newest, "first tier", False, 0),
        (newest, "the rest", True, record.BENCHMARKS_FAILED),
        (older, "every combination", True, 0),
    ]
    assert not any(f.recorded for f in finished)  # asv stood in: nothing was measured
    assert record.status(finished) == record.BENCHMARKS_FAILED

    steps = record.record(suite.conf, "box", run, suite.disk(run))
    assert next(steps).step.tier == "first tier"
    results = suite.conf.results
    assert _locked(results.parent)  # the run holds the results folder's lock between its steps
    steps.close()
    assert not _locked(results.parent)


def test_bench_publishes_after_the_first_tier_and_after_each_build_that_has_a_value(
    suite_copy, monkeypatch
):
    said: list[str] = []
    finished = [
        (Step("new", ("a",), "first tier"), False, True, 0),
        (Step("new", ("b",), "the rest"), True, True, record.BENCHMARKS_FAILED),
        (Step("old", ("a", "b"), "every combination"), True, False, 0),  # the gate held all
    ]

    def steps(*args, **kwargs):
        try:
            for step in finished:
                said.append(step[0].tier)
                yield record.Finished(*step)
        finally:
            said.append("closed")

    monkeypatch.setattr(record, "record", steps)
    monkeypatch.setattr(bench, "publish_site", lambda suite, **_: said.append("publish"))
    monkeypatch.setattr(bench, "check_setup", lambda: "")  # torch's devices: not this test's
    asv_args = ("-b", FIRST_AND_OTHER, "release~2..release")
    assert bench.bench(Suite(), asv_args) == record.BENCHMARKS_FAILED
    assert said == [
        "first tier",
        "publish",
        "the rest",
        "publish",
        "every combination",
        "closed",
    ]

    said.clear()

    def stopped(suite, **_):
        raise KeyboardInterrupt  # Ctrl-C while the site is published

    monkeypatch.setattr(bench, "publish_site", stopped)
    try:
        bench.bench(Suite(), asv_args)
    except KeyboardInterrupt:
        # the run ended (its held values said, its lock released) before Ctrl-C left bench,
        # not whenever its generator is collected
        assert said == ["first tier", "closed"]
    else:
        pytest.fail("Ctrl-C did not stop bench")


@pytest.mark.parametrize("others", [1.6, 0.1], ids=["busy", "quiet"])
def test_the_plan_says_when_the_machine_is_busy_as_it_starts(
    suite_copy, monkeypatch, capsys, others
):
    """The plan's times are a quiet machine's: on a busy one, a line right after it says so."""
    suite = Suite()
    suite.generate()
    monkeypatch.setattr(asv, "supervise", lambda command, cwd, env, tick, every=1.0, output=None: 0)
    monkeypatch.setattr(
        quiet, "read", lambda window=quiet.WINDOW, own=None: quiet.State(2, others, 0.0)
    )
    run = asv.run_args(["-b", FIRST_AND_OTHER, "release^!"])
    list(record.record(suite.conf, "box", run, suite.disk(run)))
    said = capsys.readouterr()
    busy = "the machine is busy now (other processes used 1.6 of 2 cores"
    assert (busy in said.err + said.out) == (others > 1)

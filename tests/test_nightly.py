"""The nightly job end to end on this machine: cpu, a local PEP 503 index, a stand-in torch and a tiny suite.

Each nightly is a small torch wheel whose module sets a delay; the suite's one
benchmark (``benchmark_models.Training.time_step``, as the real one is named)
sleeps that long, so the third nightly is five times slower than the second.
``scripts/nightly`` runs for real, in subprocesses, as the workflow runs it:
resolve (a dry run, then three nights), bench (a dry run, then twice),
collect, publish, alert and bisect (mpsbench bisect, fresh processes). The results branch's git plumbing is
tested against a local bare repository.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from tests import fakes
from tests.test_alerts import nightly_build
from tests.test_compare import _checksums

from mpsbench import cli
from mpsbench.builds import manifest as mf
from mpsbench.core import asv, asvconf
from mpsbench.core.errors import UserError
from mpsbench.fleet import nightly, results_branch
from mpsbench.measure import preselect, selection

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = str(ROOT / "scripts" / "nightly")
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
DELAYS = {
    "2026-11-20": 0.002,
    "2026-11-21": 0.002,
    "2026-11-22": 0.010,
}  # the last night is 5x slower
BENCHMARK = "benchmark_models.Training.time_step('cpu', 'mlp', 8)"
SUITE = '''\
"""A stand-in for the suite: the real one's benchmark name and params, timing the stand-in torch's delay."""
import time

import torch


class Training:
    params = (["cpu", "mps"], ["mlp"], [8])
    param_names = ("device", "model", "batch_size")
    version = "1"
    repeat = (3, 5, 2.0)
    warmup_time = 0

    def time_step(self, device, model, batch_size):
        time.sleep(torch.DELAY)
'''


def _index(tmp: Path, nights: list[str]) -> Path:
    """A PEP 503 index holding the torch and torchvision nightlies of ``nights`` and a transformers release."""
    files = tmp / "files"
    files.mkdir(exist_ok=True)
    wheels = [fakes.make_wheel(files, "transformers", "5.18.0", python="py3", platform="any")]
    for number, date in enumerate(nights, start=1):
        stamp = date.replace("-", "")
        wheels.append(
            fakes.make_wheel(
                files,
                "torch",
                f"2.15.0.dev{stamp}+cpu",
                python=TAG,
                git_version=f"{stamp}{number:032d}",
                built=datetime.fromisoformat(f"{date}T03:00:00"),
                module=f"DELAY = {DELAYS[date]}\n",
            )
        )
        wheels.append(fakes.make_wheel(files, "torchvision", f"0.30.0.dev{stamp}+cpu", python=TAG))
    return fakes.make_index(tmp / "simple", wheels)


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    """Run ``scripts/nightly STEP ...`` against the stand-in suite; returns the runner and the paths."""
    return _night(tmp_path_factory.mktemp("nightly"))


def _night(tmp: Path):
    suite = tmp / "suite"
    (suite / "benchmarks").mkdir(parents=True)
    (suite / "benchmarks" / "__init__.py").write_text("")
    (suite / "benchmarks" / "benchmark_models.py").write_text(SUITE)
    # the repository's manifest, which the fleet's starts as: this suite pins no build of its own
    (suite / "builds").mkdir()
    (suite / "builds" / "manifest.json").write_text(json.dumps({"schema": 1, "channels": []}))
    config = asvconf.load(
        ROOT / "asv.conf.json"
    ).raw  # the real config: branches, install command, thresholds
    for key in ("install_command", "uninstall_command"):
        config[key] = [command.replace("{conf_dir}", str(ROOT)) for command in config[key]]  # type: ignore[attr-defined]
    (suite / "asv.conf.json").write_text(json.dumps(config))
    (tmp / "home").mkdir()
    # MPSBENCH_ACCEPT_BUSY: the nights test the fleet's steps, not the test machine's load
    # (tests/test_quiet_run.py tests the quiet gate): a loaded test machine would hold their values
    # out of the record
    env = dict(
        os.environ,
        HOME=str(tmp / "home"),
        MPSBENCH_CACHE=str(tmp / "cache"),
        MPSBENCH_PLATFORM="linux-x86_64-cpu",
        MPSBENCH_ACCEPT_BUSY="on",
    )
    env.pop("PIP_FIND_LINKS", None)
    env.pop("GITHUB_OUTPUT", None)
    work = suite / ".asv" / "nightly"

    def run(
        *args: str, nights: list[str] | None = None, **extra_env: str
    ) -> subprocess.CompletedProcess[str]:
        extra = []
        if nights is not None:
            index = str(_index(tmp, nights))
            extra = ["--index", index, "--transformers-index", index]
        done = subprocess.run(
            [NIGHTLY, *args, "--suite", str(suite), *extra],
            env={**env, **extra_env},
            capture_output=True,
            text=True,
            timeout=600,
        )
        print(
            f"$ scripts/nightly {' '.join(args)}\n{done.stdout}{done.stderr}"
        )  # shown when a test fails
        # progress lines go to stderr (mpsbench.core.progress): .stdout is the step's whole transcript, .stderr its own
        return subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout + done.stderr, done.stderr
        )

    return run, suite, work


@pytest.fixture(scope="module")
def nights(night):
    """Three nights of resolve and bench, the way the workflow runs them; every step's output, by name."""
    run, _, work = night
    done = {
        "resolve-dry": run("resolve", "--dry-run", nights=["2026-11-20"]),
        "resolve-1": run("resolve", nights=["2026-11-20"]),
        "bench-dry": run("bench", "--device", "cpu", "--machine", "fleet-a", "--dry-run"),
        "bench-1": run("bench", "--device", "cpu", "--machine", "fleet-a"),
    }
    first = sorted((work / "results" / "fleet-a").glob("*-virtualenv-*.json"))
    done["first-results"] = {path.name: path.read_bytes() for path in first}  # type: ignore[assignment]
    done["collect-1"] = run("collect", str(work / "results"))
    done["resolve-2"] = run("resolve", nights=["2026-11-20", "2026-11-21"])
    done["resolve-3"] = run("resolve", nights=["2026-11-20", "2026-11-21", "2026-11-22"])
    done["bench-2"] = run("bench", "--device", "cpu", "--machine", "fleet-a")
    done["collect-2"] = run("collect", "--update-benchmarks", str(work / "results"))
    return done


@pytest.mark.slow
def test_a_dry_run_resolves_and_benchmarks_but_records_nothing(nights, night):
    _, _, work = night
    assert nights["resolve-dry"].returncode == 0, nights["resolve-dry"].stderr
    assert "added nightly@2026-11-20: torch 2.15.0.dev20261120" in nights["resolve-dry"].stdout
    assert "dry run: " in nights["resolve-dry"].stdout
    bench = nights["bench-dry"]
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "machine fleet-a: benchmarking 1 build: nightly@2026-11-20" in bench.stdout
    # --device cpu: asv is given the cpu combination only, and starts no process for the mps one
    assert "the run: 1 build, newest first, 1 combinations;" in bench.stdout
    # the plan sizes the build, as bench's and results record's do
    assert "  1. nightly@2026-11-20 (torch 2.15.0.dev20261120); disk: " in bench.stdout
    assert "  downloads: " in bench.stdout
    assert "'mps'" not in bench.stdout
    # asv's own lines go to their log beside the results, the terminal has one line per combination
    assert "benchmark_models.Training.time_step" in (work / "results-asv.log").read_text()
    assert "dry run: nothing was recorded" in bench.stdout


@pytest.mark.slow
def test_each_night_appends_the_newest_nightly_to_the_fleets_manifest(nights, night):
    _, _, work = night
    for step in ("resolve-1", "resolve-2", "resolve-3"):
        assert nights[step].returncode == 0, nights[step].stderr
    manifest = mf.load(work / "fleet" / "builds" / "manifest.json")
    assert [build.id for build in manifest.channel("nightly").builds] == list(DELAYS)  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_first_night_benchmarks_cpu_only_and_finds_nothing_to_compare(nights):
    bench = nights["bench-1"]
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "mpsbench alert: nothing slower (" in bench.stdout
    files = nights["first-results"]
    assert len(files) == 1
    data = json.loads(next(iter(files.values())))  # type: ignore[attr-defined]
    value = data["results"]["benchmark_models.Training.time_step"][0]
    assert value[0] >= DELAYS["2026-11-20"] and math.isnan(
        value[1]
    )  # cpu timed (its sleep, at least); mps left out


@pytest.mark.slow
def test_the_slow_night_fails_naming_benchmark_machine_ratio_and_pytorch_range(nights, night):
    _, _, work = night
    bench = nights["bench-2"]
    assert bench.returncode == 1, bench.stdout + bench.stderr
    assert (
        "machine fleet-a: benchmarking 2 builds: nightly@2026-11-21, nightly@2026-11-22"
        in bench.stdout
    )
    line = next(line for line in bench.stdout.splitlines() if line.startswith("slower "))
    assert f"{BENCHMARK} on fleet-a" in line
    assert (
        float(line.split()[1].rstrip("x")) > 1
    )  # new over old; how much is the sleeps' and the machine's
    assert "nightly@2026-11-21 (torch 2.15.0.dev20261121, git 20261121" in line
    assert "-> nightly@2026-11-22 (torch 2.15.0.dev20261122, git 20261122" in line
    assert "https://github.com/pytorch/pytorch/compare/20261121" in line
    assert (work / "alert-fleet-a.md").read_text().count("| **fleet-a** |") == 1
    # the first night's results were not run again, let alone rewritten
    for name, data in nights["first-results"].items():  # type: ignore[attr-defined]
        assert (work / "results" / "fleet-a" / name).read_bytes() == data


@pytest.mark.slow
def test_collect_merges_each_night_into_the_fleet_without_overwriting(nights, night):
    _, _, work = night
    assert nights["collect-1"].returncode == 0 and "0 in conflict" in nights["collect-1"].stdout
    second = nights["collect-2"]
    assert second.returncode == 0, second.stdout + second.stderr
    assert (
        "2 copied, 2 already there" in second.stdout
    )  # the two new builds; machine.json and the first night
    assert len(list((work / "fleet" / "results" / "fleet-a").glob("*-virtualenv-*.json"))) == 3


@pytest.mark.slow
def test_publish_alert_and_bisect_over_the_fleet(nights, night):
    run, _, work = night
    published = run("publish")
    assert published.returncode == 0, published.stdout + published.stderr
    assert (work / "html" / "index.html").is_file() and (
        work / "html" / "mpsbench" / "summary.html"
    ).is_file()
    summary = work / "alert.md"
    alerted = run("alert", "--summary", str(summary))
    assert alerted.returncode == 1 and f"{BENCHMARK} on fleet-a" in alerted.stdout
    assert "https://github.com/pytorch/pytorch/compare/" in summary.read_text()
    recorded = _checksums(work / "results")
    bisected = run(
        "bisect",
        "--machine",
        "fleet-a",
        "--good",
        "nightly@2026-11-20",
        "--bad",
        "nightly@2026-11-22",
        "--bench",
        r"Training.time_step\('cpu', 'mlp', 8\)",
    )
    assert bisected.returncode == 0, bisected.stdout + bisected.stderr
    # mpsbench bisect, as a user runs it: compare confirms the endpoints, then one step at 11-21
    # one step confirms the endpoints and judges the one build between them (bisection's steps)
    assert (
        "confirming: is BAD slower than GOOD? step over nightly@2026-11-21 (1 candidate left)"
        in bisected.stdout
    )
    tip = _git(
        work / "timeline", "rev-parse", "refs/heads/nightly"
    )  # the channel's last build, 11-22
    assert (
        f"mpsbench nightly: first slow build: nightly@2026-11-22 (timeline commit {tip[:12]})"
        in bisected.stdout
    )
    assert (
        "mpsbench nightly: PyTorch commits to read: nightly@2026-11-21 (torch 2.15.0.dev20261121"
        in bisected.stdout
    )
    assert (
        _checksums(work / "results") == recorded
    )  # fresh processes in a scratch folder: nothing recorded changed
    backwards = run(
        "bisect",
        "--machine",
        "fleet-a",
        "--good",
        "nightly@2026-11-22",
        "--bad",
        "nightly@2026-11-20",
        "--bench",
        r"Training.time_step\('cpu', 'mlp', 8\)",
    )
    assert backwards.returncode == 2  # bisect's own refusal is the step's one line
    assert backwards.stderr.strip().splitlines()[-1] == (
        "mpsbench nightly: error: nightly@2026-11-20 comes before nightly@2026-11-22: give GOOD (older) first, then BAD"
    )


def test_a_device_this_machine_lacks_is_refused_before_anything_runs(night):
    run, _, _ = night
    refused = run("bench", "--device", "mps", "--machine", "fleet-a")
    assert refused.returncode == 2
    assert refused.stderr.startswith("mpsbench nightly: error: device mps is not usable here: ")


def test_a_night_whose_build_this_machine_cannot_install_fails_naming_it(tmp_path):
    """The planned build is skipped, as bench skips it; unattended, the step must not pass. A dry
    run: it returns the record's status before the alert, which needs an earlier night's results."""
    run, _, work = _night(tmp_path)
    assert run("resolve", nights=["2026-11-20"]).returncode == 0  # pinned for linux-x86_64-cpu
    refused = run(
        *("bench", "--device", "cpu", "--machine", "fleet-a", "--dry-run"),
        MPSBENCH_PLATFORM="macos-arm64",
    )
    assert refused.returncode == 3  # record.BENCHMARKS_FAILED, as asv's failures
    said = [line for line in refused.stderr.splitlines() if "; skipped: " in line]
    assert len(said) == 1
    assert (
        "nightly@2026-11-20 (torch 2.15.0.dev20261120): this machine cannot install it: " in said[0]
    )
    assert "pins no torch wheel" in said[0] and "macos-arm64" in said[0]
    assert not list((work / "results").glob("fleet-a/*-virtualenv-*.json"))


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, **results_branch.IDENTITY)
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_results_branch_is_created_then_only_fast_forwarded(tmp_path, capsys):
    remote, main, other = tmp_path / "remote.git", tmp_path / "main", tmp_path / "other"
    _git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    _git(tmp_path, "clone", "--quiet", str(remote), str(main))
    _git(main, "commit", "--quiet", "--allow-empty", "-m", "the suite")
    _git(main, "push", "--quiet", "origin", "HEAD:main")
    _git(tmp_path, "clone", "--quiet", str(remote), str(other))
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"

    assert (
        cli.main(["nightly", "fetch", "--suite", str(main), "--fleet", str(ours)]) == 0
    )  # no branch yet: empty
    assert (
        "origin has no branch results yet" in capsys.readouterr().err and list(ours.iterdir()) == []
    )
    (ours / "results" / "m1").mkdir(parents=True)
    (ours / "results" / "m1" / "a.json").write_text("{}")
    assert (
        cli.main(
            ["nightly", "push", "--suite", str(main), "--fleet", str(ours), "--message", "night 1"]
        )
        == 0
    )
    first = _git(remote, "rev-parse", "results")
    assert f"pushed {first[:12]} to origin/results" in capsys.readouterr().err
    assert results_branch.push(main, ours, "again") is None  # nothing changed, nothing pushed

    # another job fetches, adds another machine's files and pushes: a fast-forward on top
    assert results_branch.fetch(other, theirs) == first
    assert (theirs / "results" / "m1" / "a.json").read_text() == "{}" and (
        theirs / "README.md"
    ).is_file()
    (theirs / "results" / "m2").mkdir()
    (theirs / "results" / "m2" / "b.json").write_text("[]")
    second = results_branch.push(other, theirs, "night 2")
    assert (
        _git(remote, "rev-parse", "results^") == first
        and _git(remote, "rev-parse", "results") == second
    )

    # a copy fetched before that push is refused, never forced over it
    (ours / "results" / "m1" / "late.json").write_text("{}")
    with pytest.raises(UserError, match="pushing to origin results was refused"):
        results_branch.push(main, ours, "stale")
    assert _git(remote, "rev-parse", "results") == second
    assert _git(main, "status", "--porcelain") == ""  # the suite's checkout is never touched
    results_branch.fetch(main, ours)
    assert sorted(str(p.relative_to(ours)) for p in ours.rglob("*.json")) == [
        "results/m1/a.json",
        "results/m2/b.json",
    ]


def test_the_fleets_manifest_takes_in_the_repositorys_new_builds_and_refuses_diverging_ones():
    nights = [nightly_build(day) for day in range(3)]
    release = mf.Build(
        id="2.14.1",
        torch_version="2.14.1",
        date="2026-09-30T12:00:00Z",
        git_version="d" * 40,
        kind="release",
        pins=nights[0].pins,
    )
    repository = mf.append(mf.append(mf.Manifest(), "release", release), "nightly", nights[0])
    fleet_manifest = mf.append(mf.append(mf.Manifest(), "nightly", nights[0]), "nightly", nights[1])
    synced = nightly.sync(repository, fleet_manifest)
    assert [c.name for c in synced.channels] == ["release", "nightly"]
    assert synced.channel("nightly").builds == (nights[0], nights[1])  # type: ignore[union-attr]
    diverged = mf.append(mf.Manifest(), "nightly", nights[2])
    with pytest.raises(UserError, match="channel nightly has different builds"):
        nightly.sync(repository, diverged)


def resolve_arguments(tmp_path: Path) -> tuple[list[str], Path]:
    """The resolve step's arguments over a suite with one release and a local index of two nightlies; the fleet's manifest."""
    suite, fleet_dir = tmp_path / "suite", tmp_path / "fleet"
    (suite / "builds").mkdir(parents=True)
    (suite / "asv.conf.json").write_text('{"branches": ["release"]}')
    release = mf.Build(
        id="2.14.1",
        torch_version="2.14.1",
        date="2026-09-30T12:00:00Z",
        git_version="d" * 40,
        kind="release",
        pins=nightly_build(0).pins,
    )
    mf.save(mf.append(mf.Manifest(), "release", release), suite / "builds" / "manifest.json")
    index = str(_index(tmp_path, ["2026-11-20", "2026-11-21"]))
    args = [
        "resolve",
        "--suite",
        str(suite),
        "--fleet",
        str(fleet_dir),
        "--index",
        index,
        "--transformers-index",
        index,
    ]
    return args, fleet_dir / "builds" / "manifest.json"


def test_resolve_appends_the_newest_nightly_once_and_a_dry_run_changes_nothing(tmp_path, capsys):
    args, fleet_manifest = resolve_arguments(tmp_path)

    assert cli.main(["nightly", *args, "--dry-run"]) == 0
    assert "added nightly@2026-11-21" in capsys.readouterr().out and not fleet_manifest.exists()
    assert cli.main(["nightly", *args]) == 0
    manifest = mf.load(fleet_manifest)
    assert [(c.name, [b.id for b in c.builds]) for c in manifest.channels] == [
        ("release", ["2.14.1"]),
        ("nightly", ["2026-11-21"]),
    ]  # the repository's builds, then the newest nightly only
    assert manifest.find("nightly@2026-11-21").git_version == "20261121" + "2".rjust(32, "0")
    before = fleet_manifest.read_bytes()
    assert cli.main(["nightly", *args]) == 0
    assert (
        "nightly@2026-11-21 is already the newest nightly; nothing to add"
        in capsys.readouterr().out
    )
    assert fleet_manifest.read_bytes() == before
    assert cli.main(["nightly", *args[:-4], "--index", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("mpsbench nightly: error: ")
    assert fleet_manifest.read_bytes() == before


def test_bench_and_devices_narrow_the_preselection_and_the_facts_stay_where_they_match(monkeypatch):
    monkeypatch.setenv(selection.DEVICES_ENV, "cpu")
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    found = preselect.combinations(preselect.discover(ROOT / "benchmarks"))
    pattern = asv.pattern(preselect.selected(found, ["Training.time_step", "Environment"]))
    assert 0 < len(preselect.selected(found, ["Training.time_step", "Environment"])) < len(found)
    assert re.search(pattern, "benchmark_models.Training.time_step('cpu', 'mlp', 8)")
    assert re.search(pattern, "benchmark_models.Environment.track_cpu_threads")
    assert not re.search(
        pattern, "benchmark_models.Inference.time_step('cpu', 'mlp', 8)"
    )  # not asked for
    assert not re.search(
        pattern, "benchmark_models.Training.time_step('cpu', 'mlp', 64)"
    )  # outside the default
    assert not re.search(
        pattern, "benchmark_models.Training.time_step('mps', 'mlp', 8)"
    )  # not in MPSBENCH_DEVICES

"""ops-rank: two runs' results, one op made slower by a known factor, which must come first with that ratio."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asv import results as asv_results
from asv import runner
from benchmarks import benchmark_ops

from mpsbench import cli
from mpsbench.measure import selection
from mpsbench.regressions import rank_ops

ROOT = Path(__file__).resolve().parents[1]
MACHINE = "testbox"
BEFORE_COMMIT = "a" * 40
AFTER_COMMIT = "b" * 40
SLOWED = ("MemoryBoundOps.time_forward", ("cuda", "gather", "float16", "medium"))
FACTOR = 3.0


def _benchmark(cls: type, method: str, version: str = "1") -> dict:
    """The benchmark entry asv's discovery makes for a class method: params as reprs."""
    return {
        "name": f"benchmark_ops.{cls.__name__}.{method}",
        "version": version,
        "params": [[repr(value) for value in axis] for axis in cls.params],
        "param_names": list(cls.param_names),
    }


def _base_time(index: int) -> float:
    return 1e-5 * (1 + index % 7)  # distinct, made-up seconds per call


def _values(benchmark: dict, slowed: tuple[str, tuple[str, ...]] | None) -> list[float | None]:
    values: list[float | None] = []
    short = benchmark["name"].partition(".")[2]
    for index, combination in enumerate(itertools.product(*benchmark["params"])):
        params = tuple(value.strip("'") for value in combination)
        if params[0] == "mps":
            values.append(math.nan)  # skipped (n/a), as on a machine without mps
        elif params[3] == "large" and params[0] == "cpu":
            values.append(None)  # failed
        else:
            value = _base_time(index)
            values.append(value * FACTOR if (short, params) == slowed else value)
    return values


def _result(values: list[float | None]) -> runner.BenchmarkResult:
    """What asv's runner hands back: samples around each value (asv stores their median), n/a as is."""
    samples = [
        None if value is None or math.isnan(value) else [value * 0.98, value, value * 1.03]
        for value in values
    ]
    numbers = [None if sample is None else 1 for sample in samples]
    return runner.BenchmarkResult(
        result=values, samples=samples, number=numbers, errcode=0, stderr="", profile=None
    )


def _write_results(results_dir: Path, commit: str, slowed=None, versions=None) -> Path:
    """A results file written by asv's own classes, as `asv run` writes it."""
    machine_dir = results_dir / MACHINE
    machine_dir.mkdir(parents=True, exist_ok=True)
    (machine_dir / "machine.json").write_text(json.dumps({"machine": MACHINE, "version": 1}))
    results = asv_results.Results(
        {"machine": MACHINE, "python": "3.11"},
        {},
        commit,
        1_700_000_000_000,
        "3.11",
        "existing-py",
        {},
    )
    versions = versions or {}
    entries = [
        _benchmark(benchmark_ops.ComputeBoundOps, "time_forward"),
        _benchmark(benchmark_ops.ComputeBoundOps, "track_gflops"),
        _benchmark(benchmark_ops.MemoryBoundOps, "time_forward"),
        _benchmark(
            benchmark_ops.ForwardBackwardOps,
            "time_forward_backward",
            versions.get("ForwardBackwardOps.time_forward_backward", "1"),
        ),
    ]
    for benchmark in entries:
        results.add_result(benchmark, _result(_values(benchmark, slowed)))
    # Another module's benchmark with a slowdown of its own: never ranked here.
    other = {"name": "benchmark_models.Training.time_step", "version": "1", "params": [["'cpu'"]]}
    results.add_result(other, _result([1.0 if slowed is None else 100.0]))
    results.save(str(results_dir))
    return machine_dir / f"{commit[:8]}-existing-py.json"


@pytest.fixture
def two_runs(tmp_path):
    results_dir = tmp_path / "results"
    before = _write_results(results_dir, BEFORE_COMMIT)
    after = _write_results(results_dir, AFTER_COMMIT, slowed=SLOWED)
    assert before.is_file() and after.is_file()
    return results_dir, before, after


def test_the_slowed_op_ranks_first_with_its_factor_and_the_rest_stay_at_one(two_runs):
    _, before, after = two_runs
    ranking = rank_ops.rank(rank_ops.load(before), rank_ops.load(after))
    first = ranking.slowdowns[0]
    assert (first.benchmark, first.params) == SLOWED
    assert first.ratio == pytest.approx(FACTOR)
    assert all(found.ratio == pytest.approx(1.0) for found in ranking.slowdowns[1:])
    assert not ranking.version_changed


def test_only_op_time_benchmarks_with_numbers_are_ranked(two_runs):
    _, before, after = two_runs
    ranking = rank_ops.rank(rank_ops.load(before), rank_ops.load(after))
    benchmarks = {found.benchmark for found in ranking.slowdowns}
    assert benchmarks == {
        "ComputeBoundOps.time_forward",
        "MemoryBoundOps.time_forward",
        "ForwardBackwardOps.time_forward_backward",
    }  # no track_, no other module
    devices = {found.params[0] for found in ranking.slowdowns}
    assert devices == {"cpu", "cuda"}  # mps was skipped (NaN) everywhere
    assert not any(
        found.params[0] == "cpu" and found.params[3] == "large" for found in ranking.slowdowns
    )  # failed
    # per op, every combination with a number in both runs: cpu's 3 dtypes x 2 sizes and cuda's 3 x 3
    expected = 15 * sum(
        len(cls.params[1])
        for cls in (
            benchmark_ops.ComputeBoundOps,
            benchmark_ops.MemoryBoundOps,
            benchmark_ops.ForwardBackwardOps,
        )
    )
    assert len(ranking.slowdowns) == expected


def test_main_with_two_files_prints_the_slowed_op_first(two_runs, capsys):
    _, before, after = two_runs
    assert cli.main(["ops-rank", str(before), str(after), "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "rank",
        "ratio",
        "before",
        "after",
        "change",
        "benchmark",
        "device",
        "op",
        "dtype",
        "size",
    ]
    assert (
        out[2].split()[:2] == ["1", "3.00x"] and "slower" in out[2].split()
    )  # judged by the one rule
    assert "unchanged" in out[3].split()
    assert out[2].split()[-5:] == [
        "MemoryBoundOps.time_forward",
        "cuda",
        "gather",
        "float16",
        "medium",
    ]
    assert out[3].split()[1] == "1.00x"
    assert "(the 3 largest shown; --top 0 shows all)" in out


def test_main_with_two_commits_prints_the_asv_commands_then_ranks(two_runs, capsys):
    results_dir, _, _ = two_runs
    assert (
        cli.main(
            ["ops-rank", "--results-dir", str(results_dir), BEFORE_COMMIT[:6], AFTER_COMMIT[:10]]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    commands = [
        line for line in out if line.startswith("mpsbench results record")
    ]  # never a bare asv run (README)
    assert len(commands) == 2
    assert all(
        "--config asv.conf.json --machine" in line and "-- -b benchmark_ops" in line
        for line in commands
    )
    assert commands[0].endswith(f" {BEFORE_COMMIT[:6]}^!") and commands[1].endswith(
        f" {AFTER_COMMIT[:10]}^!"
    )
    table_start = next(index for index, line in enumerate(out) if line.startswith("rank"))
    assert out[table_start + 2].split()[1] == "3.00x"


def test_a_commit_without_results_prints_the_commands_and_fails_in_one_line(two_runs, capsys):
    results_dir, _, _ = two_runs
    code = cli.main(
        [
            "ops-rank",
            "--results-dir",
            str(results_dir),
            "--machine",
            MACHINE,
            BEFORE_COMMIT,
            "c0ffee",
        ]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert f"--machine {MACHINE} -- -b benchmark_ops" in captured.out and "c0ffee^!" in captured.out
    assert captured.err.strip() == (
        f"mpsbench: error: no results for commit c0ffee on machine {MACHINE} in {str(results_dir)!r}"
    )


def test_bad_inputs_give_one_line_errors_naming_them(two_runs, tmp_path, capsys):
    results_dir, before, _ = two_runs
    assert cli.main(["ops-rank", str(before), str(tmp_path / "missing.json")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"no results file {str(tmp_path / 'missing.json')!r}")
    )
    assert cli.main(["ops-rank", str(before), "abc123"]) == 2
    assert "give two results files or two commits, not one of each" in capsys.readouterr().err
    assert (
        cli.main(["ops-rank", "--results-dir", str(results_dir), "--machine", "nobox", "a", "b"])
        == 2
    )
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"no machine 'nobox' in {str(results_dir)!r}; choose one of: {MACHINE}")
    )
    not_results = tmp_path / "other.json"
    not_results.write_text(json.dumps({"version": 2}))
    assert cli.main(["ops-rank", str(before), str(not_results)]) == 2
    assert f"{str(not_results)!r} is not an asv 0.6 results file" in capsys.readouterr().err


def test_a_benchmark_whose_version_changed_is_left_out_and_named(tmp_path):
    results_dir = tmp_path / "results"
    before = _write_results(results_dir, BEFORE_COMMIT)
    after = _write_results(
        results_dir, AFTER_COMMIT, versions={"ForwardBackwardOps.time_forward_backward": "2"}
    )
    ranking = rank_ops.rank(rank_ops.load(before), rank_ops.load(after))
    assert ranking.version_changed == ["ForwardBackwardOps.time_forward_backward"]
    assert "ForwardBackwardOps.time_forward_backward" not in {
        found.benchmark for found in ranking.slowdowns
    }
    assert (
        "left out, version changed between the runs: ForwardBackwardOps"
        in rank_ops.format_ranking(ranking)
    )


def test_the_mpsbench_command_runs_ops_rank(two_runs, capsys):
    """Through the real ``mpsbench`` parser, as README documents it."""
    _, before, after = two_runs
    assert cli.main(["ops-rank", str(before), str(after)]) == 0
    assert "3.00x" in capsys.readouterr().out


def test_the_mpsbench_command_refuses_a_missing_results_file_in_one_line(
    two_runs, tmp_path, capsys
):
    _, before, _ = two_runs
    assert cli.main(["ops-rank", str(before), str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.slow
def test_results_written_by_a_real_asv_run_are_read_and_ranked(tmp_path):
    """A real `asv run` of one tiny combination, saved under this repository's HEAD, found, read and ranked."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    env.pop(selection.FULL_SWEEP_ENV, None)
    config = tmp_path / "asv.conf.json"
    config.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "mpsbench",
                "repo": str(ROOT),
                "branches": ["main"],
                "environment_type": "virtualenv",
                "benchmark_dir": str(ROOT / "benchmarks"),
                "env_dir": str(tmp_path / "env"),
                "results_dir": str(tmp_path / "results"),
                "html_dir": str(tmp_path / "html"),
            }
        )
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    asv = [sys.executable, "-m", "asv"]
    subprocess.run(
        [*asv, "machine", "--yes", "--machine", MACHINE, "--config", str(config)],
        env=env,
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [
            *asv,
            "run",
            "--config",
            str(config),
            "--python=same",
            "--quick",
            "--set-commit-hash",
            head,
            "--launch-method",
            "forkserver",
            "-b",
            r"MemoryBoundOps.time_forward\('cpu', 'add', 'float32', 'small'\)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = rank_ops.load(rank_ops.find_results(tmp_path / "results", head[:7], None))
    ranking = rank_ops.rank(found, found)
    assert [(slowdown.benchmark, slowdown.params) for slowdown in ranking.slowdowns] == [
        ("MemoryBoundOps.time_forward", ("cpu", "add", "float32", "small"))
    ]
    seconds = ranking.slowdowns[0].before
    assert math.isfinite(seconds)
    assert seconds > 0
    assert ranking.slowdowns[0].ratio == 1.0

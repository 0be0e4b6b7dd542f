"""Nothing wrong enters history: each case a new user tried, reproduced, and a generated round over the results
commands and settings.

Ownership (publish, alert --summary, every delete), identity (a merged value filed under the build and machine its
file names inside), plausibility (per-unit bounds) and meaning (asv options and MPSBENCH_* settings that change a
value) each refuse in one line, exit 2 (a merge: the file refused, the rest merged, exit 1), and change nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from tests import asvresults
from tests.test_faults import (
    BUILD,
    COMMIT,
    INFERENCE_CPU,
    RECORD,
    ROOT,
    TRAINING_CPU,
    TRAINING_MPS,
    _merge_refuses,
    checksums,
    fault_seed,
    refused,
)
from tests.test_faults import world as world  # the fault suite's fixture, shared (re-exported)

from mpsbench import cli
from mpsbench.core import asv, files
from mpsbench.core import settings as mpsbench_settings
from mpsbench.core.errors import UserError
from mpsbench.results import merge

OTHER = "a01a66bc" + "2" * 32  # the build whose value a renamed file holds
NAMED = "395aa824" + "3" * 32  # the build its name says
FILE = "existing-py.json"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


# --- ownership: publish, alert --summary, every delete ---------------------------------------------------------------


def _config(world_root: Path, name: str, **fields: str) -> str:
    conf = json.loads((world_root / "asv.conf.json").read_text())
    (world_root / name).write_text(json.dumps({**conf, **fields}))
    return name


@pytest.mark.parametrize(
    ("html_dir", "relation"),
    [
        (
            ".",
            r"is the folder of the config",
        ),  # publish replaced the whole folder, asv.conf.json and results included
        ("results", r"is the results folder"),  # every recorded value was deleted (7 -> 0)
        ("results/site", r"sits inside the results folder"),
        ("timeline", r"is the timeline"),
        ("..", r"holds the results folder"),
    ],
)
def test_publish_refuses_an_html_dir_it_does_not_own_and_changes_nothing(world, html_dir, relation):
    config = _config(
        world.root, f"html-{html_dir.replace('/', '-').replace('.', 'dot')}.json", html_dir=html_dir
    )
    line = refused(world, ["publish", "--config", config])
    assert re.search(rf"html_dir \S+ of \S+ {relation} ", line), line
    assert "choose a folder of its own" in line


def test_alert_summary_inside_the_results_is_refused_and_the_machine_file_kept(world):
    line = refused(
        world, ["alert", "--config", "asv.conf.json", *BUILD, "--summary", "results/m/machine.json"]
    )
    assert re.search(r"--summary results/m/machine\.json sits inside the results folder", line), (
        line
    )


def test_every_delete_checks_what_it_holds(tmp_path):
    results = tmp_path / "repo" / ".asv" / "results"
    results.mkdir(parents=True)
    (results / "kept.json").write_text("{}")
    kept = [
        files.Kept("the results folder", results, nothing_inside=True),
        files.Kept("the repository", tmp_path / "repo"),
    ]
    for target in (
        results,
        tmp_path / "repo",
        tmp_path / "repo" / ".asv",
        results / "sub",
        tmp_path,
    ):
        with pytest.raises(UserError):
            files.remove(target, kept)
    link = tmp_path / "link"
    link.symlink_to(results)  # a link to the results is the results
    with pytest.raises(UserError, match="is the results folder"):
        files.remove(link, kept)
    new = tmp_path / "new"
    new.mkdir()
    with pytest.raises(UserError):
        files.replace_folder(new, tmp_path / "repo" / ".asv", kept)
    assert (results / "kept.json").read_text() == "{}" and new.is_dir()
    own = tmp_path / "repo" / ".asv" / "html"
    own.mkdir()
    files.replace_folder(new, own, kept)  # a folder of its own: replaced
    assert own.is_dir() and not new.exists() and (results / "kept.json").is_file()


# --- identity: each value under the build and machine its file names inside -----------------------------------------


def _results(folder: Path, commit: str, value: float = 0.009, machine: str = "m") -> Path:
    asvresults.write_benchmarks(
        folder,
        asvresults.write_results(
            folder, machine, commit, 0, {TRAINING_CPU: value}, ["cpu"], ["mlp"], [8]
        ),
    )
    return folder / machine / f"{commit[:8]}-{FILE}"


def _good_and(tmp: Path, spoil: Any) -> tuple[Path, Path, Path]:
    """DEST; a source holding a good file of build "4..." and a file ``spoil`` makes bad; the bad file."""
    dest, source = tmp / "dest", tmp / "source"
    _results(dest, COMMIT)
    _results(source, "4" * 40, 0.004)
    bad = spoil(source)
    return dest, source, bad


def _renamed(source: Path) -> Path:
    """A file named for build 395aa824 holding build a01a66bc's value."""
    made = _results(source, OTHER, 0.5)
    return made.rename(made.with_name(f"{NAMED[:8]}-{FILE}"))


def _other_machine(source: Path) -> Path:
    made = _results(source, "5" * 40, 0.5)
    data = json.loads(made.read_text())
    data["params"]["machine"] = "elsewhere"
    made.write_text(json.dumps(data))
    return made


def _linked(source: Path) -> Path:
    elsewhere = _results(source.parent / "elsewhere", "6" * 40, 0.5)
    link = source / "m" / elsewhere.name
    link.symlink_to(elsewhere)
    return link


def _junk_statistic(source: Path) -> Path:
    made = _results(source, "7" * 40, 0.5)
    data = json.loads(made.read_text())
    row = data["results"]["benchmark_models.Training.time_step"]
    row += [None] * (len(data["result_columns"]) - len(row))
    row[data["result_columns"].index("stats_ci_99_a")] = "junk"
    made.write_text(json.dumps(data))
    return made


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (_renamed, rf"its name says build {NAMED[:8]} but its commit_hash is {OTHER}"),
        (_other_machine, r"its folder names machine 'm' but params\.machine is 'elsewhere'"),
        (_linked, r"a symbolic link"),
        (
            _junk_statistic,
            r"stats_ci_99_a must be a list of 1 entries \(one per combination\), got 'junk'",
        ),
    ],
    ids=["another-build", "another-machine", "symlink", "junk-statistic"],
)
def test_a_file_filed_under_another_build_or_malformed_is_refused_whole_and_the_rest_merged(
    tmp_path, spoil, reason
):
    dest, source, bad = _good_and(tmp_path, spoil)
    status, out, err = _run(["results", "merge", str(dest), str(source)])
    assert status == 1 and err == "" and "Traceback" not in out, (out, err)
    refusals = [line for line in out.splitlines() if line.startswith("refused")]
    assert len(refusals) == 1 and re.search(reason, refusals[0]), refusals
    assert refusals[0].endswith("; nothing merged from this file") and str(bad) in refusals[0]
    held = sorted(path.name for path in (dest / "m").glob("*.json"))
    assert held == sorted([f"{COMMIT[:8]}-{FILE}", f"{'4' * 8}-{FILE}", "machine.json"]), (
        held
    )  # the good file merged
    for path in (dest / "m").glob("*-*.json"):
        assert merge.identity(path, json.loads(path.read_text()), None) is None


def test_a_build_that_is_none_of_the_timeline_is_refused(world, tmp_path):
    dest, source = tmp_path / "dest", tmp_path / "source"
    _results(dest, COMMIT)
    timeline = world.root / "timeline"
    build = merge.timeline_builds(timeline)
    known = sorted(build)[0]
    _results(source, known, 0.004)
    _results(source, "8" * 40, 0.5)
    status, out, _ = _run(["results", "merge", "--timeline", str(timeline), str(dest), str(source)])
    assert status == 1 and re.search(
        rf"refused +\S+/{'8' * 8}-{FILE}: commit_hash {'8' * 40} is no build of the"
        " timeline; nothing merged from this file",
        out,
    ), out
    assert (dest / "m" / f"{known[:8]}-{FILE}").is_file() and not (
        dest / "m" / f"{'8' * 8}-{FILE}"
    ).exists()


def test_a_malformed_row_in_the_recorded_file_leaves_it_untouched(tmp_path):
    dest, source = tmp_path / "dest", tmp_path / "source"
    recorded = _results(dest, COMMIT)
    data = json.loads(recorded.read_text())
    data["results"]["benchmark_models.Training.time_step"][1] = 5  # params: no list of lists
    recorded.write_text(json.dumps(data))
    before = recorded.read_bytes()
    _results(source, COMMIT, 0.5)
    status, out, err = _run(["results", "merge", str(dest), str(source)])
    assert status == 1 and "Traceback" not in out + err and "left untouched, not merged into" in out
    assert recorded.read_bytes() == before


# --- plausibility: what no device could measure ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [1e308, 1e-300, 0.0, 2 * 86400.0], ids=["1e308", "1e-300", "zero", "two-days"]
)
def test_a_step_time_no_device_could_take_is_refused(tmp_path, value):
    _merge_refuses(tmp_path, TRAINING_MPS, value)


@pytest.mark.parametrize(
    ("value", "unit", "refused_too"),
    [
        (1e-9, "seconds", False),
        (86400.0, "seconds", False),
        (9.9e-10, "seconds", True),
        (86401.0, "seconds", True),
        (2.0**30, "MiB", False),
        (2.0**31, "MiB", True),
        (1e12, "samples/s", False),
        (1e13, "samples/s", True),
        (5e6, "GFLOP/s", False),
        (1e9, "GFLOP/s", True),
        (4.8e3, "GB/s", False),
        (1e7, "GB/s", True),
        (-5.0, "MiB/100 steps", False),
        (-1e10, "MiB/100 steps", True),
    ],
)
def test_the_bounds_per_unit(value, unit, refused_too):
    reason = merge.problem(value, unit)
    assert (reason is not None) == refused_too, (value, unit, reason)
    if reason is not None:
        assert unit in reason and "valid: a number" in reason


# --- meaning: options and settings that change a value -------------------------------------------------------------

MEANING = [
    (
        "attributes",
        ["-a", "repeat=1", "-a", "number=1", "-a", "warmup_time=0", "ALL"],
        {},
        r"-a repeat=1 overrides how the benchmark samples",
    ),
    ("rounds", ["-a", "rounds=1", "ALL"], {}, r"-a rounds=1 overrides"),
    ("quick", ["-q", "ALL"], {}, r"--quick would record single-sample values"),
    ("cpu-affinity", ["--cpu-affinity", "0", "ALL"], {}, r"--cpu-affinity pins the benchmark"),
    (
        "set-commit-hash",
        ["--set-commit-hash", "1" * 40, "ALL"],
        {},
        r"--set-commit-hash 1{40} files the values",
    ),
    ("python-same", ["--python=same", "ALL"], {}, r"-E :same times the torch installed here"),
    ("existing", ["-E", "existing", "ALL"], {}, r"-E existing times the torch installed here"),
    (
        "single-steps",
        ["ALL"],
        {"MPSBENCH_SINGLE_STEPS": "1"},
        r"MPSBENCH_SINGLE_STEPS='1' times one step a call.*mpsbench sets it for compare and bisect; unset it",
    ),
    (
        "allow-fallback",
        ["ALL"],
        {"MPSBENCH_ALLOW_FALLBACK": "yes"},
        r"MPSBENCH_ALLOW_FALLBACK='yes' times mps",
    ),
]


@pytest.mark.parametrize(
    ("options", "env", "pattern"), [case[1:] for case in MEANING], ids=[c[0] for c in MEANING]
)
def test_a_setting_that_changes_what_a_value_means_is_refused_for_recording(
    world, options, env, pattern
):
    line = refused(world, [*RECORD, *options], env)
    assert re.search(pattern, line), line
    assert "--dry-run" in line


def test_a_throw_away_run_may_change_them_and_timeout_changes_nothing():
    assert asv.run_args(["-a", "repeat=1", "--quick", "--dry-run"]).dry_run
    assert asv.run_args(["-a", "timeout=120", "ALL"]).changes_values is None
    assert (
        asv.run_args(["--launch-method", "spawn", "--record-samples", "-e", "ALL"]).changes_values
        is None
    )


def test_internal_settings_never_reach_a_recording_run(monkeypatch, tmp_path):
    monkeypatch.setenv(mpsbench_settings.SINGLE_STEPS, "1")
    environment = asv.only(tmp_path / "builds.txt")
    assert mpsbench_settings.SINGLE_STEPS not in environment and asv.RUN_BUILDS in environment
    assert list(mpsbench_settings.INTERNAL) == [mpsbench_settings.SINGLE_STEPS]


# --- orphans a killed merge left ---------------------------------------------------------------------------------


def test_a_merge_deletes_the_temporary_files_a_killed_writer_left(tmp_path):
    dest, source = tmp_path / "dest", tmp_path / "source"
    recorded = _results(dest, COMMIT)
    orphan = recorded.parent / f".{recorded.name}-{'ab' * 16}.tmp"
    orphan.write_text('{"half": ')
    users = recorded.parent / ".notes.tmp"  # not a name a writer gives: kept
    users.write_text("mine")
    _results(source, "4" * 40, 0.004)
    status, out, _ = _run(["results", "merge", str(dest), str(source)])
    assert status == 0 and not orphan.exists() and users.read_text() == "mine", out


# --- the generated round -------------------------------------------------------------------------------------------

GENERATED: dict[str, int] = {}
ROUND = int(
    os.environ.get("MPSBENCH_INTEGRITY_EXAMPLES", "70")
)  # per kind; four kinds: 280 inputs by default
OUTCOMES: dict[
    str, int
] = {}  # what the generated merges came to: refused files, refused values, merged

HASHES = st.text("0123456789abcdef", min_size=40, max_size=40)
SPOILS = st.sampled_from(
    [
        "commit_hash",
        "machine",
        "name",
        "env_name",
        "value",
        "statistic",
        "samples",
        "params",
        "number",
    ]
)
WILD = st.one_of(
    st.floats(),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
    st.integers(-10, 10**30),
    st.lists(st.floats(), max_size=3),
    st.just({}),
)


def _spoilt(folder: Path, spoil: str, wild: Any, commit: str) -> Path:
    made = _results(folder, commit, 0.5)
    data = json.loads(made.read_text())
    row = data["results"]["benchmark_models.Training.time_step"]
    row += [None] * (len(data["result_columns"]) - len(row))
    column = {
        "value": "result",
        "statistic": "stats_q_25",
        "samples": "samples",
        "params": "params",
        "number": "stats_number",
    }
    if spoil == "commit_hash":
        data["commit_hash"] = (
            wild if not isinstance(wild, str) or wild == commit else wild + commit[len(wild) :]
        )
    elif spoil == "machine":
        data["params"]["machine"] = wild
    elif spoil == "env_name":
        data["env_name"] = wild
    elif spoil == "name":
        made = made.rename(made.with_name(f"{str(wild)[:8]}-{FILE}".replace("/", "_")))
    else:
        row[data["result_columns"].index(column[spoil])] = [wild] if spoil != "params" else wild
    made.write_text(json.dumps(data))
    return made


def _values_under_their_build(
    dest: Path, unit: str | None = "seconds"
) -> dict[tuple[str, str], Any]:
    """Every value of DEST by (file, combination), each file's identity and form checked, each value a number of
    ``unit`` (where given)."""
    found = {}
    for path in sorted(dest.glob("*/*-*.json")):
        data = json.loads(path.read_text())
        assert merge.identity(path, data, None) is None and merge.malformed(data) is None, path
        for (name, combo), columns in merge.values(data).items():
            assert unit is None or merge.problem(columns["result"], unit) is None, (path, columns)
            found[(path.name, asv.combination(name, combo))] = columns["result"]
    return found


def _merge_case(tmp: Path, spoil: str, wild: Any, commit: str) -> None:
    dest, source = tmp / "dest", tmp / "source"
    _results(dest, COMMIT)
    _results(source, COMMIT, 0.7)  # a conflict: the recorded 0.009 stays
    made = _spoilt(source, spoil, wild, commit)
    before = _values_under_their_build(dest)
    spoilt_target = dest / "m" / made.name
    existed = spoilt_target.read_bytes() if spoilt_target.exists() else None
    status, out, err = _run(["results", "merge", str(dest), str(source)])
    assert status in (0, 1) and err == "" and "Traceback" not in out, (spoil, wild, out, err)
    after = _values_under_their_build(dest)
    assert all(after[key] == value for key, value in before.items())  # no recorded value changed
    refused_file = any(
        line.startswith("refused") and str(made) in line and "nothing merged" in line
        for line in out.splitlines()
    )
    if refused_file:  # 0 bytes written for the refused file
        assert (spoilt_target.read_bytes() if spoilt_target.exists() else None) == existed
    outcome = (
        "file refused"
        if refused_file
        else "value refused"
        if "\nrefused" in f"\n{out}"
        else "corrupt"
        if "\ncorrupt" in f"\n{out}"
        else "merged"
    )
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def _record_case(world_: Any, bad: list[str], extra: list[str], env: dict[str, str]) -> None:
    refused(world_, [*RECORD, *extra, *bad, "ALL"], env)


def _publish_case(world_: Any, html_dir: str) -> None:
    name = "generated-html.json"
    _config(world_.root, name, html_dir=html_dir)
    try:
        line = refused(world_, ["publish", "--config", name])
        assert "choose a folder of its own" in line
    finally:
        (world_.root / name).unlink()


BAD_OPTIONS = st.one_of(
    st.tuples(
        st.sampled_from(
            [
                "repeat",
                "number",
                "warmup_time",
                "rounds",
                "min_run_count",
                "sample_time",
                "processes",
            ]
        ),
        st.integers(0, 100),
    ).map(lambda kv: ["-a", f"{kv[0]}={kv[1]}"]),
    st.just(["--quick"]),
    st.just(["-q"]),
    st.just(["--cpu-affinity", "0"]),
    st.just(["--python=same"]),
    st.just(["-E", "existing"]),
    HASHES.map(lambda commit: ["--set-commit-hash", commit]),
)
HARMLESS = st.lists(
    st.sampled_from(
        [["-e"], ["--record-samples"], ["-a", "timeout=60"], ["--launch-method", "spawn"], ["-v"]]
    ),
    max_size=2,
).map(lambda lists: [arg for item in lists for arg in item])
BAD_SETTINGS = st.one_of(
    st.just({}),
    st.tuples(
        st.sampled_from(["MPSBENCH_SINGLE_STEPS", "MPSBENCH_ALLOW_FALLBACK"]),
        st.sampled_from(["1", "on", "TRUE", "yes"]),
    ).map(lambda kv: {kv[0]: kv[1]}),
)
SEGMENTS = st.lists(
    st.text("abcxyz.-_", min_size=1, max_size=4).filter(lambda name: name not in (".", "..")),
    max_size=3,
)
HTML_DIRS = st.one_of(  # inside the results or the timeline, or a folder that holds the config's
    st.tuples(st.sampled_from(["results", "timeline", "./results"]), SEGMENTS).map(
        lambda t: "/".join([t[0], *t[1]])
    ),
    st.sampled_from([".", "..", "../..", "./.", "results/..", "timeline/../."]),
)


@pytest.mark.parametrize("examples", [pytest.param(ROUND, id="round")])
def test_generated_round_over_the_results_commands_and_settings(world, tmp_path, examples):
    """Merges of files spoilt at random (identity, values, statistics), record runs with options and settings that
    change a value, publishes into folders not their own: 0 tracebacks, 0 values changed or filed under another
    build, 0 bytes written on refusal. MPSBENCH_FAULT_SEED picks another seed (46 by default)."""
    folders = iter(range(10**6))
    common = dict(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )

    @settings(**common)
    @seed(fault_seed("46"))
    @given(spoil=SPOILS, wild=WILD, commit=HASHES)
    def merges(spoil: str, wild: Any, commit: str) -> None:
        GENERATED["merge"] = GENERATED.get("merge", 0) + 1
        _merge_case(tmp_path / str(next(folders)), spoil, wild, commit)

    @settings(**common)
    @seed(fault_seed("46"))
    @given(
        value=st.one_of(
            st.floats(min_value=86400.0, exclude_min=True),
            st.floats(max_value=1e-9, exclude_max=True, allow_nan=False),
        )
    )
    def values(value: float) -> None:
        GENERATED["implausible"] = GENERATED.get("implausible", 0) + 1
        _merge_refuses(tmp_path / str(next(folders)), TRAINING_MPS, value)

    @settings(**common)
    @seed(fault_seed("46"))
    @given(bad=BAD_OPTIONS, extra=HARMLESS, env=BAD_SETTINGS)
    def records(bad: list[str], extra: list[str], env: dict[str, str]) -> None:
        GENERATED["record"] = GENERATED.get("record", 0) + 1
        _record_case(world, bad, extra, env)

    @settings(**common)
    @seed(fault_seed("46"))
    @given(html_dir=HTML_DIRS)
    def publishes(html_dir: str) -> None:
        GENERATED["publish"] = GENERATED.get("publish", 0) + 1
        _publish_case(world, html_dir)

    for check in (merges, values, records, publishes):
        check()
    print(f"generated round, seed {fault_seed('46')}: {GENERATED}; the merges: {OUTCOMES}")
    assert (
        sum(GENERATED.values()) >= 200
        and OUTCOMES.get("file refused", 0)
        and OUTCOMES.get("value refused", 0)
    )


def test_real_recorded_results_pass_every_check(tmp_path):
    """Each run recorded in tests/data/recorded (cpu and H100) merges whole: no file or value refused by the
    identity, form or bounds checks."""
    for source in sorted(path for path in asvresults.RECORDED.iterdir() if path.is_dir()):
        status, out, _ = _run(["results", "merge", str(tmp_path / source.name), str(source)])
        assert status == 0 and not any(line.startswith("refused") for line in out.splitlines()), out
        assert _values_under_their_build(tmp_path / source.name, unit=None)


# --- writers at the same moment, and kill -9 at random moments ----------------------------------------------------

FORK = multiprocessing.get_context("fork")
TRIALS = [
    pytest.param(5, id="5-trials"),
    pytest.param(100, id="100-trials", marks=pytest.mark.slow),
]
MOMENTS = [
    pytest.param(6, id="6-moments"),
    pytest.param(30, id="30-moments", marks=pytest.mark.slow),
]
# A publish's own steps (asv publish, the figures, the npm libraries) take a minute each on a loaded VM: the trials
# run the real publish (its ownership check, staging folder, lock and swap) around this stand-in for _build, which
# writes a site of SITE_FILES files, each naming its writer, so that a mixed or partial site shows.
SITE_FILES = 3000
STAND_IN = f"""
import os, sys
from pathlib import Path
from mpsbench.context import Suite
from mpsbench.site import publish

def build(suite, html, measured, options):
    for number in range({SITE_FILES}):
        (html / f"page-{{number}}.html").write_text(sys.argv[2])

publish._build = build
publish.publish(Suite(Path(sys.argv[1])))
"""


def _merge_after(barrier: Any, dest: Path, source: Path) -> None:
    barrier.wait()
    merge.merge(dest, [source])


@pytest.mark.parametrize("writers", [2, 4])
@pytest.mark.parametrize("trials", TRIALS)
def test_merges_at_once_lose_nothing(tmp_path, trials, writers):
    """``writers`` merges into one file at the same moment, each adding its own value: every value lands."""
    keys = [
        ("training", "time_step", "cpu", "mlp", 1),
        ("training", "time_step", "mps", "mlp", 1),
        ("training", "time_step", "mps", "mlp", 8),
        ("inference", "time_step", "cpu", "mlp", 1),
    ]
    for trial in range(trials):
        dest = tmp_path / str(trial) / "dest"
        asvresults.write_benchmarks(
            dest,
            asvresults.write_results(
                dest, "m", COMMIT, 0, {TRAINING_CPU: 0.009}, ["cpu", "mps"], ["mlp"], [1, 8]
            ),
        )
        sources = []
        for number, key in enumerate(keys[:writers]):
            source = tmp_path / str(trial) / f"source{number}"
            asvresults.write_results(
                source, "m", COMMIT, 0, {key: 0.001 * (number + 1)}, ["cpu", "mps"], ["mlp"], [1, 8]
            )
            sources.append(source)
        barrier = FORK.Barrier(writers)
        merges = [
            FORK.Process(target=_merge_after, args=(barrier, dest, source)) for source in sources
        ]
        for process in merges:
            process.start()
        for process in merges:
            process.join(300)
            assert process.exitcode == 0, trial
        landed = merge.values(json.loads((dest / "m" / f"{COMMIT[:8]}-{FILE}").read_text()))
        assert sorted(columns["result"] for columns in landed.values()) == sorted(
            [0.009, *(0.001 * (number + 1) for number in range(writers))]
        ), (trial, landed)  # each writer's, kept
        assert not files.orphans(dest), trial
    print(f"{writers} merges at once: {trials} trials, 0 values lost")


def _site_suite(tmp: Path) -> Path:
    """A config whose results hold one value, html_dir tmp/html: what the stand-in publish needs."""
    results = tmp / "results"
    asvresults.write_benchmarks(
        results,
        asvresults.write_results(
            results, "m", COMMIT, 0, {TRAINING_CPU: 0.009}, ["cpu"], ["mlp"], [8]
        ),
    )
    config = {
        "version": 1,
        "project": "t",
        "repo": str(tmp / "timeline"),
        "branches": ["release"],
        "dvcs": "git",
        "environment_type": "virtualenv",
        "benchmark_dir": "benchmarks",
        "results_dir": "results",
        "html_dir": "html",
        "env_dir": "env",
    }
    (tmp / "asv.conf.json").write_text(json.dumps(config))
    return tmp / "asv.conf.json"


def _publisher(config: Path, writer: str) -> subprocess.Popen[bytes]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, "-c", STAND_IN, str(config), writer],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _whole_site(html: Path) -> str | None:
    """The one writer whose whole site html_dir holds; None where there is none yet. A mixed or partial site fails."""
    if not html.exists():
        return None
    found = {path.name: path.read_text() for path in html.iterdir()}
    assert len(found) == SITE_FILES and len(set(found.values())) == 1, sorted(set(found.values()))
    return next(iter(found.values()))


@pytest.mark.parametrize("writers", [2, 4])
@pytest.mark.parametrize("trials", TRIALS)
def test_publishes_at_once_leave_one_whole_site_and_the_results_untouched(
    tmp_path, trials, writers
):
    for trial in range(trials):
        config = _site_suite(tmp_path / str(trial))
        results = checksums(config.parent / "results")
        running = [_publisher(config, f"writer-{number}") for number in range(writers)]
        for process in running:
            _, err = process.communicate(timeout=300)
            assert process.returncode == 0, (trial, err.decode()[-2000:])
        assert _whole_site(config.parent / "html") in {
            f"writer-{number}" for number in range(writers)
        }
        assert checksums(config.parent / "results") == results
        assert not any((config.parent / ".html.publishing").iterdir())  # no scratch site left
    print(f"{writers} publishes at once: {trials} trials, one whole site each, 0 results changed")


def _when_writing(command: subprocess.Popen[bytes], writing: Any) -> float:
    """The moment ``writing()`` first holds (the command has begun to write), polled every millisecond."""
    while command.poll() is None and not writing():
        time.sleep(0.001)
    return time.monotonic()


def _kill_at(command: subprocess.Popen[bytes], moment: float, writing: Any) -> None:
    """kill -9 ``moment`` seconds after the command began to write: the moments fall while it writes, not while
    Python starts."""
    _when_writing(command, writing)
    time.sleep(moment)
    command.kill()  # SIGKILL
    command.communicate()


def _finish(command: subprocess.Popen[bytes]) -> int:
    """The exit status; what it said on stderr printed (pytest shows it with a failure)."""
    _, err = command.communicate(timeout=600)
    print(err.decode()[-2000:], end="")
    return command.returncode


def _big_source(tmp: Path, builds: int) -> Path:
    source = tmp / "source"
    for number in range(builds):
        asvresults.write_results(
            source,
            "m",
            f"{number + 1:08x}{'0' * 32}",
            0,
            {TRAINING_CPU: 0.001 * (number + 1), INFERENCE_CPU: 0.002},
            ["cpu"],
            ["mlp"],
            [8],
        )
    asvresults.write_benchmarks(
        source,
        asvresults.write_results(
            source, "m", COMMIT, 0, {INFERENCE_CPU: 0.004}, ["cpu"], ["mlp"], [8]
        ),
    )
    return source


def _merger(dest: Path, source: Path) -> subprocess.Popen[bytes]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    main = "import sys; from mpsbench import cli; sys.exit(cli.main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", main, "results", "merge", str(dest), str(source)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("moments", MOMENTS)
def test_kill_9_of_a_merge_loses_nothing_and_the_next_run_recovers(tmp_path, moments):
    """A merge of many files killed at random moments (drawn over a whole merge's time): every recorded value kept,
    every file whole; the next merge completes, cleans the orphans, and DEST equals an uninterrupted merge's."""
    rng = random.Random(fault_seed("46"))
    source = _big_source(tmp_path, 400)
    reference = tmp_path / "reference"
    _results(reference, COMMIT)
    running = _merger(reference, source)
    started = _when_writing(running, lambda: len(list((reference / "m").iterdir())) > 2)
    assert _finish(running) == 0
    whole = time.monotonic() - started  # from its first write to its end
    expected = _values_under_their_build(reference)
    midway = 0  # kills that left some values merged and some not: the ones that test the recovery
    for moment in range(moments):
        dest = tmp_path / f"dest{moment}"
        _results(dest, COMMIT)
        recorded = _values_under_their_build(dest)
        _kill_at(
            _merger(dest, source),
            rng.uniform(0, whole),
            lambda dest=dest: len(list((dest / "m").iterdir())) > 2,
        )  # machine.json and the recorded file
        after = _values_under_their_build(dest)  # every file whole, each under its own build
        assert all(after[key] == value for key, value in recorded.items()), moment
        midway += len(recorded) < len(after) < len(expected)
        assert _finish(_merger(dest, source)) in (0, 1)
        assert _values_under_their_build(dest) == expected and not files.orphans(dest), moment
    print(
        f"kill -9 of a merge at {moments} moments over its {whole:.2f} s of writing ({midway} mid-merge): 0 lost, each next run"
        " recovered"
    )


@pytest.mark.parametrize("moments", MOMENTS)
def test_kill_9_of_a_publish_loses_nothing_and_the_next_run_recovers(tmp_path, moments):
    """A publish killed at random moments: the results untouched, html_dir the previous site whole (or none yet);
    the next publish writes a whole site and leaves no scratch behind."""
    rng = random.Random(fault_seed("46"))
    config = _site_suite(tmp_path)
    results = checksums(config.parent / "results")
    staging = config.parent / ".html.publishing"
    running = _publisher(config, "first")
    started = _when_writing(running, lambda: staging.is_dir() and any(staging.iterdir()))
    assert _finish(running) == 0
    whole = time.monotonic() - started  # from its first write to its end
    midway = 0  # kills that left a scratch site behind: the ones that test the recovery
    for moment in range(moments):
        before = _whole_site(config.parent / "html")
        _kill_at(
            _publisher(config, f"killed-{moment}"),
            rng.uniform(0, whole),
            lambda: any(staging.iterdir()),
        )  # its scratch site has appeared
        midway += any(staging.iterdir())
        assert _whole_site(config.parent / "html") in {before, f"killed-{moment}"}, moment
        assert checksums(config.parent / "results") == results, moment
        assert _finish(_publisher(config, f"again-{moment}")) == 0, moment
        assert _whole_site(config.parent / "html") == f"again-{moment}"
        assert not any(staging.iterdir()), moment
    print(
        f"kill -9 of a publish at {moments} moments over its {whole:.2f} s of writing ({midway} mid-publish): 0 lost, each next"
        " run recovered"
    )


def test_the_nightly_collect_names_each_refused_artifact_file_and_merges_the_rest(tmp_path, capsys):
    from mpsbench.fleet import nightly

    fleet = nightly.Fleet(suite=tmp_path, folder=tmp_path / "fleet")
    good, bad = tmp_path / "artifact-m1", tmp_path / "artifact-m2"
    _results(good, "4" * 40, 0.004, machine="m1")
    _renamed(bad)  # machine m: build a01a66bc's value under 395aa824's name
    _junk_statistic(bad)
    assert nightly.collect(fleet, [bad, good], update_benchmarks=False) == 1
    out = capsys.readouterr().out
    refusals = [line for line in out.splitlines() if line.startswith("refused")]
    assert len(refusals) == 2 and all(
        line.endswith("nothing merged from this file") for line in refusals
    ), out
    assert (fleet.results / "m1" / f"{'4' * 8}-{FILE}").is_file()
    assert sorted(path.name for path in (fleet.results / "m").glob("*-*.json")) == []

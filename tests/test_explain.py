"""`mpsbench explain`: the op that got slower inside a combination's step, named by torch.profiler.

The slow tests run the real command (real asv discovery, real processes, the real torch.profiler) over
stand-in builds made the way the GPU trials make them (docs/evidence/gpu-bisect.md): site-packages
folders of links to this environment's torch, one with torch's own ``nn.Linear.forward`` patched as
scripts/make_slowed_wheels.py patches it (an extra product over the whole batch while training), one
with ``F.layer_norm`` normalizing twice. The others test the table's arithmetic and the profiler's plan
under stand-in torch modules (cuda and mps are absent here).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from tests import asvresults

from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve, timeline
from mpsbench.context import Suite
from mpsbench.regressions import alerts, explain, profile_step, rule
from mpsbench.results import recorded
from mpsbench.site import regressions_page

ROOT = Path(__file__).resolve().parents[1]
SUITE = """\
import torch
import torch.nn.functional as F


class Step:
    params = (["cpu"], ["linear", "norm"])
    param_names = ["device", "part"]
    version = "1"

    def setup(self, device, part):
        torch.manual_seed(0)
        torch.set_num_threads(1)
        # the products dominate a step: the loaded VM's scheduling noise is a small part of what is added
        self.model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.x = torch.randn(256, 512)
        self.tokens = torch.randn(2048, 1024)
        self.weight, self.bias = torch.ones(1024), torch.zeros(1024)

    def time_step(self, device, part):
        if part == "linear":  # a training step: the patched Linear adds its product only while training
            self.optimizer.zero_grad()
            self.model(self.x).square().mean().backward()
            self.optimizer.step()
        else:
            for _ in range(4):
                F.layer_norm(self.tokens, (1024,), self.weight, self.bias)
"""
LINEAR_ROW = "Step.time_step\\('cpu', 'linear'\\)"
NORM_ROW = "Step.time_step\\('cpu', 'norm'\\)"
LAYER_NORM = (
    "    return torch.layer_norm(\n"
    "        input, normalized_shape, weight, bias, eps, torch.backends.cudnn.enabled\n    )\n"
)


def _slowed_wheels() -> types.ModuleType:
    """scripts/make_slowed_wheels.py, the project's own slowed-wheel tooling, as a module."""
    spec = importlib.util.spec_from_file_location(
        "make_slowed_wheels", ROOT / "scripts" / "make_slowed_wheels.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _stand_in_build(
    folder: Path, patched: str = "", original: str = "", replacement: str = ""
) -> Path:
    """A site-packages folder of links to this environment's, its torch a tree of links; ``patched`` (a file
    under it) a real copy with ``original`` replaced."""
    import torch

    site = Path(torch.__file__).resolve().parents[1]
    folder.mkdir(parents=True)
    for entry in site.iterdir():
        if entry.name != "torch":
            (folder / entry.name).symlink_to(entry)
    subprocess.run(["cp", "-as", str(site / "torch"), str(folder / "torch")], check=True)
    if patched:
        code = (site / patched).read_text()
        assert code.count(original) == 1, f"{patched} is not the torch this test patches"
        (folder / patched).unlink()
        (folder / patched).write_text(code.replace(original, replacement))
    return folder


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """Three builds on channel exam (plain, linear, norm), the stand-in suite, a home."""
    base = tmp_path_factory.mktemp("explain")
    slowed = _slowed_wheels()
    changes = {
        "plain": ("", "", ""),
        "linear": ("torch/nn/modules/linear.py", slowed.ORIGINAL, slowed.patched_forward(10)),
        "norm": (
            "torch/nn/functional.py",
            LAYER_NORM,
            LAYER_NORM.replace("return ", "", 1) + LAYER_NORM,
        ),
    }
    manifest = mf.Manifest()
    for number, (name, change) in enumerate(changes.items(), start=1):
        folder = _stand_in_build(base / "builds" / name, *change)
        date = mf.format_date(datetime(2026, 11, number, 3, tzinfo=timezone.utc))
        manifest = mf.append(manifest, "exam", resolve.existing(folder, build_id=name, date=date))
    mf.save(manifest, base / "builds" / "manifest.json")
    timeline.generate(manifest, base / ".asv" / "timeline")
    suite = base / "suite"
    (suite / "benchmarks").mkdir(parents=True)
    (suite / "benchmarks" / "__init__.py").write_text("")
    (suite / "benchmarks" / "bench_step.py").write_text(SUITE)
    shutil.copy(ROOT / "asv.conf.json", suite / "asv.conf.json")
    (suite / "src").symlink_to(ROOT / "src")
    (base / "home").mkdir()
    yield base
    shutil.rmtree(base / "builds", ignore_errors=True)  # 14k links a build


def _mpsbench(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(project / "home"), MPSBENCH_PLATFORM="linux-x86_64-cpu")
    env.pop("PIP_FIND_LINKS", None)
    return subprocess.run(
        [sys.executable, "-m", "mpsbench.cli", *args, "--suite-root", str(project / "suite")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _saved(project: Path, name: str) -> dict[str, Any]:
    """The numbers --save wrote beside the table."""
    said: dict[str, Any] = json.loads((project / f"{name}.txt.json").read_text())
    return said


@pytest.mark.slow
def test_the_slowed_linear_is_the_top_row_and_its_calls_per_step_double(project):
    # four processes a build: on the loaded 2-core VM a process's products all run at one of two speeds, about 2x
    # apart (the same build, process to process), and the fastest of two processes of a side was sometimes a slow one
    done = _mpsbench(
        project,
        "explain",
        "exam@plain",
        "exam@linear",
        "-b",
        LINEAR_ROW,
        "--threads",
        "1",
        "--calls",
        "8",
        "--rounds",
        "4",
        "--save",
        str(project / "linear.txt"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = _saved(project, "linear")
    top = said["ops"][0]
    assert top["name"] in ("aten::mm", "aten::addmm"), (
        done.stdout
    )  # the matmul the extra product runs
    by_name = {row["name"]: row for row in said["ops"]}
    linear = by_name["aten::linear"]
    assert linear["after"]["calls"] == 2 * linear["before"]["calls"] == 4, (
        done.stdout
    )  # two layers, twice each
    assert (
        "aten::linear shapes: [[256, 512], [1024, 512], []] 0 -> 1 a step" in done.stdout
    )  # the new call's shapes
    assert said["b"]["step"] > said["a"]["step"]
    assert "unexplained" in done.stdout and "step without the profiler" in done.stdout
    rounds = [line for line in done.stderr.splitlines() if "mpsbench explain: process " in line]
    assert len(rounds) == 8 and "s left" in rounds[0], done.stderr  # progress, with what is left


@pytest.mark.slow
def test_the_doubled_layer_norm_is_the_top_row(project):
    done = _mpsbench(
        project,
        "explain",
        "exam@plain",
        "exam@norm",
        "-b",
        NORM_ROW,
        "--threads",
        "1",
        "--calls",
        "8",
        "--save",
        str(project / "norm.txt"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = _saved(project, "norm")
    assert said["ops"][0]["name"] == "aten::native_layer_norm", done.stdout
    by_name = {row["name"]: row for row in said["ops"]}
    assert by_name["aten::layer_norm"]["before"]["calls"] == 4
    assert by_name["aten::layer_norm"]["after"]["calls"] == 8, done.stdout
    # the sum is every row's, and what it leaves of the step's change is said (how near they come is a figure of
    # a quiet machine, docs/evidence/explain.md: a busy one moves the step without the profiler)
    change = said["b"]["step"] - said["a"]["step"]
    explained = sum(
        (row["after"] or {"seconds": 0})["seconds"] - (row["before"] or {"seconds": 0})["seconds"]
        for row in said["ops"]
    )
    assert (
        f"every row summed: {explained * 1e3:+.3f} ms/step; unexplained {(change - explained) * 1e3:+.3f} ms"
        in done.stdout
    ), done.stdout


@pytest.mark.slow
def test_bisect_ends_with_the_table_of_its_first_bad_build_timed_apart_and_kept_for_the_site(
    project,
):
    done = _mpsbench(
        project,
        "bisect",
        "exam@plain",
        "exam@norm",
        "-b",
        NORM_ROW,
        "--threads",
        "1",
        "--min-rounds",
        "4",
        "--max-rounds",
        "4",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout
    assert "first bad build: exam@norm (the build before it, exam@linear, is good)" in said, said
    table = said[said.index("explaining exam@norm against exam@linear") :]
    assert table.splitlines()[5].startswith("aten::native_layer_norm"), (
        table
    )  # under the header and its rule
    assert "timed apart: the bisection" in table
    kept = project / "suite" / ".asv" / "explain"
    assert [path.suffix for path in sorted(kept.iterdir())] == [".txt", ".json"], sorted(
        kept.iterdir()
    )


@pytest.mark.slow
def test_one_build_against_itself_is_refused_and_bad_input_is_one_line(project):
    done = _mpsbench(project, "explain", "exam@plain", "exam@plain", "-b", NORM_ROW)
    assert done.returncode == 2 and "A and B are the same build (exam@plain)" in done.stderr, (
        done.stderr
    )
    done = _mpsbench(project, "explain", "exam@plain", "exam@nope", "-b", NORM_ROW)
    assert done.returncode == 2 and "unknown build 'exam@nope'" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_bad_option_is_one_line_and_exit_2(tmp_path):
    for args, says in (
        (("--rounds", "0"), "--rounds must be a whole number of at least 1"),
        (("--calls", "x"), "--calls must be a whole number"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "mpsbench.cli", "explain", "a", "b", "-b", "x", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_process_profiles_a_real_step_with_the_real_profiler(tmp_path):
    """profile_step.py as explain runs it: python -S, this environment's torch, a stand-in suite."""
    import torch

    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "bench_step.py").write_text(SUITE)
    out = tmp_path / "profile.json"
    torch_dir = str(Path(torch.__file__).parent)
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            profile_step.__file__,
            str(tmp_path / "benchmarks"),
            "bench_step.Step.time_step-0",
            torch_dir,
            str(out),
            "3",
            str(os.getpid()),
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = json.loads(out.read_text())
    assert done.returncode == 0 and "error" not in said, done.stdout + done.stderr + str(said)
    assert (
        said["device"] == "cpu"
        and said["basis"] == "cpu"
        and said["calls"] == 3
        and said["missing"] == []
    )
    linear = [row for row in said["rows"] if row["name"] == "aten::linear"]
    assert sorted(row["calls"] for row in linear) == [
        3,
        3,
    ]  # two layers, one call each a step, 3 steps
    assert {row["shapes"] for row in linear} == {
        "[[256, 512], [1024, 512], [1024]]",
        "[[256, 1024], [512, 1024], [512]]",
    }
    outside = [row for row in said["rows"] if row["name"] == profile_step.OUTSIDE_OPS]
    assert (
        len(outside) == 1 and outside[0]["calls"] == 3
    )  # torch's step row: the time outside any op
    assert said["call_seconds"] > 0 and said["timed_calls"] >= profile_step.TIMED_CALLS[0]


def _torch(
    cuda: bool = False,
    cuda_activity: bool = True,
    mps_profiler: bool = True,
    mps: bool = True,
    profiler: bool = True,
) -> types.SimpleNamespace:
    """A stand-in torch module with just what plan() asks of it."""
    activity = types.SimpleNamespace(CPU="cpu", **({"CUDA": "cuda"} if cuda_activity else {}))
    found = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: cuda),
        backends=types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps)),
    )
    if profiler:
        found.profiler = types.SimpleNamespace(ProfilerActivity=activity)
    calls: list[dict[str, object]] = []
    if mps_profiler:
        found.mps = types.SimpleNamespace(
            profiler=types.SimpleNamespace(
                profile=lambda **kwargs: calls.append(kwargs) or "signposts"
            )
        )
    found.calls = calls
    return found


def test_the_plan_asks_each_build_only_for_what_its_profiler_has():
    cuda = profile_step.plan(_torch(cuda=True), "cuda")
    assert cuda.activities == ["cpu", "cuda"] and cuda.basis == "device" and cuda.missing == []
    old = profile_step.plan(_torch(cuda=True, cuda_activity=False), "cuda")
    assert (
        old.activities == ["cpu"] and old.basis == "cpu" and "cuda kernel times" in old.missing[0]
    )
    assert profile_step.plan(_torch(), "cpu") == profile_step.Plan(["cpu"], "cpu")
    legacy = profile_step.plan(_torch(profiler=False), "cpu")
    assert legacy.activities == [] and "torch.profiler (torch >= 1.8.1)" in legacy.missing[0]


def test_on_mps_the_signposts_are_asked_for_where_the_build_has_them_and_the_gpu_times_said_missing():
    stand_in = _torch()
    found = profile_step.plan(stand_in, "mps")
    assert found.activities == ["cpu"] and found.basis == "cpu"
    assert found.signposts() == "signposts" and stand_in.calls == [
        {"mode": "interval", "wait_until_completed": False}
    ]
    assert "mps GPU times" in found.missing[0] and "Instruments" in found.missing[1]
    for before_2_1 in (
        _torch(mps_profiler=False),
        _torch(mps=False),
    ):  # no torch.mps.profiler, or no mps here
        found = profile_step.plan(before_2_1, "mps")
        assert found.signposts is contextlib.nullcontext
        assert "no torch.mps.profiler" in found.missing[1]


def _process(
    rows: list[tuple[str, str, int, float]], call_ms: float, kind: str = "op"
) -> dict[str, object]:
    """profile_step.py's JSON of a process of 2 calls, 1 step each: (name, shapes, calls, self us) rows."""
    return {
        "torch": "2.14.1",
        "device": "cpu",
        "steps_per_call": 1,
        "calls": 2,
        "call_seconds": call_ms / 1e3,
        "profiled_call_seconds": call_ms * 1.1 / 1e3,
        "basis": "cpu",
        "missing": [],
        "timed_calls": 10,
        "rows": [
            {
                "name": name,
                "kind": kind,
                "shapes": shapes,
                "calls": calls,
                "cpu_us": us,
                "device_us": 0.0,
                "cpu_us_median": us / calls,
                "device_us_median": 0.0,
            }
            for name, shapes, calls, us in rows
        ],
    }


def test_a_call_the_machine_descheduled_does_not_move_its_ops_time():
    """rows() over the profiler's own events: one of five calls 100x slower leaves the median per call; an
    annotation's span on the device is no kernel."""
    event = types.SimpleNamespace
    events = [
        event(
            name="aten::mm",
            device_type="DeviceType.CPU",
            input_shapes=[[8, 4]],
            self_cpu_time_total=us,
            self_device_time_total=0.0,
        )
        for us in (10.0, 11.0, 1000.0, 10.0, 12.0)
    ]
    events += [
        event(
            name=f"ProfilerStep#{n}",
            device_type="DeviceType.CPU",
            input_shapes=[],
            self_cpu_time_total=5.0,
            self_cuda_time_total=0.0,
        )
        for n in (2, 3)
    ]  # an older torch's name for the device time
    events += [
        event(
            name="ProfilerStep#2",
            device_type="DeviceType.CUDA",
            input_shapes=[],
            self_cpu_time_total=0.0,
            self_device_time_total=900.0,
            is_user_annotation=True,
        ),  # the step's span on the device
        event(
            name="Optimizer.step#SGD.step",
            device_type="DeviceType.CUDA",
            input_shapes=[],
            self_cpu_time_total=0.0,
            self_device_time_total=50.0,
            is_user_annotation=True,
        ),
        event(
            name="sm90_gemm",
            device_type="DeviceType.CUDA",
            input_shapes=[],
            self_cpu_time_total=0.0,
            self_device_time_total=30.0,
            is_user_annotation=False,
        ),
    ]
    mm, outside, kernel = profile_step.rows(events)
    assert (
        kernel["kind"] == "kernel" and kernel["name"] == "sm90_gemm"
    )  # no annotation taken for a kernel
    assert mm == {
        "name": "aten::mm",
        "kind": "op",
        "shapes": "[[8, 4]]",
        "calls": 5,
        "cpu_us": 1043.0,
        "device_us": 0.0,
        "cpu_us_median": 11.0,
        "device_us_median": 0.0,
    }
    assert (
        outside["name"] == profile_step.OUTSIDE_OPS
        and outside["calls"] == 2
        and outside["shapes"] == ""
    )


def test_the_table_ranks_by_the_change_per_step_and_says_what_it_leaves_unexplained():
    before = [
        _process([("aten::mm", "[[8, 4]]", 4, 2000.0), ("aten::add", "", 2, 400.0)], call_ms=1.5),
        _process([("aten::mm", "[[8, 4]]", 4, 2200.0), ("aten::add", "", 2, 400.0)], call_ms=1.5),
    ]
    after = [
        _process(
            [
                ("aten::mm", "[[8, 4]]", 4, 2000.0),
                ("aten::mm", "[[2, 4]]", 4, 2000.0),
                ("aten::add", "", 2, 300.0),
            ],
            call_ms=3.6,
        )
    ] * 2
    found = explain.diff(
        "Step.time_step()", explain.side("exam@a", before), explain.side("exam@b", after)
    )
    assert [row.name for row in found.ops] == ["aten::mm", "aten::add"]
    mm = found.ops[0]
    assert mm.before is not None and mm.after is not None
    assert (mm.before.calls, mm.after.calls) == (2, 4)  # per step: 4 calls over 2 steps, then 8
    assert mm.before.seconds == pytest.approx(1e-3) and mm.after.seconds == pytest.approx(
        2e-3
    )  # the fastest
    assert found.step_change == pytest.approx(2.1e-3) and found.explained == pytest.approx(0.95e-3)
    shown = explain.format_explained(found)
    assert "aten::mm shapes: [[2, 4]] 0 -> 2 a step" in shown
    assert (
        "[[8, 4]]" not in shown.split("aten::mm shapes")[1]
    )  # shapes whose calls did not change are not listed
    assert (
        "the table's changes, every row summed: +0.950 ms/step; unexplained +1.150 ms (55% of the change)"
        in shown
    )
    assert "step without the profiler: A 1.500 ms, B 3.600 ms, change +2.100 ms (+140.0%)" in shown


def test_an_op_one_process_never_ran_counts_as_no_calls_there_and_missing_features_are_said():
    before = [_process([("aten::add", "", 2, 400.0)], call_ms=1.0)] * 2
    after = [
        _process([("aten::add", "", 2, 400.0), ("aten::mul", "", 2, 200.0)], call_ms=1.2),
        _process([("aten::add", "", 2, 400.0)], call_ms=1.2),
    ]
    after[0]["missing"] = ["mps GPU times: the cpu's"]
    found = explain.diff(
        "Step.time_step()", explain.side("exam@a", before), explain.side("exam@b", after)
    )
    mul = next(row for row in found.ops if row.name == "aten::mul")
    assert (
        mul.before is None and mul.after is not None and mul.after.calls == 0.5
    )  # the median of 1 and 0
    shown = explain.format_explained(found)
    assert "missing in exam@b (torch 2.14.1): mps GPU times: the cpu's" in shown
    assert "aten::mul" in shown


def test_device_times_rank_ops_and_list_kernels_apart():
    def cuda(kernel_us: float, call_ms: float) -> dict[str, object]:
        said = _process([("aten::addmm", "", 2, 30.0)], call_ms)
        said["basis"] = "device"
        rows: list[dict[str, object]] = said["rows"]  # type: ignore[assignment]
        rows[0].update(device_us=kernel_us, device_us_median=kernel_us / 2)
        rows.append(
            {
                "name": "sm90_gemm",
                "kind": "kernel",
                "shapes": "",
                "calls": 2,
                "cpu_us": 0.0,
                "device_us": kernel_us,
                "cpu_us_median": 0.0,
                "device_us_median": kernel_us / 2,
            }
        )
        return said

    found = explain.diff(
        "x",
        explain.side("exam@a", [cuda(1000.0, 0.6)]),
        explain.side("exam@b", [cuda(2000.0, 1.1)]),
    )
    assert [row.name for row in found.ops] == ["aten::addmm"] and [
        row.name for row in found.kernels
    ] == ["sm90_gemm"]
    assert found.explained == pytest.approx(
        0.5e-3
    )  # the ops' device time, not the cpu's 30 us, nor twice
    shown = explain.format_explained(found)
    assert "the device's kernel time" in shown and "kernels (device time" in shown
    assert "shapes" not in shown  # a kernel's shapes are not recorded: nothing to list


def test_the_site_links_a_kept_regression_to_the_table_bisect_kept(tmp_path):
    """judge_site copies the stored table of a regressed jump into the site and links it; no table, no link."""
    name = "benchmark_models.Training.time_step('cuda', 'bert_base', 64)"
    old, new, other = "1" * 40, "2" * 40, "3" * 40
    html, results = tmp_path / "html", tmp_path / "results"
    html.mkdir()
    shutil.copytree(
        asvresults.RECORDED / "cpu-2026-11-23", results
    )  # real results, none of this row's builds
    (html / "index.json").write_text(
        json.dumps({"benchmarks": {}, "revision_to_hash": {"1": old, "2": new, "3": other}})
    )
    (html / "regressions.json").write_text(
        json.dumps(
            {
                "regressions": [
                    [
                        name,
                        "graphs/machine-a/x.json",
                        {"machine": "a"},
                        None,
                        2.0,
                        1.0,
                        [[1, 2, 1.0, 2.0], [2, 3, 2.0, 4.0]],
                    ]
                ]
            }
        )
    )
    kept = explain.stored(results) / explain.stored_name(name, old, new)
    kept.parent.mkdir()
    kept.write_text("explain ...: aten::addmm\n")
    judged = regressions_page.judge_site(
        html, results, recorded.load(results), {}, timeline.Reader(None)
    )
    assert [j["explain"] for j in judged] == [
        f"explain/{kept.name}",
        "",
    ]  # asv's word alone: both kept
    assert (html / "explain" / kept.name).read_text() == "explain ...: aten::addmm\n"
    found = {
        r["new"]: r.get("explain", "") for r in regressions_page.latest(html, timeline.Reader(None))
    }
    assert found == {new: f"explain/{kept.name}", other: ""}


@pytest.mark.parametrize(
    "status", [rule.Decision.SLOWER.exit_status, rule.Decision.UNCHANGED.exit_status]
)
def test_a_confirmed_alert_is_explained_and_its_table_kept_for_the_site(
    tmp_path, monkeypatch, status
):
    """alerts' compare: a fresh compare that says slower is followed by explain --keep on the same builds."""
    ran = []

    def run(command, check):
        ran.append(command[3:])
        return subprocess.CompletedProcess(command, status if command[3] == "compare" else 0)

    monkeypatch.setattr(alerts.subprocess, "run", run)
    compare = alerts.compare_command(
        Suite(tmp_path / "asv.conf.json", tmp_path / "m.json", tmp_path / "t"), "m1"
    )
    assert compare("a" * 40, "b" * 40, "^x$") == status
    files = [
        "--manifest",
        str(tmp_path / "m.json"),
        "--timeline",
        str(tmp_path / "t"),
        "--machine",
        "m1",
    ]
    explained = [["explain", "a" * 40, "b" * 40, "-b", "^x$", *files, "--keep"]]
    assert ran == [
        ["compare", "a" * 40, "b" * 40, "-b", "^x$", *files],
        *(explained if status == rule.Decision.SLOWER.exit_status else []),
    ]


def test_explain_keep_stores_the_table_where_the_site_finds_it(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(ROOT / "asv.conf.json", suite / "asv.conf.json")
    side = explain.side("exam@a", [_process([("aten::add", "", 2, 400.0)], call_ms=1.0)])
    found = explain.Explained("Step.time_step()", side, side, [], [], commits=("1" * 40, "2" * 40))
    path = explain.keep(
        found,
        explain.Options("x", Suite(suite / "asv.conf.json", tmp_path / "m.json", tmp_path / "t")),
    )
    assert path == suite / ".asv" / "explain" / explain.stored_name(
        "Step.time_step()", "1" * 40, "2" * 40
    )
    assert path.read_text().startswith("explain Step.time_step()") and json.loads(
        path.with_name(path.name + ".json").read_text()
    )["commits"] == ["1" * 40, "2" * 40]

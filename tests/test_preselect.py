"""mpsbench preselect: the -b pattern names exactly the combinations whose setup would not skip."""

from __future__ import annotations

import ast
import importlib
import itertools
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from asv.benchmarks import Benchmarks

from mpsbench.core import asv
from mpsbench.core.errors import UserError
from mpsbench.measure import (
    devices,
    isolated,
    llm,
    maxbatch,
    ops,
    preselect,
    selection,
    suite,
    workloads,
)

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


class Built(Exception):
    """Raised where a benchmark would build its model or inputs: the combination runs."""


@pytest.fixture(scope="module")
def discovered() -> list[Any]:
    return preselect.discover(BENCHMARKS)


@pytest.fixture
def every_device_usable(monkeypatch):
    """Every device present and usable, every build a :class:`Built`: setup's verdicts cost nothing."""

    def build(*args, **kwargs):
        raise Built(args)

    monkeypatch.setattr(devices, "present", lambda name: True)
    monkeypatch.setattr(
        devices.Device,
        "availability",
        lambda self: devices.Availability(True, f"{self}, a stand-in"),
    )
    monkeypatch.setattr(workloads, "cached", build)
    monkeypatch.setattr(workloads, "build", build)
    monkeypatch.setattr(ops, "cached", build)
    monkeypatch.setattr(llm, "Generation", build)
    # Unsupported dtypes are found by the build's torch in setup, after the rule: not the rule's business.
    monkeypatch.setattr(suite.precision, "unsupported_reason", lambda device, kind, dtype: None)
    monkeypatch.setattr(suite.precision, "device_lacks", lambda device, dtype: None)
    monkeypatch.setattr(maxbatch.os.path, "exists", lambda path: True)
    monkeypatch.setattr(
        isolated, "call", lambda function, *args: function(*args)
    )  # stand-ins stay in this process


def setup_skips(benchmark: Any, params: tuple[Any, ...], caches: dict[Any, Any]) -> bool:
    """Whether asv would record n/a for this combination: its setup (or its figure's lookup) skips.

    Drives the benchmark class the way asv's protocol describes it (setup_cache
    once, then setup and the figure with its result first), through the class
    itself: no asv_runner internals.
    """
    module_name, class_name, method_name = benchmark.name.split(".")
    owner = getattr(importlib.import_module(f"benchmarks.{module_name}"), class_name)
    instance = owner()
    leading: tuple[Any, ...] = ()
    measure = getattr(owner, "setup_cache", None)
    try:
        if measure is not None:
            if measure not in caches:
                caches[measure] = measure(instance)
            leading = (caches[measure],)
        if hasattr(instance, "setup"):
            instance.setup(*leading, *params)
        if measure is not None and method_name.startswith("track_"):
            getattr(instance, method_name)(
                *leading, *params
            )  # the figure's lookup in setup_cache's table
    except NotImplementedError:  # asv's SkipNotImplemented: n/a
        return True
    except (
        Built,
        RuntimeError,
    ):  # a build was reached, or the lookup of a measured (here: failed) combination
        return False
    return False


@pytest.mark.parametrize(
    "env",
    [
        {},
        {selection.FULL_SWEEP_ENV: "1"},
        {selection.DEVICES_ENV: "cuda"},
        {selection.DEVICES_ENV: "mps,cpu"},
    ],
    ids=["default", "full-sweep", "cuda-only", "mps-and-cpu"],
)
def test_the_pattern_leaves_out_exactly_the_combinations_whose_setup_skips(
    discovered, every_device_usable, monkeypatch, tmp_path, env
):
    monkeypatch.chdir(
        tmp_path
    )  # asv's cache folder: the first lookup measures and leaves the readings there
    for name in (selection.FULL_SWEEP_ENV, selection.DEVICES_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    caches: dict[Any, Any] = {}
    disagreements = []
    counted = 0
    for benchmark in discovered:
        if not benchmark.params:
            continue
        combos = list(preselect.combinations([benchmark]))
        values = itertools.product(
            *[[ast.literal_eval(value) for value in axis] for axis in benchmark.params]
        )
        for params, combination in zip(values, combos, strict=True):
            skips = setup_skips(benchmark, params, caches)
            if skips != (combination.reason is not None):
                disagreements.append(
                    f"{combination.name}: setup skips={skips}, rule says {combination.reason}"
                )
            counted += 1
    assert counted > 2900  # every parameterized benchmark of the suite was compared
    assert disagreements == []


def test_the_selection_table_has_one_rule_for_each_parameterized_class_and_no_other(discovered):
    classes = {b.name.split(".")[-2] for b in discovered if b.params}
    assert set(selection.RULES) == classes
    with pytest.raises(
        KeyError, match="no selection rule for benchmark class 'Nope'; the table has: Training"
    ):
        selection.left_out("Nope", "cpu")


def test_asvs_own_matcher_selects_exactly_the_combinations_that_run(discovered, monkeypatch):
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    monkeypatch.delenv(selection.DEVICES_ENV, raising=False)
    found = preselect.combinations(discovered)
    selected = preselect.selected(found)
    pattern = asv.pattern(selected)
    runs = {c.name for c in found if c.reason is None}
    assert len(selected) == len(runs) and len(found) > len(selected)
    dicts = [{"name": b.name, "params": b.params} for b in discovered]
    conf = type("Conf", (), {"benchmark_dir": str(BENCHMARKS)})()
    chosen = Benchmarks(conf, dicts, regex=[pattern])
    picked = set()
    for benchmark in dicts:
        selected = chosen.benchmark_selection[benchmark["name"]]
        if selected is None:
            if benchmark["name"] in chosen:
                picked.add(benchmark["name"])
            continue
        combos = list(itertools.product(*benchmark["params"]))
        picked |= {f"{benchmark['name']}({', '.join(combos[idx])})" for idx in selected}
    assert picked == runs
    # On this cpu-only machine: the cpu's default selection, every fact, nothing of mps or cuda.
    assert "benchmark_models.Training.time_step('cpu', 'mlp', 1024)" in picked
    assert "benchmark_models.Environment.track_cpu_threads" in picked
    if not devices.present("cuda"):
        assert not any("'cuda'" in name for name in picked)
    assert (
        "benchmark_models.Training.time_step('cpu', 'resnet50', 128)" not in picked
    )  # full sweep only


def test_devices_are_left_out_only_when_the_machine_plainly_lacks_them(monkeypatch):
    monkeypatch.setattr(devices.os.path, "exists", lambda path: path == "/dev/nvidiactl")
    monkeypatch.setattr(devices.sys, "platform", "linux")
    assert devices.present("cpu") and devices.present("cuda")
    assert (
        devices.absent_reason("mps")
        == "mps is absent: this machine has no Apple silicon under macOS"
    )
    assert devices.accelerators_present() == ("cuda",)
    monkeypatch.setattr(devices.sys, "platform", "darwin")
    monkeypatch.setattr(devices.platform, "machine", lambda: "arm64")
    assert devices.present("mps")
    monkeypatch.setattr(
        devices.torch.cuda, "is_available", lambda: True
    )  # a Mac's answer is its platform's
    assert devices.absent_reason("cuda") == "cuda is absent: this machine has no NVIDIA driver"
    assert devices.accelerators_present() == ("mps",)


def test_a_machine_with_a_gpu_leaves_its_cpu_out_unless_named(monkeypatch):
    monkeypatch.delenv(selection.DEVICES_ENV, raising=False)
    monkeypatch.setattr(devices, "present", lambda name: name in ("cpu", "cuda"))
    reason = selection.device_reason("cpu")
    assert reason == (
        "the cpu is left out by default on a machine with cuda;"
        " set MPSBENCH_DEVICES=cuda,cpu to time it too"
    )
    assert selection.device_reason("cuda") is None
    assert (
        selection.left_out("Training", "cpu", "mlp", 1024) == reason
    )  # every family asks the same question
    assert selection.left_out("Epoch", "cpu", "resnet50", 8, 2, "tiny", "train") == reason
    monkeypatch.setenv(selection.DEVICES_ENV, "cuda,cpu")
    assert selection.device_reason("cpu") is None
    monkeypatch.delenv(selection.DEVICES_ENV)
    monkeypatch.setattr(devices, "present", lambda name: name == "cpu")
    assert selection.device_reason("cpu") is None


def test_the_epoch_rule_ignores_the_phase_both_come_from_one_measurement(monkeypatch):
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    monkeypatch.delenv(selection.DEVICES_ENV, raising=False)
    assert selection.left_out("Epoch", "cpu", "resnet50", 8, 2, "tiny", "train") is None
    assert selection.left_out("Epoch", "cpu", "resnet50", 8, 2, "tiny", "eval") is None
    assert "outside the default selection" in str(
        selection.left_out("Epoch", "cpu", "vgg16", 8, 2, "tiny", "eval")
    )


def test_the_device_is_found_by_its_param_name_wherever_it_stands(monkeypatch):
    monkeypatch.setattr(devices, "present", lambda name: name == "cpu")
    monkeypatch.setitem(selection.RULES, "Late", lambda model, device: None)
    monkeypatch.setitem(
        selection.RULES, "Deviceless", lambda size: None if size == 1 else "too big"
    )
    late = types.SimpleNamespace(
        name="suite.Late.time_x",
        param_names=["model", "device"],
        params=[["'mlp'"], ["'cpu'", "'cuda'"]],
    )
    deviceless = types.SimpleNamespace(
        name="suite.Deviceless.time_x", param_names=["size"], params=[["1", "2"]]
    )
    found = {c.name: c.reason for c in preselect.combinations([late, deviceless])}
    assert found == {
        "suite.Late.time_x('mlp', 'cpu')": None,
        "suite.Late.time_x('mlp', 'cuda')": "cuda is absent: this machine has no NVIDIA driver",
        "suite.Deviceless.time_x(1)": None,
        "suite.Deviceless.time_x(2)": "too big",
    }


def test_a_selection_with_nothing_in_it_is_refused_in_one_line_and_the_pattern_names_exactly_its_names():
    left_out = [preselect.Combination("a.b(1, 'x')", "too big")]
    with pytest.raises(UserError, match="no benchmark combination runs"):
        preselect.selected(left_out)
    with pytest.raises(UserError, match=r"no benchmark combination runs .* and -b c"):
        preselect.selected([preselect.Combination("a.b(1, 'x')", None)], ["c"])
    assert re.fullmatch(asv.pattern(["a.b(1, 'x')"]), "a.b(1, 'x')")
    assert not re.search(asv.pattern(["a.b"]), "a.b(1, 'x')")  # a bare name selects no combination


def test_the_command_line_prints_the_pattern_and_refuses_a_folder_that_is_no_suite(tmp_path):
    mpsbench = [sys.executable, "-m", "mpsbench.cli"]
    done = subprocess.run(
        [*mpsbench, "preselect"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("^(?:") and "asv will run" in done.stderr
    done = subprocess.run(
        [*mpsbench, "preselect", "--benchmark-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"mpsbench: error: {tmp_path} is not a benchmark package (no __init__.py); pass the suite's"
        " benchmark folder (benchmarks in this checkout)\n"
    )


def test_on_cuda_the_correctness_rows_and_the_llama_generation_are_full_sweep_only(monkeypatch):
    monkeypatch.delenv(selection.FULL_SWEEP_ENV, raising=False)
    monkeypatch.delenv(selection.DEVICES_ENV, raising=False)
    monkeypatch.setattr(devices, "present", lambda name: name in ("cpu", "cuda", "mps"))
    assert "full sweep only" in selection.left_out(
        "Correctness", "cuda", "sdpa_permuted", "float32"
    )
    assert "full sweep only" in selection.left_out("LlmDecode", "cuda", "llama_small")
    assert "full sweep only" in selection.left_out("LeakPatterns", "cuda", "maxpool2d")
    assert (
        selection.left_out("Correctness", "mps", "sdpa_permuted", "float32") is None
    )  # where the silent errors were
    assert selection.left_out("LlmPrefill", "mps", "llama_small") is None
    monkeypatch.setenv(selection.FULL_SWEEP_ENV, "1")
    assert selection.left_out("Correctness", "cuda", "sdpa_permuted", "float32") is None
    assert selection.left_out("LlmDecode", "cuda", "llama_small") is None


ID_SUITE = """\
def track_plain():
    return []


class Sweep:
    params = ([1, 2], ["a", "b", "c"], [0.5, 2.5])
    param_names = ["size", "kind", "scale"]

    def track_combination(self, size, kind, scale):
        return [size, kind, scale]
"""


def test_each_rows_benchmark_id_makes_asv_runner_run_that_rows_combination(tmp_path, monkeypatch):
    """compare and bisect hand asv_runner the row's id: the params it runs under that id are the
    row's (first, last and param-less rows alike)."""
    from asv_runner.discovery import get_benchmark_from_name

    root = tmp_path / "idsuite"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "bench_ids.py").write_text(ID_SUITE)
    found = preselect.rows(preselect.discover(root))
    assert len(found) == 1 + 2 * 3 * 2
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # asv_runner adds its importer
    try:
        ran = {}
        for row in found:
            benchmark = get_benchmark_from_name(str(root), row.benchmark_id)
            ran[row.benchmark_id] = asv.combination(
                benchmark.name, [repr(value) for value in benchmark.do_run()]
            )
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == root.name]:
            del sys.modules[name]
    assert ran == {row.benchmark_id: row.name for row in found}
    assert {
        "bench_ids.track_plain": "bench_ids.track_plain",
        "bench_ids.Sweep.track_combination-0": "bench_ids.Sweep.track_combination(1, 'a', 0.5)",
        "bench_ids.Sweep.track_combination-11": "bench_ids.Sweep.track_combination(2, 'c', 2.5)",
    }.items() <= ran.items()

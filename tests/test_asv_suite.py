"""The asv suite itself: well-formed classes, `asv check`, and a real asv run on a subset."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest
from benchmarks import benchmark_models
from tests import asvresults

ROOT = Path(__file__).resolve().parents[1]
ASV = [sys.executable, "-m", "asv"]
CLASSES = [benchmark_models.Training, benchmark_models.Inference]


@pytest.mark.parametrize("cls", CLASSES)
def test_params_match_param_names_and_never_depend_on_the_environment(cls):
    assert len(cls.params) == len(cls.param_names) == 3
    devices, model_names, batch_sizes = cls.params
    assert devices == ("cpu", "mps", "cuda")  # every device, present or not
    assert set(model_names) <= set(benchmark_models.models.NAMES)
    assert batch_sizes == (1, 8, 32, 64, 128, 1024)
    assert cls.version  # explicit: cosmetic edits keep history


def test_classes_share_a_setup_cache_only_with_their_own_modules_pair_and_the_epoch_with_the_capacity():
    """asv keys a setup_cache by the module and line that define it, and runs one per key.

    A module's Training and Inference classes name one function on purpose (their first
    lookup measures both, mpsbench.measure.measured.deferred); each
    must read its own kind's part. Sharing by accident gave the training tracks
    the inference table once (found on the H100: bert_base_frozen had no reading).
    """
    users: dict[object, list[str]] = {}
    for module_path in sorted((ROOT / "benchmarks").glob("benchmark_*.py")):
        module = importlib.import_module(f"benchmarks.{module_path.stem}")
        for name, cls in vars(module).items():
            if (
                not inspect.isclass(cls)
                or name.startswith("_")
                or cls.__module__ != module.__name__
            ):
                continue
            setup_cache = getattr(cls, "setup_cache", None)
            if setup_cache is None:
                continue
            # asv keys a setup_cache by where its function is defined: one function object, one key
            users.setdefault(setup_cache, []).append(
                f"{module_path.stem}.{name}:{getattr(cls, 'kind', '')}"
            )
    shared = sorted(
        sorted(name.split(".", 1)[1] for name in names)
        for names in users.values()
        if len(names) > 1
    )
    assert shared == [
        # benchmark_patterns: each reads its own family
        [
            "Correctness:correctness",
            "Determinism:determinism",
            "LeakPatterns:leaks",
            "ReportedCorrectness:reported",
        ],
        [
            "Epoch:epoch",
            "InferenceCapacity:inference",
            "TrainingCapacity:training",
        ],  # one interpreter, issue 31
        ["InferenceInstruments:inference", "TrainingInstruments:training"],
        ["InferencePrecisionCapacity:inference", "TrainingPrecisionCapacity:training"],
    ]


@pytest.fixture(scope="module")
def asv_run(tmp_path_factory):
    return asvresults.suite_asv(tmp_path_factory.mktemp("asv"))


def test_asv_check_passes(asv_run):
    done = asv_run("check", "--python=same")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No problems found" in done.stdout


class _Rows(dict[tuple[str, ...], str]):
    """A missing row fails with asv's whole output, so a failure under load shows what asv printed."""

    def __init__(self, output: str) -> None:
        super().__init__()
        self.output = output

    def __missing__(self, key: tuple[str, ...]) -> str:
        raise AssertionError(f"no row {key} in asv's output:\n{self.output}")


def _rows(output: str) -> _Rows:
    """Map (benchmark, device, model, batch) to asv's printed value."""
    rows = _Rows(output)
    current = ""
    for line in output.splitlines():
        # asv may cut the module name short, and ends the line at the name when it prints more after it
        found = re.search(r"(\w+\.(?:time|track)_\w+)(?=\s|$)", line)
        if found:
            current = found.group(1)
            continue
        cells = line.split()
        if len(cells) >= 4 and cells[0] in ("cpu", "mps", "cuda"):
            rows[(current, cells[0], cells[1], cells[2])] = " ".join(cells[3:])
    return rows


def quick_run(asv_run, *selection: str, launch_method: str = "forkserver") -> str:
    """asv's output for one sample of each selected combination (nothing recorded); asv must exit 0."""
    done = asv_run(
        "run",
        "--python=same",
        "--quick",
        "--dry-run",
        "--show-stderr",
        "--launch-method",
        launch_method,
        *selection,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_real_asv_run_of_a_few_steps_and_a_setup_cache_produces_numbers_and_skips_absent_devices(
    asv_run,
):
    """The default tier's real asv run: a handful of steps, and one cheap setup_cache (the patterns' errors)."""
    said = quick_run(
        asv_run,
        "-b",
        r"Training.time_step\('cpu', '(mlp|lenet5)', (1|8)\)",
        "-b",
        r"Training.time_step\('cuda', 'mlp', (8|1024)\)",  # outside the default at 8; absent at 1024
        "-b",
        r"Correctness.track_relative_error\('cpu', 'linear_transposed_weight', 'float32'\)",
        "-b",
        r"ReportedCorrectness.track_relative_error\('cpu', 'linear_broadcast_input', 'float32'\)",  # a child
    )
    rows = _rows(said)
    for model in ("mlp", "lenet5"):
        for batch in ("1", "8"):
            assert re.fullmatch(
                r"[\d.]+(±[\d.]+)?(μs|us|ms|s)", rows[("Training.time_step", "cpu", model, batch)]
            )
    assert (
        0
        <= float(
            rows[("Correctness.track_relative_error", "cpu", "linear_transposed_weight", "float32")]
        )
        < 1e-3
    )
    assert (
        0
        <= float(
            rows[
                (
                    "ReportedCorrectness.track_relative_error",
                    "cpu",
                    "linear_broadcast_input",
                    "float32",
                )
            ]
        )
        < 1e-3
    )
    # an absent device is skipped with its reason (n/a), never a failure
    if not benchmark_models.devices.get("cuda").usable:
        assert rows[("Training.time_step", "cuda", "mlp", "8")] == "n/a"
        assert rows[("Training.time_step", "cuda", "mlp", "1024")] == "n/a"
        assert (
            "asv: skipped: SkipNotImplemented('mlp at batch 8 on cuda is outside the default selection"
            in said
        )
        assert "asv: skipped: SkipNotImplemented('cuda is not usable here:" in said


def test_under_spawn_the_macs_launch_method_the_first_lookup_measures_the_shared_cache_and_the_next_reads_it(
    asv_run,
):
    rows = _rows(
        quick_run(
            asv_run,
            "-b",
            r"Correctness.track_relative_error\('cpu', 'linear_transposed_weight', 'float32'\)",
            "-b",
            r"Determinism.track_largest_difference\('cpu', 'linear_transposed_weight', 'float32'\)",
            launch_method="spawn",
        )
    )
    assert (
        0
        <= float(
            rows[("Correctness.track_relative_error", "cpu", "linear_transposed_weight", "float32")]
        )
        < 1e-3
    )
    assert (
        float(
            rows[
                (
                    "Determinism.track_largest_difference",
                    "cpu",
                    "linear_transposed_weight",
                    "float32",
                )
            ]
        )
        == 0
    )  # bit for bit


@pytest.mark.slow  # the capacity setup_cache measures both classes' whole cpu selection: minutes
def test_a_real_asv_run_of_the_capacity_lookups_reads_what_their_setup_cache_measured(asv_run):
    rows = _rows(
        quick_run(
            asv_run,
            "-b",
            r"InferenceCapacity.track_(throughput|peak_memory)\('cpu', '(mlp|lenet5)', 8\)",
        )
    )
    assert float(rows[("InferenceCapacity.track_throughput", "cpu", "mlp", "8")]) > 0
    assert float(rows[("InferenceCapacity.track_peak_memory", "cpu", "lenet5", "8")]) > 0

"""Measure once, look up per combination: the setup_cache tables of the track_ classes."""

from __future__ import annotations

import inspect
import itertools
import pickle

import pytest
import torch
from benchmarks import benchmark_models, common

from mpsbench.core.errors import UserError
from mpsbench.measure import devices, epoch, figures, measured, models, selection, suite


def _prepare(device, name):
    if name == "absent":
        raise suite.SkipNotImplemented(f"{device} is not usable here: no such device")
    if name == "broken":
        raise RuntimeError("a kernel failed\nsecond line")
    if name == "huge":
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80 GiB")
    return name


FIGURES = {
    "length": lambda state: len(state),
    "none": lambda state: None,
    "refused": lambda state: (_ for _ in ()).throw(suite.SkipNotImplemented("not on this device")),
}


@pytest.fixture(scope="module")
def table():
    with pytest.MonkeyPatch.context() as patch:  # a stand-in class's rule: "unselected" is left out
        patch.setitem(
            selection.RULES,
            "StandIn",
            lambda device, name: "not this run" if name == "unselected" else None,
        )
        return measured.measure(
            "StandIn",
            list(itertools.product(["cpu"], ["ok", "absent", "broken", "huge", "unselected"])),
            _prepare,
            FIGURES,
        )


def test_a_combination_the_selection_leaves_out_is_na_with_its_rules_reason(table):
    with pytest.raises(suite.SkipNotImplemented, match=r"^not this run$"):
        table.lookup(("cpu", "unselected"), "length")


def test_a_measured_figure_is_looked_up_by_its_combination(table):
    assert table.lookup(("cpu", "ok"), "length") == 2.0


def test_one_failing_combination_leaves_the_others_measured(table):
    with pytest.raises(RuntimeError, match=r"^RuntimeError: a kernel failed$"):
        table.lookup(("cpu", "broken"), "length")
    assert table.lookup(("cpu", "ok"), "length") == 2.0


def test_skips_and_out_of_memory_show_as_na_with_the_reason(table):
    with pytest.raises(suite.SkipNotImplemented, match="cpu is not usable here: no such device"):
        table.lookup(("cpu", "absent"), "length")
    with pytest.raises(
        suite.SkipNotImplemented, match="does not fit in device memory: CUDA out of memory"
    ):
        table.lookup(("cpu", "huge"), "length")


def test_a_figure_that_refuses_or_has_no_reading_skips_without_hiding_the_others(table):
    with pytest.raises(suite.SkipNotImplemented, match="not on this device"):
        table.lookup(("cpu", "ok"), "refused")
    with pytest.raises(suite.SkipNotImplemented, match="cpu keeps no reading for none"):
        table.lookup(("cpu", "ok"), "none")


def test_a_combination_missing_from_the_table_fails_instead_of_reporting_nothing(table):
    with pytest.raises(RuntimeError, match="was not measured in this run's setup_cache"):
        table.lookup(("mps", "ok"), "length")


def test_the_table_survives_asvs_pickling(table):
    assert pickle.loads(pickle.dumps(table)).lookup(("cpu", "ok"), "length") == 2.0


def test_the_capacity_classes_report_real_cpu_figures_and_skip_absent_devices():
    keys = list(itertools.product(devices.NAMES, ("mlp",), models.BATCH_SIZES))
    table = {
        "inference": figures.capacity("inference", "InferenceCapacity", keys)
    }  # its part of setup_cache
    bench = benchmark_models.InferenceCapacity()
    assert bench.track_throughput(table, "cpu", "mlp", 8) > 0
    assert bench.track_peak_memory(table, "cpu", "mlp", 8) > 0
    with pytest.raises(suite.SkipNotImplemented, match="outside the default selection"):
        bench.track_throughput(table, "cpu", "mlp", 64)
    if not suite.devices.get("cuda").usable:
        with pytest.raises(suite.SkipNotImplemented, match="cuda is not usable here"):
            bench.track_throughput(table, "cuda", "mlp", 1024)


def test_mpsbench_devices_leaves_the_other_devices_out_with_the_reason(monkeypatch):
    monkeypatch.setenv(selection.DEVICES_ENV, "cuda,mps")
    assert selection.device_reason("cpu") == "cpu is not in MPSBENCH_DEVICES=cuda,mps"
    assert selection.device_reason("mps") is None
    with pytest.raises(suite.SkipNotImplemented, match="cpu is not in MPSBENCH_DEVICES"):
        benchmark_models.Training().setup("cpu", "mlp", 8)


def test_an_unknown_device_in_mpsbench_devices_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(selection.DEVICES_ENV, "cpu,tpu")
    with pytest.raises(
        UserError,
        match="MPSBENCH_DEVICES='cpu,tpu' names 'tpu': give a comma-separated"
        " list of cpu, mps, cuda",
    ):
        selection.device_reason("cpu")


def test_a_shared_setup_cache_gives_each_family_its_readings_and_isolates_a_failing_one():
    def broken():
        raise ValueError("no kernel\nsecond line")

    readings = measured.measure_families({"training": lambda: 1.0, "inference": broken})
    assert measured.family(readings, "training") == 1.0
    with pytest.raises(RuntimeError, match=r"^measuring inference failed: ValueError: no kernel$"):
        measured.family(readings, "inference")
    with pytest.raises(
        RuntimeError, match="measured no family 'epoch'; it measured: training, inference"
    ):
        measured.family(readings, "epoch")
    assert (
        pickle.loads(pickle.dumps(readings))["inference"] == readings["inference"]
    )  # asv pickles the cache


MEASURED: list[str] = []  # one entry per time _stand_in_measuring measured


@measured.deferred
def _stand_in_measuring():
    MEASURED.append("measured")
    return {"training": 1.0}


def test_a_deferred_setup_cache_is_measured_by_the_first_lookup_in_asvs_cache_folder_and_read_by_the_rest(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # asv's cache folder: every process of the cache works in it
    MEASURED.clear()
    cache = pickle.loads(
        pickle.dumps(_stand_in_measuring(object()))
    )  # asv pickles what setup_cache returns
    assert (
        MEASURED == []
    )  # the setup_cache itself measures nothing: its interpreter never imports torch
    assert measured.family(cache, "training") == 1.0
    assert (
        measured.family(pickle.loads(pickle.dumps(cache)), "training") == 1.0
    )  # a later lookup's process
    assert MEASURED == ["measured"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "mpsbench_stand_in_measuring.begun",
        "mpsbench_stand_in_measuring.pickle",
    ]


def test_a_lookup_after_one_that_died_measuring_fails_with_the_reason_and_does_not_measure_again(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    MEASURED.clear()
    (
        tmp_path / "mpsbench_stand_in_measuring.begun"
    ).touch()  # what a killed or crashed first lookup leaves
    with pytest.raises(
        RuntimeError,
        match=r"^an earlier lookup began _stand_in_measuring in .* and did not finish"
        r" \(a crash or its timeout\): its output says why$",
    ):
        measured.family(_stand_in_measuring(), "training")
    assert MEASURED == []


def test_the_classes_that_share_a_measuring_pass_share_asvs_setup_cache_and_the_two_passes_do_not():
    from asv_runner.discovery import disc_benchmarks

    found = {benchmark.name: benchmark for benchmark in disc_benchmarks("benchmarks")}
    keys: dict[str, set[str]] = {}
    for benchmark in found.values():
        if benchmark.setup_cache_key is not None:
            keys.setdefault(benchmark.name.split(".")[1], set()).add(benchmark.setup_cache_key)
    # one key per class, the same for the classes one measuring process serves: asv runs that setup_cache once
    models_pass = keys["TrainingCapacity"]
    assert len(models_pass) == 1 and keys["InferenceCapacity"] == keys["Epoch"] == models_pass
    ops_pass = keys["MemoryBoundOps"]
    assert len(ops_pass) == 1 and keys["ComputeBoundOps"] == ops_pass
    assert models_pass != ops_pass
    assert (
        found["benchmark_ops.MemoryBoundOps.track_gbps"].timeout == common.MEASURING_TIMEOUT
    )  # it may measure


def test_the_capacity_setup_cache_measures_each_class_over_every_combination_of_its_params(
    monkeypatch,
):
    monkeypatch.setattr(figures, "capacity", lambda kind, benchmark, keys: (kind, benchmark, keys))
    monkeypatch.setattr(epoch, "measure_selection", lambda benchmark: benchmark)
    readings = inspect.unwrap(benchmark_models._measure_once)()
    assert list(readings) == ["epoch", "training", "inference"]  # the epochs first
    assert readings == {
        "epoch": "Epoch",
        "training": (
            "training",
            "TrainingCapacity",
            list(itertools.product(devices.NAMES, models.NAMES, models.BATCH_SIZES)),
        ),
        "inference": (
            "inference",
            "InferenceCapacity",
            list(itertools.product(devices.NAMES, models.INFERENCE_NAMES, models.BATCH_SIZES)),
        ),
    }


def test_each_measured_state_is_handed_back_by_release_unless_the_caller_says_how(monkeypatch):
    monkeypatch.setitem(selection.RULES, "StandIn", lambda device, name: None)
    released, handed = [], []
    monkeypatch.setattr(measured, "release", released.append)
    keys = list(itertools.product(["cpu"], ["ok", "absent", "fine"]))
    measured.measure("StandIn", keys, _prepare, {"length": len})
    assert released == [
        "cpu",
        "cpu",
    ]  # after each state built; a key whose preparation failed built none
    measured.measure("StandIn", keys, _prepare, {"length": len}, after_each=handed.append)
    assert handed == ["cpu", "cpu"] and released == ["cpu", "cpu"]

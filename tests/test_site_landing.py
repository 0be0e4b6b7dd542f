"""The landing summary (mpsbench.site.landing) from asv's own results files, and the patches that go with it.

The results are written through asv's classes (tests/asvresults.py): a Mac with mps and cpu over two builds, and a
cpu-only Linux machine over one.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import asv
import pytest
from tests import asvresults

from mpsbench.builds.timeline import Reader
from mpsbench.site import landing, patches
from mpsbench.site import throughput as tp
from mpsbench.site.site_assets import SiteAssetError

ASV_WWW = Path(asv.__file__).parent / "www"
OLD, NEW, LINUX = "a" * 40, "b" * 40, "c" * 40
DAY_MS = 86_400_000


def _record(results: Path) -> None:
    benchmarks = {}
    mac_old = {("training", "time_step", device, "mlp", 1024): 1.0 for device in ("cpu", "mps")}
    mac_new = {
        # mlp at its seed batch on both devices: the speedup is the step-time ratio, 0.200 / 0.050 = 4x
        ("inference", "time_step", "mps", "mlp", 1024): 0.010,
        ("training", "time_step", "mps", "mlp", 1024): 0.050,
        ("training", "time_step", "cpu", "mlp", 1): 0.001,  # not the seed batch: the seed's wins
        # resnet50: the seed batch (128) on mps, batch 1 only on the cpu: samples/s 128/0.5 over 1/0.1 = 25.6x
        ("training", "time_step", "mps", "resnet50", 128): 0.5,
        ("training", "time_step", "cpu", "resnet50", 1): 0.1,
        (
            "training",
            "track_throughput",
            "cpu",
            "resnet50",
            1024,
        ): 99.0,  # a capacity row: not a step time
    }
    samples = {("training", "time_step", "cpu", "mlp", 1024): [0.190, 0.195, 0.200, 0.205, 0.210]}
    for machine, commit, day, values, devices, recorded_samples in [
        ("mac", OLD, 1, mac_old, ["cpu", "mps"], None),
        ("mac", NEW, 2, mac_new, ["cpu", "mps"], samples),
        (
            "linux",
            LINUX,
            3,
            {("inference", "time_step", "cpu", "lenet5", 128): 0.002},
            ["cpu"],
            None,
        ),
    ]:
        benchmarks.update(
            asvresults.write_results(
                results,
                machine,
                commit,
                day * DAY_MS,
                values,
                devices,
                ["mlp", "lenet5", "resnet50"],
                [1, 128, 1024],
                samples=recorded_samples,
            )
        )
    asvresults.write_benchmarks(results, benchmarks)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    _record(tmp_path / "results")
    return tmp_path / "results"


def _summaries(results: Path) -> dict[str, landing.Machine]:
    return {
        summary.machine: summary for summary in landing.summarize(tp.load(results), Reader(None))
    }


def test_each_machine_shows_its_newest_build_each_seed_step_per_device_and_the_gpu_speedup(results):
    found = _summaries(results)
    assert sorted(found) == ["linux", "mac"]
    mac = found["mac"]
    assert (mac.commit, mac.devices, mac.gpus) == (NEW, ["cpu", "mps"], ["mps"])
    lines = {(line.model, line.kind): line for line in mac.lines}
    assert sorted(lines) == [("mlp", "inference"), ("mlp", "training"), ("resnet50", "training")]
    mlp = lines[("mlp", "training")]
    assert {
        device: (value.step.batch, value.seconds, value.step.seed)
        for device, value in mlp.values.items()
    } == {"cpu": (1024, 0.2, True), "mps": (1024, 0.05, True)}
    assert mlp.speedup("mps") == pytest.approx(4.0)
    assert mlp.values["cpu"].spread == pytest.approx(
        0.025, rel=0.2
    )  # asv's half IQR over the median
    assert mlp.values["mps"].spread is None  # no samples: asv kept no statistics
    resnet = lines[("resnet50", "training")]
    assert (resnet.values["cpu"].step.batch, resnet.values["cpu"].step.seed) == (1, False)
    assert resnet.speedup("mps") == pytest.approx((128 / 0.5) / (1 / 0.1))
    inference = lines[("mlp", "inference")]
    assert set(inference.values) == {"mps"} and inference.speedup("mps") is None
    assert "lenet5 training" in mac.missing and "mlp training" not in mac.missing
    linux = found["linux"]
    assert (linux.devices, linux.gpus, [(line.model, line.kind) for line in linux.lines]) == (
        ["cpu"],
        [],
        [("lenet5", "inference")],
    )


def test_the_html_holds_the_values_the_speedups_and_a_graph_link_for_each(results):
    found = _summaries(results)
    page = landing.to_html([found["mac"], found["linux"]], "mpsbench/summary.html")
    mac = page[page.index("<h3>mac") : page.index("<h3>linux")]
    assert re.search(r"<th>model</th><th>step</th><th>cpu</th><th>mps</th><th>mps/cpu</th>", mac)
    mlp = re.search(r"<tr><td>mlp</td><td>training</td>.*?</tr>", mac).group(0)
    assert ">200ms</a>" in mlp and ">50.0ms</a>" in mlp and "<b>4.00x</b>" in mlp
    link = landing.graph_link("mac", tp.Step("training", "mlp", "mps", 1024))
    assert (
        link
        == "#benchmark_models.Training.time_step?machine=mac&p-device=%27mps%27&p-model=%27mlp%27&p-batch_size=1024"
    )
    assert f'href="{link}"' in mlp.replace("&amp;", "&")
    assert (
        "bs 1*" in mac and "bs N*: not the model" in mac
    )  # the cpu's resnet50 is not at its seed batch
    linux = page[page.index("<h3>linux") :]
    assert "mps/cpu" not in linux and "Only cpu measured here" in linux
    assert '<a href="mpsbench/summary.html">Figures</a>' in page


def test_the_graph_page_gets_the_param_values_with_data(results):
    measured = landing.measured_params(tp.load(results).recorded)
    steps = measured["benchmark_models.Training.time_step"]
    assert steps == [["'cpu'", "'mps'"], ["'mlp'", "'resnet50'"], ["1", "1024", "128"]]
    assert measured["benchmark_models.Inference.time_step"][0] == ["'cpu'", "'mps'"]


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "html"
    shutil.copytree(ASV_WWW, site)
    (site / "index.json").write_text(json.dumps({"benchmarks": {}, "params": {}}))
    return site


def test_the_summary_goes_first_on_the_grid_page_once_and_index_json_lists_the_measured_values(
    results, tmp_path
):
    site = _site(tmp_path)
    for _ in range(2):
        landing.write(site, tp.load(results), Reader(None), "mpsbench/summary.html")
    text = (site / "index.html").read_text()
    assert text.count(f'id="{landing.MARK}"') == 1
    grid = text.index('<div id="summarygrid-display"')
    assert grid < text.index(landing.MARK) < text.index('<div id="summarylist-display"')
    assert set(json.loads((site / "index.json").read_text())[patches.MEASURED_KEY]) == {
        "benchmark_models.Training.time_step",
        "benchmark_models.Inference.time_step",
        "benchmark_models.TrainingCapacity.track_throughput",
    }


def test_the_graph_page_selects_only_measured_values_and_loads_the_lone_point_plugin_after_flot(
    tmp_path,
):
    site = _site(tmp_path)
    for _ in range(2):
        patches.patch_graphs(site)
    script = (site / patches.GRAPH_SCRIPT).read_text()
    assert script.count(f"index.{patches.MEASURED_KEY}") == 1 and not patches.FIRST_VALUES.search(
        script
    )
    assert (site / patches.GRID_SCRIPT).read_text().count(patches.MEASURED_TILES) == 1
    index = (site / "index.html").read_text()
    assert index.count(f'src="{patches.LONE_POINT}"') == 1
    assert (
        index.index("jquery.flot.min.js")
        < index.index(patches.LONE_POINT)
        < index.index('src="asv.js"')
    )
    assert (
        (site / patches.LONE_POINT)
        .read_text()
        .startswith("/* mpsbench: a series with a single value")
    )


def test_a_graph_script_without_asvs_selection_loop_is_one_line(tmp_path):
    (tmp_path / patches.GRAPH_SCRIPT).write_text(f"{patches.FIRST_BRANCH_ONLY}\nvar x = 1;\n")
    with pytest.raises(SiteAssetError, match=r"has no one loop selecting the first param values"):
        patches.patch_graphs(tmp_path)

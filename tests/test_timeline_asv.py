"""A real timeline of two real builds on this machine: asv run ALL, publish, and the site's index.

torch 2.13.0+cpu comes from this machine's disk as a local wheel (no torchvision
beside it, so vision models skip), torch 2.14.1 is the PyPI release (its wheels
come from this machine's pip mirror or PyPI). Builds install into the test run's
build cache (tests/conftest.py), never the user's ~/.cache/mpsbench.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests import fakes

from mpsbench.builds import manifest as mf
from mpsbench.builds import resolve, timeline

ROOT = Path(__file__).resolve().parents[1]
LOCAL_TORCH = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
SELECTION = [
    "-b",
    r"Training.time_step\('cpu', 'mlp', 8\)",
    "-b",
    r"Inference.time_step\('cpu', 'resnet50', 1\)",
]


@pytest.mark.slow
@pytest.mark.skipif(
    not LOCAL_TORCH.is_file() or sys.version_info[:2] != (3, 11), reason=f"needs {LOCAL_TORCH}"
)
def test_two_builds_run_and_publish_with_dates_and_tags(tmp_path):
    with fakes.skip_if_index_unreachable():
        release = resolve.release("2.14.1", pythons=("cp311",))
    local = resolve.wheel_file(LOCAL_TORCH, transformers="none", build_id="2.13.0-cpu")
    manifest = mf.append(mf.append(mf.Manifest(), "release", local), "release", release)
    generated = timeline.generate(manifest, tmp_path / "timeline")

    conf = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import asv.util, json, sys; print(json.dumps(asv.util.load_json(sys.argv[1], js_comments=True)))",
                str(ROOT / "asv.conf.json"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    conf.update(
        repo=str(tmp_path / "timeline"),
        branches=["release"],  # this test's timeline has only that channel
        benchmark_dir=str(ROOT / "benchmarks"),
        env_dir=str(tmp_path / "env"),
        results_dir=str(tmp_path / "results"),
        html_dir=str(tmp_path / "html"),
    )
    conf["install_command"] = [c.replace("{conf_dir}", str(ROOT)) for c in conf["install_command"]]
    conf["uninstall_command"] = [
        c.replace("{conf_dir}", str(ROOT)) for c in conf["uninstall_command"]
    ]
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))  # MPSBENCH_CACHE: the run's build cache
    env.pop("MPSBENCH_FULL", None)
    subprocess.run(
        [sys.executable, "-m", "mpsbench.cli", "machine", "--name", "ci"],
        env=env,
        check=True,
        capture_output=True,
    )

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "asv",
            "run",
            "--machine",
            "ci",
            "--launch-method",
            "forkserver",
            "--show-stderr",
            *SELECTION,
            "ALL",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert (
        "resnet50 needs torchvision" in run.stdout
    )  # the local 2.13.0+cpu build has no torchvision

    publish = subprocess.run(
        [sys.executable, "-m", "asv", "publish"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert publish.returncode == 0, publish.stdout + publish.stderr
    index = json.loads((tmp_path / "html" / "index.json").read_text())
    hashes = set(index["revision_to_hash"].values())
    assert {generated.commits["release@2.13.0-cpu"], generated.commits["release@2.14.1"]} <= hashes
    assert "v2.14.1" in index["tags"]
    dates = {
        index["revision_to_date"][rev]
        for rev, h in index["revision_to_hash"].items()
        if h == generated.commits["release@2.14.1"]
    }
    assert dates == {int(release.when().timestamp() * 1000)}  # asv stores commit dates in ms
    # asv writes one graph per benchmark under graphs/<machine and branch fields>/; parameterized
    # benchmarks hold, per build, one value per parameter combination (null where not run)
    points = [
        p
        for p in (tmp_path / "html" / "graphs").rglob("benchmark_models.Training.time_step.json")
        if "machine-ci" in p.parts and "branch-release" in p.parts
    ]
    assert len(points) == 1, points
    values = json.loads(points[0].read_text())
    assert len(values) == 2, values  # one point per build
    assert all(any(v is not None for v in value) for _, value in values), values

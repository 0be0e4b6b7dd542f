"""asv find over a stand-in timeline: a tiny 'torch' whose later builds are slower.

Needs no real torch: each build is a small wheel whose module sets a delay; the
benchmark sleeps that long. asv installs each build through the suite's real
install command, and `asv find` must name the build that introduced the slowdown.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from tests import fakes

from mpsbench.builds import machine, resolve, timeline
from mpsbench.builds import manifest as mf

ROOT = Path(__file__).resolve().parents[1]
DELAYS = [0.002, 0.002, 0.002, 0.006, 0.006, 0.006]  # build 4 (index 3) is the regression


@pytest.mark.slow
def test_asv_find_names_the_build_that_made_it_slower(tmp_path):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    manifest = mf.Manifest()
    for number, delay in enumerate(DELAYS, start=1):
        folder = tmp_path / "wheels" / str(number)
        folder.mkdir(parents=True)
        wheel = fakes.make_wheel(
            folder, "torch", f"2.15.0.dev2026110{number}+cpu", python=tag, git_version=f"{number:040d}",
            built=datetime(2026, 11, number, 3), module=f"DELAY = {delay}\n",
        )
        build = resolve.wheel_file(wheel, transformers="none", build_id=f"2026-11-0{number}")
        manifest = mf.append(manifest, "nightly", build)
    generated = timeline.generate(manifest, tmp_path / "timeline")

    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    (bench / "bench_fake.py").write_text(
        "import time\nimport torch\n\n\ndef time_work():\n    time.sleep(torch.DELAY)\n\n\ntime_work.version = '1'\n"
        "time_work.repeat = (5, 10, 5.0)\n"
    )
    installer = ROOT / "src" / "mpsbench" / "builds" / "install_build.py"
    conf = {
        "version": 1, "project": "fake", "repo": str(tmp_path / "timeline"), "branches": ["nightly"],
        "environment_type": "virtualenv", "benchmark_dir": "benchmarks", "env_dir": "env",
        "results_dir": "results", "html_dir": "html", "build_command": [],
        "install_command": [f"python {installer} install {{build_dir}} {{env_dir}} {ROOT / 'src'}"],
        "uninstall_command": [f"return-code=any python {installer} uninstall {{env_dir}}"],
    }
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), MPSBENCH_CACHE=str(tmp_path / "cache"), MPSBENCH_PLATFORM="linux-x86_64-cpu")
    env.pop("PIP_FIND_LINKS", None)
    subprocess.run([sys.executable, "-c", "from mpsbench.builds import machine; machine.write('fake')"], env=env, check=True)
    assert machine.default_name(machine.describe())  # the facts are readable here

    first, last = generated.commits["nightly@2026-11-01"], generated.commits["nightly@2026-11-06"]
    done = subprocess.run(
        [sys.executable, "-m", "asv", "find", "--machine", "fake", f"{first}..{last}", "time_work"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"Greatest regression found: ([0-9a-f]{8})", done.stdout)
    assert found, done.stdout
    assert generated.commits["nightly@2026-11-04"].startswith(found.group(1))

"""The launch method: one per-platform table in asv.conf.json, read by scripts/bench and every derived config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpsbench.regressions import factor
from mpsbench.results import asvconf

ROOT = Path(__file__).resolve().parents[1]
CONF = factor.read_config(ROOT / "asv.conf.json")


def test_macos_gets_spawn_linux_forkserver_and_a_plain_asv_run_spawn():
    assert CONF["launch_method"] == "spawn"  # what asv itself reads: safe on every platform
    assert asvconf.launch_method(CONF, "darwin") == "spawn"
    assert asvconf.launch_method(CONF, "linux") == "forkserver"
    assert asvconf.launch_method(CONF, "win32") == "spawn"  # no entry: asv's own key
    assert asvconf.launch_method({"repo": "x"}, "linux") == "spawn"  # neither: asv's auto, which is spawn


def test_a_launch_method_asv_does_not_know_is_refused_in_one_line():
    with pytest.raises(factor.FactorError, match="launch method 'fork' for linux: asv knows spawn and forkserver"):
        asvconf.launch_method({"launch_method_by_platform": {"linux": "fork"}}, "linux")


def test_a_derived_config_carries_this_platforms_launch_method(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    path = asvconf.derived(tmp_path, tmp_path / "timeline", ["release"])
    assert json.loads(path.read_text())["launch_method"] == "spawn"


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_the_command_the_scripts_ask_prints_what_the_config_gives_this_platform(tmp_path, method):
    """scripts/bench passes asv what ``python -m mpsbench.results.asvconf launch-method`` prints: the config decides."""
    config = tmp_path / "asv.conf.json"
    other = "forkserver" if method == "spawn" else "spawn"
    config.write_text(json.dumps({**CONF, "launch_method": other, "launch_method_by_platform": {sys.platform: method}}))
    done = subprocess.run([sys.executable, "-m", "mpsbench.results.asvconf", "launch-method", str(config)],
                          capture_output=True, text=True, check=True)
    assert done.stdout == method + "\n"

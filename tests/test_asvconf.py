"""asv.conf.json, read once and checked field by field; the launch method from one per-platform table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mpsbench.core import asvconf
from mpsbench.core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
CONF = asvconf.load(ROOT / "asv.conf.json")


def test_macos_gets_spawn_linux_forkserver_and_a_plain_asv_run_spawn(tmp_path):
    assert CONF.raw["launch_method"] == "spawn"  # what asv itself reads: safe on every platform
    assert CONF.launch_method("darwin") == "spawn"
    assert CONF.launch_method("linux") == "forkserver"
    assert CONF.launch_method("win32") == "spawn"  # no entry: asv's own key
    (tmp_path / "asv.conf.json").write_text('{"repo": "x"}')
    assert (
        asvconf.load(tmp_path / "asv.conf.json").launch_method("linux") == "spawn"
    )  # neither: asv's auto, spawn


def test_the_folders_resolve_from_the_configs_own_folder():
    assert CONF.results == ROOT / ".asv" / "results" and CONF.benchmarks == ROOT / "benchmarks"
    assert CONF.repo == ROOT / ".asv" / "timeline" and CONF.html == ROOT / ".asv" / "html"
    assert CONF.thresholds == {".*": 0.05}


@pytest.mark.parametrize(
    "fields, said",
    [
        (
            {"launch_method_by_platform": {"linux": "fork"}},
            r"launch_method_by_platform\['linux'\] is 'fork': asv knows spawn",
        ),
        (
            {"regressions_thresholds": {".*": -0.1}},
            r"regressions_thresholds\['\.\*'\] must be a fraction >= 0, got -0.1",
        ),
        (
            {"regressions_thresholds": {"(": 0.1}},
            r"regressions_thresholds has a key '\(' that is no regex",
        ),
        (
            {"regressions_thresholds": [0.05]},
            "regressions_thresholds must be an object of regexes to fractions",
        ),
        ({"branches": "release"}, "branches must be a list of branch names, got 'release'"),
        ({"results_dir": 3}, "results_dir must be a path, got 3"),
    ],
)
def test_a_field_mpsbench_cannot_use_is_one_line_naming_it_and_its_value(tmp_path, fields, said):
    (tmp_path / "asv.conf.json").write_text(json.dumps(fields))
    with pytest.raises(UserError, match=said):
        asvconf.load(tmp_path / "asv.conf.json")


@pytest.mark.parametrize(
    "text, said",
    [(None, "cannot read"), ("{", "is not valid JSON"), ("[1]", "must hold a JSON object")],
)
def test_a_missing_or_broken_config_is_one_line(tmp_path, text, said):
    if text is not None:
        (tmp_path / "asv.conf.json").write_text(text)
    with pytest.raises(UserError, match=said):
        asvconf.load(tmp_path / "asv.conf.json")


def test_a_derived_config_carries_this_platforms_launch_method_and_folders_of_its_own(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(sys, "platform", "darwin")
    path = CONF.derive(tmp_path, tmp_path / "timeline", ["release"])
    derived = json.loads(path.read_text())
    assert derived["launch_method"] == "spawn" and derived["branches"] == ["release"]
    assert derived["results_dir"] == str(tmp_path / "results") and derived["benchmark_dir"] == str(
        ROOT / "benchmarks"
    )
    assert all(
        "{conf_dir}" not in command for command in derived["install_command"]
    )  # still this checkout's installer
    scratch = json.loads(CONF.scratch(tmp_path / "scratch").read_text())
    assert scratch["results_dir"] == str(tmp_path / "scratch" / "results") and scratch[
        "env_dir"
    ] == str(ROOT / ".asv/env")


def test_a_record_runs_scratch_config_of_a_config_without_repo_is_refused_in_one_line(tmp_path):
    (tmp_path / "asv.conf.json").write_text('{"results_dir": "results"}')
    conf = asvconf.load(tmp_path / "asv.conf.json")
    with pytest.raises(
        UserError,
        match=r"asv.conf.json: repo is missing: it must name the timeline asv walks",
    ):
        conf.scratch(tmp_path / "scratch")
    assert not (tmp_path / "scratch").exists()  # nothing written, least of all a repo named "None"
    assert json.loads(CONF.scratch(tmp_path / "ours").read_text())["repo"] == str(
        ROOT / ".asv" / "timeline"
    )

"""The fleet's torch-free commands in a real virtualenv without torch: help, resolve, merge, publish (Node off PATH).

A copy of the checkout gets its own ``.venv`` (``python -m venv``) holding the
suite installed with ``--no-deps`` and requirements/torch-free.txt (every file
checked by sha256), and no torch, as the nightly's hosted resolve and publish jobs have. The wheels come from a
folder that this test fills with pip's own download (pip's cache serves it
offline). Publishing runs ``scripts/publish`` itself over the recorded cpu
results of docs/evidence/recorded-cpu-run.md (tests/data/recorded), with every folder holding node or npm taken off PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests import asvresults
from tests.test_nightly import resolve_arguments

from mpsbench.builds import manifest as mf
from mpsbench.site import site_assets

ROOT = Path(__file__).resolve().parents[1]
RESULTS = asvresults.RECORDED / "cpu-2026-11-23"
MACHINE = "debian-x86-64-2cpu"  # the machine those results were recorded under
COPIED = ("src", "scripts", "benchmarks", "builds", "asv.conf.json", "pyproject.toml", "README.md")


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout + done.stderr


NODE = ("node", "nodejs", "npm", "npx", "corepack")


def without_node(scratch: Path) -> dict[str, str]:
    """This environment with Node.js gone from PATH: a folder holding node is replaced by links to the rest of it."""
    folders = []
    for number, folder in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not any((Path(folder) / tool).exists() for tool in NODE):
            folders.append(folder)
            continue
        stand_in = scratch / f"path-{number}"
        stand_in.mkdir(parents=True)
        for entry in Path(folder).iterdir():
            if entry.name not in NODE:
                (stand_in / entry.name).symlink_to(entry)
        folders.append(str(stand_in))
    env = dict(os.environ, PATH=os.pathsep.join(folders))
    assert not any(shutil.which(tool, path=env["PATH"]) for tool in NODE)
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A copy of the checkout whose .venv has the suite and its light dependencies, and no torch."""
    base = tmp_path_factory.mktemp("torch-free")
    clone = base / "clone"
    clone.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, clone / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            shutil.copy2(source, clone / name)
    wheels = base / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    pinned = [
        "--require-hashes",
        "--no-deps",
        "-r",
        str(ROOT / "requirements" / "torch-free.txt"),
    ]  # the jobs' own
    _run([*pip, "download", "--quiet", "--only-binary=:all:", "-d", str(wheels), *pinned], cwd=base)
    _run(
        [
            *pip,
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(clone),
        ],
        cwd=base,
    )
    _run([sys.executable, "-m", "venv", str(clone / ".venv")], cwd=base)
    venv_pip = [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run(
        [*venv_pip, "install", "--quiet", "--no-index", "--find-links", str(wheels), *pinned],
        cwd=base,
    )
    _run(
        [
            *venv_pip,
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--find-links",
            str(wheels),
            "mpsbench",
        ],
        cwd=base,
    )
    absent = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-c", "import torch"], capture_output=True
    )
    assert absent.returncode != 0  # the point: no torch in this environment
    return clone


@pytest.mark.slow
def test_the_cli_help_and_the_registry_need_no_torch(clone):
    bin_dir = clone / ".venv" / "bin"
    assert "preselect" in _run([str(bin_dir / "mpsbench"), "--help"], cwd=clone)
    assert "resnet50" in _run([str(bin_dir / "mpsbench"), "models"], cwd=clone)
    refused = subprocess.run(
        [str(bin_dir / "mpsbench"), "run", "mlp"], cwd=clone, capture_output=True, text=True
    )
    assert refused.returncode != 0 and refused.stderr.startswith(
        "mpsbench: error: this command needs torch, which is not installed here"
    )


@pytest.mark.slow
def test_the_nightly_resolve_step_runs_without_torch(clone, tmp_path):
    args, fleet_manifest = resolve_arguments(tmp_path)
    said = _run([str(clone / ".venv" / "bin" / "mpsbench"), "nightly", *args], cwd=clone)
    assert "added nightly@2026-11-21" in said
    assert mf.load(fleet_manifest).find("nightly@2026-11-21") is not None


@pytest.mark.slow
def test_merge_and_publish_run_without_torch_and_without_node(clone, tmp_path, npm_cache):
    source = RESULTS
    bin_dir = clone / ".venv" / "bin"
    _run(
        [
            str(bin_dir / "mpsbench"),
            "results",
            "merge",
            str(clone / ".asv" / "results"),
            str(source),
        ],
        cwd=clone,
    )
    assert len(list((clone / ".asv" / "results" / MACHINE).glob("*-virtualenv-*.json"))) == 2
    _run(
        [str(bin_dir / "mpsbench"), "timeline", "generate"], cwd=clone
    )  # the hashes asv places results by
    (clone / ".asv").mkdir(exist_ok=True)
    os.symlink(
        npm_cache, clone / site_assets.CACHE
    )  # the run's tarballs, or fetched now over HTTPS
    said = _run([str(clone / "scripts" / "publish")], cwd=clone, env=without_node(tmp_path / "bin"))
    html = clone / ".asv" / "html"
    assert "site written to" in said
    assert (html / "mpsbench" / "summary.html").is_file()
    assert site_assets.external_loads(html) == {}
    assert 'href="mpsbench/summary.html"' in (html / "index.html").read_text()

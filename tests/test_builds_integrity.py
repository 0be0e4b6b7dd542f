"""Adding builds is a transaction: every refusal (a name git refuses, a date ahead, a renamed wheel, a stale ref lock)
is one line, exit 2, and leaves the manifest, the timeline's objects and the wheel store byte for byte; what is
added is pinned at a content-addressed copy in the store; a damaged timeline object is never reported written."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st
from tests import fakes
from tests.test_faults import small_disk

from mpsbench import cli
from mpsbench.builds import install_build, wheels
from mpsbench.builds import manifest as mf
from mpsbench.core import git

GIT = "c3" * 20


def state(*roots: Path) -> str:
    """One hash of every file's path and bytes under ``roots`` (absent ones too): any byte written changes it."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root] if root.exists() else []:
            digest.update(str(path).encode())
            if path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def suite(tmp_path, monkeypatch):
    """An empty manifest, a timeline and a wheel store of the test's own, and an installed torch to add in place."""
    monkeypatch.setenv(install_build.CACHE_ENV, str(tmp_path / "cache"))
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"schema": 1, "channels": []}')
    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "version.py").write_text(f"__version__ = '2.14.1'\ngit_version = '{GIT}'\n")
    return tmp_path


def paths(tmp: Path) -> list[str]:
    return ["--manifest", str(tmp / "manifest.json"), "--timeline", str(tmp / "timeline")]


def everything(tmp: Path) -> str:
    return state(tmp / "manifest.json", tmp / "timeline", tmp / "cache")


def add_existing(tmp: Path, *options: str) -> int:
    return cli.main(["build", "add-existing", str(tmp / "site"), *paths(tmp), *options])


@pytest.mark.parametrize(
    "options, said",
    [
        (["--channel", "a..b"], "channel name 'a..b': expected lower-case letters"),
        (["--channel", "x.lock"], "channel name 'x.lock': expected"),
        (["--channel", "trail."], "channel name 'trail.': expected"),
        (["--channel", "c" * 300], "channel name 'cccc"),
        (["--id", "a..b"], "build id 'a..b': expected"),
        (["--id", "Bad ID!"], "build id 'Bad ID!': expected"),
        (["--id", "v.lock"], "build id 'v.lock': expected"),
        (["--date", "2099-01-01T00:00:00Z"], "--date 2099-01-01T00:00:00Z is in the future"),
        (["--date", "1969-12-31T00:00:00Z"], "date = '1969-12-31T00:00:00Z': expected a UTC date"),
    ],
)
def test_a_name_git_refuses_or_a_date_ahead_is_one_line_and_changes_nothing(
    suite, capsys, options, said
):
    assert add_existing(suite, "--id", "first", "--date", "2026-09-30T00:00:00Z") == 0
    capsys.readouterr()
    before = everything(suite)
    assert add_existing(suite, *options) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err
    assert everything(suite) == before
    assert (
        add_existing(suite, "--id", "second", "--date", "2026-10-01T00:00:00Z") == 0
    )  # not bricked


def test_a_stale_ref_lock_is_refused_before_the_manifest_is_saved(suite, capsys):
    assert add_existing(suite, "--id", "first", "--date", "2026-09-30T00:00:00Z") == 0
    lock = suite / "timeline" / ".git" / "refs" / "heads" / "local.lock"
    lock.write_text("")  # a git process killed while moving the branch
    capsys.readouterr()
    before = everything(suite)
    assert add_existing(suite, "--id", "second", "--date", "2026-10-01T00:00:00Z") == 2
    err = capsys.readouterr().err
    assert f"{lock} exists" in err and err.count("\n") == 1
    assert everything(suite) == before  # no loose object, no manifest byte
    lock.unlink()
    assert add_existing(suite, "--id", "second", "--date", "2026-10-01T00:00:00Z") == 0
    assert cli.main(["timeline", "generate", *paths(suite)]) == 0


def test_a_manifest_with_a_name_git_refuses_is_one_line_where_it_is_read(suite, capsys):
    data = {"schema": 1, "channels": [{"name": "a..b", "builds": []}]}
    (suite / "manifest.json").write_text(json.dumps(data))
    assert cli.main(["timeline", "generate", *paths(suite)]) == 2
    err = capsys.readouterr().err
    assert (
        "channel a..b: name = 'a..b': expected lower-case letters" in err and err.count("\n") == 1
    )


def test_every_name_the_schema_takes_git_takes_too(tmp_path):
    """The schema's rule against git's own: git check-ref-format over names near each rule's edge."""
    git.text(tmp_path, "init", "--quiet")
    for name in (
        "a",
        "a.b",
        "a..b",
        "a.",
        "a.lock",
        "a.lockb",
        "a-",
        "a_",
        "0",
        "a" * 100,
        "a" * 101,
        "a/b",
        "a@{b",
        "a.b.c",
        "x.lock.y",
        "v2.14.1",
    ):
        takes = (
            git.run(tmp_path, "check-ref-format", f"refs/heads/{name}", check=False).returncode == 0
        )
        assert not mf.ref_safe(name) or takes, name


def test_add_url_checks_the_id_before_a_byte_is_downloaded(suite, capsys, monkeypatch):
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("fetched a wheel the command should have refused first")

    monkeypatch.setattr(install_build, "fetch_wheel", never)
    monkeypatch.setattr(wheels, "own_identity", never)
    before = everything(suite)
    url = (
        "https://example.invalid/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl#sha256="
        + "0" * 64
    )
    assert cli.main(["build", "add-url", url, "--id", "Bad ID!", *paths(suite)]) == 2
    err = capsys.readouterr().err
    assert "build id 'Bad ID!': expected" in err and err.count("\n") == 1
    assert everything(suite) == before


@pytest.fixture
def index(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    torch = fakes.make_wheel(
        files, "torch", "2.14.1+cpu", git_version=GIT, built=datetime(2026, 9, 30, 12)
    )
    return fakes.make_index(tmp_path / "simple", [torch]), torch


def add_wheel(tmp: Path, wheel: Path, index: Path, *options: str) -> int:
    return cli.main(
        [
            "build",
            "add-wheel",
            str(wheel),
            "--transformers",
            "none",
            "--transformers-index",
            str(index),
            *paths(tmp),
            *options,
        ]
    )


@pytest.mark.parametrize(
    "renamed, said",
    [
        (
            "torch-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl",
            "its file name says torch 9.9.9 for cp311 on"
            " manylinux_2_28_x86_64, its own metadata torch 2.14.1+cpu for cp311 on manylinux_2_28_x86_64",
        ),
        (
            "torch-2.14.1+cpu-cp311-cp311-macosx_14_0_arm64.whl",
            "its own metadata torch 2.14.1+cpu for cp311 on manylinux_2_28_x86_64",
        ),
        (
            "torchvision-2.14.1+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
            "its file name says torchvision",
        ),
    ],
)
def test_a_renamed_wheel_is_refused_by_its_own_metadata(suite, index, capsys, renamed, said):
    simple, torch = index
    wheel = suite / "mine" / renamed
    wheel.parent.mkdir()
    shutil.copyfile(torch, wheel)
    before = everything(suite)
    assert add_wheel(suite, wheel, simple) == 2
    err = capsys.readouterr().err
    assert said in err and "refusing a renamed wheel" in err and err.count("\n") == 1
    assert everything(suite) == before


def test_add_wheel_pins_a_copy_in_the_store_so_moving_the_wheel_breaks_nothing(
    suite, index, capsys
):
    simple, torch = index
    wheel = suite / "mine" / torch.name
    wheel.parent.mkdir()
    shutil.copyfile(torch, wheel)
    assert add_wheel(suite, wheel, simple, "--id", "mine-1") == 0
    pin = next(
        pin
        for pin in mf.load(suite / "manifest.json").find("local@mine-1").pins["linux-x86_64-cpu"]
    )
    stored = suite / "cache" / "wheels" / pin.sha256 / pin.filename
    assert pin.url == stored.resolve().as_uri() and install_build.sha256_of(stored) == pin.sha256
    wheel.unlink()  # the user moves or deletes the file: the build still installs from the store
    assert install_build.fetch_wheel(vars(pin)) == stored


def test_a_refusal_after_resolving_copies_no_wheel_into_the_store(suite, index, capsys):
    simple, torch = index
    assert (
        add_existing(suite, "--id", "later", "--date", "2026-11-01T00:00:00Z") == 0
    )  # the tip: after the wheel
    before = everything(suite)
    assert add_wheel(suite, torch, simple, "--id", "older") == 2
    assert "is older than later (" in capsys.readouterr().err
    assert everything(suite) == before and not (suite / "cache" / "wheels").exists()


def test_a_damaged_timeline_object_is_refused_not_reported_written(suite, capsys):
    assert add_existing(suite, "--id", "first", "--date", "2026-09-30T00:00:00Z") == 0
    tip = git.text(suite / "timeline", "rev-parse", "local")
    loose = suite / "timeline" / ".git" / "objects" / tip[:2] / tip[2:]
    loose.chmod(
        0o644
    )  # git writes an object only if its file is absent: a damaged one stays, and nothing reads it
    loose.write_bytes(b"damaged")
    capsys.readouterr()
    assert cli.main(["timeline", "generate", *paths(suite)]) == 2
    err = capsys.readouterr().err
    assert (
        "holds a damaged object" in err and err.count("\n") == 1 and "timeline written" not in err
    )


# --- asv's machine file: one lock for it; an OS error is one line naming the path ---------------------------------

FORK = multiprocessing.get_context("fork")
TRIALS = [
    pytest.param(20, id="20-trials"),
    pytest.param(100, id="100-trials", marks=pytest.mark.slow),
]


def at_the_same_moment(target: Any, each: list[tuple[Any, ...]], trial: int) -> None:
    """``target(barrier, *args)`` in a forked process per ``args`` of ``each``, all released at once; each exits 0."""
    barrier = FORK.Barrier(len(each))
    processes = [FORK.Process(target=target, args=(barrier, *args)) for args in each]
    for process in processes:
        process.start()
    for process in processes:
        process.join(300)
        assert process.exitcode == 0, trial


def _name_after(barrier: Any, home: Path, name: str) -> None:
    os.environ["HOME"] = str(home)
    barrier.wait()  # every process writes at the same moment
    with contextlib.redirect_stdout(io.StringIO()):
        sys.exit(cli.main(["machine", "--name", name]))


@pytest.mark.parametrize("at_once", [2, 4])
@pytest.mark.parametrize("trials", TRIALS)
def test_machines_named_at_once_all_land(tmp_path, trials, at_once):
    """Each `mpsbench machine --name` reads the file, adds its entry and writes it back: without one lock for the
    file two at once lost an entry in 15 of 20 trials."""
    names = [f"box-{number}" for number in range(at_once)]
    for trial in range(trials):
        home = tmp_path / str(trial)
        home.mkdir()
        at_the_same_moment(_name_after, [(home, name) for name in names], trial)
        entries = json.loads((home / ".asv-machine.json").read_text())
        assert sorted(key for key in entries if key != "version") == names, trial


def test_a_machine_file_that_is_not_json_is_refused_not_replaced(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".asv-machine.json").write_text(
        '{"other": {"machine": "other"}, '
    )  # cut short by another tool
    before = state(tmp_path)
    assert cli.main(["machine", "--name", "box"]) == 2
    err = capsys.readouterr().err
    assert (
        "is not a JSON object of machines" in err
        and err.count("\n") == 1
        and state(tmp_path) == before
    )


def test_a_file_size_limit_is_one_line_naming_the_machine_file(tmp_path):
    """Under ``ulimit -f`` a write past the limit fails with EFBIG (Python ignores SIGXFSZ): one line, no traceback,
    nothing changed."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps({"version": 1, "old": {"machine": "old"}}))
    before = state(home)
    limited = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40));"
        " from mpsbench import cli; sys.exit(cli.main(['machine', '--name', 'box']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", limited],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )
    assert (
        done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    ), done.stderr
    assert (
        f"{home}/.asv-machine.json: File too large; raise this process's file-size limit"
        in done.stderr
    )
    assert state(home) == before


def test_a_read_only_home_is_one_line_naming_the_machine_file(tmp_path, monkeypatch, capsys):
    with small_disk(tmp_path / "disk") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        monkeypatch.setenv("HOME", str(disk))
        assert cli.main(["machine", "--name", "box"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"mpsbench: error: {disk}/.asv-machine.json: Read-only file system;")
        and err.count("\n") == 1
    )


# --- a generated round over the build commands: no traceback, and a refusal writes no byte -----------------------

SEED = 46
_SAFE = (
    "abcxyz019._-+!@~^{}:/ Z"  # letters git and the schema take, and each character either refuses
)
_NAMES = st.one_of(
    st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True),
    st.text(alphabet=_SAFE, max_size=14),
    st.sampled_from(
        [
            "a..b",
            "x.lock",
            "trail.",
            "c" * 300,
            "local",
            "-x",
            ".x",
            "a/b",
            "",
            "é",
            "a@{b",
            "v" * 101,
        ]
    ),
)
_DATES = st.one_of(
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)).map(
        mf.format_date
    ),
    st.text(alphabet="0123456789-:TZ ", max_size=22),
)
_WHEEL_NAMES = st.one_of(
    st.builds(
        "{}-{}-{}-{}-{}.whl".format,
        st.sampled_from(["torch", "torchvision", "Torch"]),
        st.sampled_from(["2.14.1+cpu", "9.9.9", "2.14.1", "x"]),
        st.sampled_from(["cp311", "cp312", "py3"]),
        st.sampled_from(["cp311", "none"]),
        st.sampled_from(["manylinux_2_28_x86_64", "macosx_14_0_arm64", "any", "win_amd64"]),
    ),
    st.text(alphabet="abtorch-.0123_", max_size=30).map(lambda text: text + ".whl"),
)


def _command(draw: Any, tmp: Path, wheel: Path) -> list[str]:
    """One add-* command line of generated names, ids, channels, dates and wheel file names."""
    kind = draw(st.sampled_from(["existing", "wheel", "url"]))
    options = ["--channel", draw(_NAMES)] if draw(st.booleans()) else []
    options += ["--id", draw(_NAMES)] if draw(st.booleans()) else []
    if kind == "existing":
        options += ["--date", draw(_DATES)] if draw(st.booleans()) else []
        return ["build", "add-existing", str(tmp / "site"), *options]
    named = tmp / "wheels" / draw(_WHEEL_NAMES)
    if "/" not in named.name and draw(
        st.booleans()
    ):  # the fake torch wheel under the generated name
        named.parent.mkdir(exist_ok=True)
        shutil.copyfile(wheel, named)
    tail = ["--transformers", "none", "--transformers-index", str(tmp / "simple"), *options]
    if kind == "wheel":
        return ["build", "add-wheel", str(named), *tail]
    digest = (
        install_build.sha256_of(named)
        if named.is_file()
        else draw(st.sampled_from(["0" * 64, "bad"]))
    )
    return ["build", "add-url", f"{named.as_uri()}#sha256={digest}", *tail]


@pytest.mark.parametrize(
    "examples", [pytest.param(10, id="10"), pytest.param(150, id="150", marks=pytest.mark.slow)]
)
def test_a_generated_round_of_build_commands_has_no_traceback_and_refusals_write_nothing(
    tmp_path_factory, examples
):
    """Every command exits 0 or 2; a refusal is one line and leaves the manifest, the timeline and the store byte for
    byte; after every command the timeline still generates (nothing bricked). Seeded: SEED."""
    outcomes: dict[int, int] = {0: 0, 2: 0}

    @hypothesis.seed(SEED)
    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(st.data())
    def round_(data: Any) -> None:
        tmp = tmp_path_factory.mktemp("round")
        os.environ[install_build.CACHE_ENV] = str(tmp / "cache")
        (tmp / "manifest.json").write_text('{"schema": 1, "channels": []}')
        (tmp / "site" / "torch").mkdir(parents=True)
        (tmp / "site" / "torch" / "version.py").write_text(
            f"__version__ = '2.14.1'\ngit_version = '{GIT}'\n"
        )
        (tmp / "files").mkdir()
        wheel = fakes.make_wheel(
            tmp / "files", "torch", "2.14.1+cpu", git_version=GIT, built=datetime(2026, 9, 30)
        )
        fakes.make_index(tmp / "simple", [wheel])
        assert (
            cli.main(
                [
                    "build",
                    "add-existing",
                    str(tmp / "site"),
                    "--id",
                    "first",
                    "--date",
                    "2026-01-01T00:00:00Z",
                    *paths(tmp),
                ]
            )
            == 0
        )
        for _ in range(data.draw(st.integers(1, 3))):
            argv = [*_command(data.draw, tmp, wheel), *paths(tmp)]
            before = everything(tmp)
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                status = cli.main(argv)
            said = err.getvalue()
            assert status in (0, 2) and "Traceback" not in said, (argv, said)
            outcomes[status] += 1
            if status == 2:
                assert said.count("\n") == 1 and everything(tmp) == before, (argv, said)
            with contextlib.redirect_stdout(io.StringIO()):
                assert cli.main(["timeline", "generate", *paths(tmp)]) == 0, argv

    try:
        round_()
    finally:
        os.environ.pop(install_build.CACHE_ENV, None)
    print(
        f"seed {SEED}: {sum(outcomes.values())} commands, {outcomes[0]} added, {outcomes[2]} refused"
    )
    assert outcomes[0] and outcomes[2]  # the round reached both ends


# --- add-* at the same moment, and killed at any moment -------------------------------------------------------------


def _add_existing_after(barrier: Any, tmp: Path, build_id: str) -> None:
    barrier.wait()  # every process adds at the same moment
    with contextlib.redirect_stdout(io.StringIO()):
        sys.exit(add_existing(tmp, "--id", build_id, "--date", "2026-10-01T00:00:00Z"))


@pytest.mark.parametrize("at_once", [2, 4])
@pytest.mark.parametrize(
    "trials",
    [pytest.param(5, id="5-trials"), pytest.param(100, id="100-trials", marks=pytest.mark.slow)],
)
def test_builds_added_at_once_all_land(suite, trials, at_once):
    ids = [f"b{number}" for number in range(at_once)]
    for trial in range(trials):
        tmp = suite / f"trial-{trial}"
        tmp.mkdir()
        shutil.copy(suite / "manifest.json", tmp / "manifest.json")
        (tmp / "site").symlink_to(suite / "site")
        at_the_same_moment(_add_existing_after, [(tmp, build_id) for build_id in ids], trial)
        channel = mf.load(tmp / "manifest.json").channel("local")
        assert channel is not None and sorted(build.id for build in channel.builds) == ids, trial
        heads = git.text(tmp / "timeline", "for-each-ref", "--format=%(refname)", "refs/heads/")
        commits = git.text(tmp / "timeline", "rev-list", "--count", "local")
        assert heads == "refs/heads/local" and commits == str(at_once), (
            trial
        )  # the timeline holds every build


def added(tmp: Path) -> list[str]:
    channel = mf.load(tmp / "manifest.json").channel("local")
    return [build.id for build in channel.builds] if channel else []


@pytest.mark.slow
def test_add_wheel_killed_at_random_moments_loses_nothing_and_the_next_run_recovers(suite, index):
    """kill -9 of a real `mpsbench build add-wheel` (store copy, pip's resolution, git) at 30 random moments: the
    manifest is the old or the new one, whole; every build added before is there; the timeline regenerates; the
    same command run again adds the build or finds it added."""
    import random
    import signal
    import time

    simple, torch = index
    rng = random.Random(SEED)
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1])}
    kept: list[str] = []
    counts = dict.fromkeys(("killed", "added before the kill", "added by the next run"), 0)
    for trial in range(30):
        build_id = f"k{trial}"
        argv = [
            sys.executable,
            "-c",
            "import sys; from mpsbench import cli; sys.exit(cli.main(sys.argv[1:]))",
            "build",
            "add-wheel",
            str(torch),
            "--transformers",
            "none",
            "--transformers-index",
            str(simple),
            "--id",
            build_id,
            *paths(suite),
        ]
        process = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(rng.uniform(0, 3.0))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            counts["killed"] += 1
        process.wait()
        assert added(suite)[: len(kept)] == kept, trial  # nothing added before is lost
        assert cli.main(["timeline", "generate", *paths(suite)]) == 0, trial
        again = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert again.returncode == 0 or f"already has a build '{build_id}'" in again.stderr, (
            again.stderr
        )
        counts["added by the next run" if again.returncode == 0 else "added before the kill"] += 1
        kept.append(build_id)
        assert added(suite) == kept, trial
    print(f"kill -9 of add-wheel, 30 trials (seed {SEED}): {counts}")
    stored = list((suite / "cache" / "wheels").glob("*/*.whl"))
    assert (
        len(stored) == 1 and install_build.sha256_of(stored[0]) == stored[0].parent.name
    )  # one whole copy

"""The mpsbench command: listings, a quick run, and one-line errors for bad input."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from mpsbench import cli
from mpsbench.builds import install_build, wheels
from mpsbench.context import Suite
from mpsbench.measure import models


def test_models_lists_every_registered_model(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for name in models.NAMES:
        assert name in out


def test_devices_lists_cpu_as_usable(capsys):
    assert cli.main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["cpu", "yes"] for line in lines)
    assert any(line.split()[:1] == ["mps"] for line in lines)


def test_run_prints_a_table_with_ms_per_step_and_samples_per_second(capsys):
    assert cli.main(["run", "mlp", "--batch-size", "8", "--seconds", "0.05"]) == 0
    out = capsys.readouterr().out
    header, _, training, inference = out.splitlines()[:4]
    assert "ms/step" in header and "samples/s" in header
    assert training.split()[:4] == ["training", "mlp", "cpu", "8"]
    assert inference.split()[:4] == ["inference", "mlp", "cpu", "8"]
    assert float(training.split()[4]) > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "alexnet"], "unknown model 'alexnet'; choose one of: mlp, lenet5, resnet50"),
        (["run", "mlp", "--device", "tpu"], "unknown device 'tpu'; choose one of: cpu, mps, cuda"),
        (
            ["run", "mlp", "--batch-size", "3"],
            "batch size 3 is not run for mlp; choose one of: 1, 8, 32",
        ),
        (
            ["run", "mlp", "--batch-size", "big"],
            r"argument --batch-size: --batch-size must be a whole number of at"
            r" least 1, got 'big'",
        ),
        (
            ["run", "mlp", "--kind", "eval"],
            r"argument --kind: invalid choice: 'eval' \(choose from 'training',"
            r" 'inference', 'both'\)",
        ),
        (["run", "mlp", "--device", "mps"], "device mps is not usable here: "),
        # a kind the model lacks, named: refused, not an empty table (--kind both skips it)
        (
            ["run", "bert_base_frozen", "--kind", "inference"],
            "bert_base_frozen differs from its base model in training"
            " only; time its inference as bert_base$",
        ),
        (
            ["run", "clip_text", "--kind", "training"],
            "clip_text is an inference-only model; time its inference$",
        ),
        # where mps is absent (every machine but a Mac), the device that is present is named
        (
            ["run", "resnet50", "--device", "mps"],
            r"device mps is not usable here: .*; usable here: cpu: try --device cpu"
            r" \(mps needs a Mac with Apple silicon\)$",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr_with_status_2(capsys, argv, message):
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert re.match(f"mpsbench: error: {message}", captured.err)
    assert captured.err.count("\n") == 1


def test_a_wheel_that_cannot_be_fetched_is_one_line_with_status_2(capsys, monkeypatch, tmp_path):
    # install_build's InstallError is no UserError (that file imports no mpsbench): main prints it
    url = "https://example.invalid/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
    monkeypatch.setattr(wheels, "own_identity", wheels.parse_wheel_name)  # no network here

    def refused(pin: dict[str, str]) -> Path:
        raise install_build.InstallError(f"{pin['filename']}: cannot download {pin['url']}: 404")

    monkeypatch.setattr(install_build, "fetch_wheel", refused)
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"schema": 1, "channels": []}')
    argv = ["build", "add-url", url, "--sha256", "0" * 64, "--manifest", str(manifest)]
    assert cli.main([*argv, "--timeline", str(tmp_path / "timeline")]) == 2
    said = f"{url.rsplit('/', 1)[1]}: cannot download {url}: 404"
    assert capsys.readouterr().err == f"mpsbench: error: {said}\n"
    assert manifest.read_text() == '{"schema": 1, "channels": []}'  # nothing added


def test_machine_quiet_prints_only_the_name_asv_commands_take(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # asv's machine file lives in the home folder
    assert cli.main(["machine", "--quiet", "--name", "ci-box"]) == 0
    assert capsys.readouterr().out == "ci-box\n"
    assert "ci-box" in (tmp_path / ".asv-machine.json").read_text()


def test_run_help_lists_what_models_lists(capsys):
    assert cli.main(["run", "--help"]) == 0
    listed = " ".join(capsys.readouterr().out.split())  # argparse wraps the list
    assert len(models.REGISTRY) > len(models.NAMES)  # the seeds' six and the newer models
    for name in models.REGISTRY:
        assert re.search(rf"\b{name}\b", listed), name


def test_build_list_names_channels_as_channels(capsys, tmp_path):
    # listing computes the timeline's commits: they go to the test's folder, not the checkout's .asv/timeline
    manifest = Path(__file__).resolve().parents[1] / "builds" / "manifest.json"
    assert (
        cli.main(
            ["build", "list", "--manifest", str(manifest), "--timeline", str(tmp_path / "timeline")]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if not line.startswith(" ")]
    assert headers and all(line.startswith("channel ") for line in headers), headers
    channel = ""
    for line in lines:
        if not line.startswith(" "):
            channel = line.split()[1]
            continue
        ref = line.split()[1]
        assert ref.startswith(f"{channel}@"), line  # an era build reads era@..., whatever its kind
        assert "[" not in line, line


@pytest.mark.parametrize(
    "argv", [["--help"], ["run", "--help"], ["build", "list", "--help"], ["models"]]
)
def test_help_and_parsing_import_no_torch(argv):
    # torch takes seconds to import: a command that only parses or names models must not pay for it
    probe = (
        "import sys; from mpsbench import cli; status = cli.main(sys.argv[1:]);"
        " sys.exit(status or ('torch' in sys.modules and 'torch imported'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _commands(parser, words=()):
    """Every command line that has a --help of its own: mpsbench, each command, each action of build/results/..."""
    yield list(words)
    for action in parser._actions:  # argparse keeps no public list of a parser's subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*words, name))


def test_no_help_text_shows_sphinx_markup(capsys):
    """A module's docstring is its command's --help: written for a terminal, not for Sphinx."""
    markup = re.compile(r"``|:(?:mod|data|func|class|attr|meth|obj):`")
    shown = {}
    for words in _commands(cli.PARSER):
        assert cli.main([*words, "--help"]) == 0
        found = markup.findall(capsys.readouterr().out)
        if found:
            shown[" ".join(words)] = found
    assert shown == {}


def test_publish_says_the_same_default_config_in_both_helps(capsys):
    """cmd_publish reads $MPSBENCH_CONFIG before asv.conf.json: the command list and publish's own --help say so."""
    assert cli.main(["--help"]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert cli.main(["publish", "--help"]) == 0
    own = " ".join(capsys.readouterr().out.split())
    assert "--config defaults to $MPSBENCH_CONFIG, else asv.conf.json" in listed
    assert (
        "--config CONFIG the asv configuration (default $MPSBENCH_CONFIG, else asv.conf.json)"
        in own
    )


def _filled_by_name(func: Any) -> set[str] | None:
    """The options ``func`` takes by name, as cli.filled fills it; None: it reads the Namespace."""
    hints, names = typing.get_type_hints(func), set()
    for name in inspect.signature(func).parameters:
        kind = hints.get(name)
        if kind is argparse.Namespace:
            return None
        if kind is Suite:
            names |= {"config", "manifest", "timeline"}
        elif dataclasses.is_dataclass(kind):
            inner = _filled_by_name(kind)
            if inner is None:
                return None
            names |= inner
        else:
            names.add(name)
    return names


def test_every_option_of_a_command_reaches_a_parameter_of_its_function_by_name():
    """Options are filled into the command's function by name: an option whose dest no parameter
    takes would be parsed and then silently dropped (a renamed parameter with a default keeps it)."""

    def commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Any:
        groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups:
            yield words, parser
        for name, sub in (groups[0].choices if groups else {}).items():
            yield from commands(sub, (*words, name))

    checked = 0
    for words, parser in commands(cli.PARSER):
        taken = _filled_by_name(parser.get_default("func"))
        if taken is None:
            continue
        dests = {action.dest for action in parser._actions if action.dest != "help"}
        assert dests <= taken, (" ".join(words), sorted(dests - taken))
        checked += 1
    assert checked > 20


def test_suite_root_names_the_suite_config(tmp_path):
    def takes(suite: Suite) -> Suite:
        return suite

    compare = ["compare", "a", "b", "-b", "x"]
    default = cli.PARSER.parse_args(compare)
    assert cli.filled(takes, default).config_path == cli.asvconf.ROOT / "asv.conf.json"
    rooted = cli.PARSER.parse_args([*compare, "--suite-root", str(tmp_path)])
    assert cli.filled(takes, rooted).config_path == tmp_path / "asv.conf.json"

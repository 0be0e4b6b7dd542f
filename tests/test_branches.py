"""asv.conf.json's ``branches`` follow the manifest's channels whenever the timeline is written."""

from __future__ import annotations

from mpsbench import cli
from mpsbench.builds import manifest as mf
from mpsbench.core import asvconf

CONFIG = """{
    // the suite's config, comments and all
    "version": 1,
    "repo": ".asv/timeline",
    "branches": ["release"],
    "regressions_thresholds": {".*": 0.05}
}
"""


def build(name: str, day: int) -> mf.Build:
    version = f"2.15.0.dev202611{day:02d}"
    pin = mf.Pin(
        "torch",
        version,
        f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl",
        "https://example.invalid/torch.whl",
        "0" * 64,
    )
    return mf.Build(
        id=name,
        torch_version=version,
        date=f"2026-11-{day:02d}T03:00:00Z",
        git_version=f"{day:x}" * 40,
        kind="nightly",
        pins={"linux-x86_64-cpu": [pin]},
    )


def test_timeline_generate_puts_every_channel_in_branches_and_keeps_the_comments(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(
        tmp_path
    )  # asv reads asv.conf.json from the working directory, as scripts/bench runs it
    (tmp_path / "asv.conf.json").write_text(CONFIG)
    manifest = mf.append(
        mf.append(mf.Manifest(), "release", build("2.15.0", 20)), "exam", build("n1", 21)
    )
    mf.save(manifest, tmp_path / "manifest.json")
    assert cli.main(["timeline", "generate", "--manifest", "manifest.json"]) == 0
    assert "asv.conf.json: branches set to the channels release, exam" in capsys.readouterr().out
    assert asvconf.load(tmp_path / "asv.conf.json").branches == ["release", "exam"]
    assert "// the suite's config, comments and all" in (tmp_path / "asv.conf.json").read_text()
    # in step already: nothing written, nothing said
    assert cli.main(["timeline", "generate", "--manifest", "manifest.json"]) == 0
    assert "branches set" not in capsys.readouterr().out


def test_a_config_that_walks_another_timeline_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "asv.conf.json").write_text(CONFIG)
    mf.save(mf.append(mf.Manifest(), "exam", build("n1", 21)), tmp_path / "manifest.json")
    assert (
        cli.main(["timeline", "generate", "--manifest", "manifest.json", "--timeline", "elsewhere"])
        == 0
    )
    assert (tmp_path / "asv.conf.json").read_text() == CONFIG


def test_a_branches_entry_that_is_not_a_list_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "asv.conf.json").write_text(
        CONFIG.replace('["release"]', '"release"')
    )  # a bare string, not a list
    mf.save(mf.append(mf.Manifest(), "exam", build("n1", 21)), tmp_path / "manifest.json")
    assert cli.main(["timeline", "generate", "--manifest", "manifest.json"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "mpsbench: error: asv.conf.json: branches must be a list of branch names, got 'release'\n"
    )


def test_a_missing_manifest_is_one_line_and_leaves_the_config_and_the_timeline_as_they_were(
    tmp_path, monkeypatch, capsys
):
    """A mistyped --manifest read as one of no builds: "branches": [] written, every branch of the timeline removed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "asv.conf.json").write_text(CONFIG)
    mf.save(mf.append(mf.Manifest(), "release", build("2.15.0", 20)), tmp_path / "manifest.json")
    assert cli.main(["timeline", "generate", "--manifest", "manifest.json"]) == 0
    config = (tmp_path / "asv.conf.json").read_text()
    heads = tmp_path / ".asv" / "timeline" / ".git" / "refs" / "heads"
    branches = {path.name: path.read_text() for path in heads.iterdir()}
    capsys.readouterr()
    assert cli.main(["timeline", "generate", "--manifest", "/nope.json"]) == 2
    assert capsys.readouterr().err == (
        "mpsbench: error: no manifest /nope.json (the project's is builds/manifest.json);"
        ' to start a new one, write {"schema": 1, "channels": []} to it\n'
    )
    assert (tmp_path / "asv.conf.json").read_text() == config
    assert (
        {path.name: path.read_text() for path in heads.iterdir()}
        == branches
        == {"release": branches["release"]}
    )

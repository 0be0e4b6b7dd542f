"""The MPSBENCH_* settings: only documented spellings, only known devices; anything else is one line, exit 2."""

from __future__ import annotations

import pytest

from mpsbench import cli
from mpsbench.core import settings
from mpsbench.core.errors import UserError
from mpsbench.measure import selection


@pytest.mark.parametrize(
    "value, on",
    [
        ("", False),
        ("0", False),
        ("no", False),
        ("false", False),
        ("OFF", False),
        ("1", True),
        ("yes", True),
        ("True", True),
        (" on ", True),
    ],
)
def test_a_flag_means_what_it_says(monkeypatch, value, on):
    monkeypatch.setenv(settings.FULL, value)
    assert selection.full_sweep() is on


def test_unset_is_off_and_a_spelling_outside_the_documented_ones_is_refused(monkeypatch):
    monkeypatch.delenv(settings.FULL, raising=False)
    assert selection.full_sweep() is False
    monkeypatch.setenv(settings.FULL, "maybe")
    with pytest.raises(
        UserError,
        match=r"^MPSBENCH_FULL='maybe' is neither on \(1, true, yes, on\) nor off"
        r" \(0, false, no, off, or unset\)$",
    ):
        selection.full_sweep()


@pytest.mark.parametrize(
    "value, names",
    [
        ("", None),
        (" ", None),
        ("cuda", ("cuda",)),
        ("mps, cpu", ("mps", "cpu")),
        ("cpu,cpu", ("cpu",)),
    ],
)
def test_a_device_list_names_known_devices_each_once(monkeypatch, value, names):
    monkeypatch.setenv(settings.DEVICES, value)
    assert selection.selected_devices() == names


@pytest.mark.parametrize(
    "value, bad", [(",,,", "''"), ("cpu,", "''"), ("tpu", "'tpu'"), ("CPU", "'CPU'")]
)
def test_a_device_list_with_an_unknown_or_empty_name_is_one_line_naming_it(
    monkeypatch, capsys, value, bad
):
    monkeypatch.setenv(settings.DEVICES, value)
    assert cli.main(["preselect"]) == 2
    assert capsys.readouterr().err == (
        f"mpsbench: error: MPSBENCH_DEVICES={value!r} names {bad}: give a comma-separated"
        " list of cpu, mps, cuda\n"
    )

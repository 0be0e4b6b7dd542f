"""Which manifest platform a torch wheel file serves, by its name."""

from __future__ import annotations

import pytest

from mpsbench.builds import wheels


@pytest.mark.parametrize(("filename", "key"), [
    ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cpu"),
    ("torch-2.13.0+cpu.slow13-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cpu"),  # a patched cpu copy
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cuda"),
    ("torch-2.13.0+cpuish-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cuda"),  # not the cpu label
    ("torch-2.13.0-cp311-none-macosx_11_0_arm64.whl", "macos-arm64"),
])
def test_platform_key(filename, key):
    assert wheels.platform_key(wheels.parse_wheel_name(filename)) == key

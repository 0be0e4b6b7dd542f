"""Which manifest platform a torch wheel file serves, by its name; what a remote torch wheel says of itself."""

from __future__ import annotations

import http.server
import threading
from datetime import datetime, timezone

import pytest
from tests import fakes

from mpsbench.builds import wheels


@pytest.mark.parametrize(
    ("filename", "key"),
    [
        ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cpu"),
        (
            "torch-2.13.0+cpu.slow13-cp311-cp311-manylinux_2_28_x86_64.whl",
            "linux-x86_64-cpu",
        ),  # a patched cpu copy
        ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cuda"),
        (
            "torch-2.13.0+cpuish-cp311-cp311-manylinux_2_28_x86_64.whl",
            "linux-x86_64-cuda",
        ),  # not the cpu label
        ("torch-2.13.0-cp311-none-macosx_11_0_arm64.whl", "macos-arm64"),
    ],
)
def test_platform_key(filename, key):
    assert wheels.platform_key(wheels.parse_wheel_name(filename)) == key


def test_a_remote_torch_wheel_is_read_by_range_requests_not_downloaded(tmp_path, monkeypatch):
    for proxy in ("http_proxy", "HTTP_PROXY"):  # the server is on this machine
        monkeypatch.delenv(proxy, raising=False)
    wheel = fakes.make_wheel(
        tmp_path, "torch", "2.14.1", git_version="ab" * 20, built=datetime(2026, 9, 30, 12, 58, 32)
    )
    data = wheel.read_bytes()
    ranges: list[tuple[int, int]] = []

    class Ranges(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()

        def do_GET(self) -> None:
            first, last = map(int, self.headers["Range"].removeprefix("bytes=").split("-"))
            ranges.append((first, last))
            self.send_response(206)
            self.send_header("Content-Length", str(last + 1 - first))
            self.end_headers()
            self.wfile.write(data[first : last + 1])

        def log_message(self, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ranges) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            identity = wheels.torch_identity(f"http://127.0.0.1:{server.server_port}/{wheel.name}")
        finally:
            server.shutdown()
    assert (identity.version, identity.git_version) == ("2.14.1", "ab" * 20)
    assert identity.built == datetime(2026, 9, 30, 12, 58, 32, tzinfo=timezone.utc)
    assert (
        0 < sum(last + 1 - first for first, last in ranges) < len(data)
    )  # only the parts zipfile needs

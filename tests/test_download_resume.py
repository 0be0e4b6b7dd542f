"""A wheel download cut mid-file resumes from the byte it reached (HTTP Range), a few times with a pause between, and
what arrives is the file itself; a refusal (404) is one line at once. A real HTTP server on 127.0.0.1 stands in for
the wheel host: it drops the connection part-way, as a flaky network does."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpsbench.builds import install_build

DATA = bytes(range(256)) * 4096  # 1 MiB: several reads of the download loop


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Serves DATA; the first ``cuts`` responses stop after ``cut`` bytes and close the connection. With
    ``ranges`` off it ignores Range, as some servers do; every request's Range header is noted."""

    cuts = 2
    cut = 300_000
    ranges = True
    seen: list[str | None] = []

    def do_GET(self) -> None:
        if self.path != "/torch.whl":
            self.send_error(404)
            return
        asked = self.headers.get("Range")
        type(self).seen.append(asked)
        start = int(asked.split("=")[1].split("-")[0]) if asked and self.ranges else 0
        body = DATA[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")
        self.end_headers()
        if type(self).cuts > 0:
            type(self).cuts -= 1
            self.wfile.write(body[: self.cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Flaky]]:
    handler = type("Handler", (_Flaky,), {"seen": [], "cuts": 2, "ranges": True})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(install_build, "DOWNLOAD_BACKOFF", 0.0)
    handler.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_download_cut_twice_resumes_where_it_stopped_and_arrives_whole(server, tmp_path, capsys):
    target = install_build._download(f"{server.url}/torch.whl", tmp_path / "torch.whl")
    assert hashlib.sha256(target.read_bytes()).hexdigest() == hashlib.sha256(DATA).hexdigest()
    assert server.seen == [
        None,
        f"bytes={_Flaky.cut}-",
        f"bytes={2 * _Flaky.cut}-",
    ]  # each from where the last cut
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and all("attempt" in line and "torch.whl" in line for line in said)


def test_a_server_that_ignores_the_range_gets_the_whole_file_again(server, tmp_path, monkeypatch):
    server.ranges, server.cuts = False, 1
    monkeypatch.setattr(install_build, "DOWNLOAD_TRIES", 3)
    target = install_build._download(f"{server.url}/torch.whl", tmp_path / "torch.whl")
    assert target.read_bytes() == DATA  # not the first part twice


def test_attempts_are_bounded_and_the_last_problem_is_said(server, tmp_path, monkeypatch):
    server.cuts = 10
    monkeypatch.setattr(install_build, "DOWNLOAD_TRIES", 3)
    with pytest.raises(
        install_build.InstallError, match=r"^torch\.whl: cannot download .* after 3 attempts: "
    ):
        install_build._download(f"{server.url}/torch.whl", tmp_path / "torch.whl")
    assert len(server.seen) == 3


def test_a_refused_url_is_not_retried(server, tmp_path):
    with pytest.raises(install_build.InstallError, match="404"):
        install_build._download(f"{server.url}/nothing.whl", tmp_path / "x.whl")
    assert (
        server.seen == []
    )  # the handler answered 404 before noting a wheel request; one request in all


def test_a_resumed_download_still_passes_the_sha256_check_of_the_store(
    server, tmp_path, monkeypatch
):
    """fetch_wheel: the pin's sha256 checks the resumed file before it takes the wheel's name."""
    monkeypatch.setenv(install_build.CACHE_ENV, str(tmp_path / "cache"))
    url = f"{server.url}/torch.whl"
    monkeypatch.setattr(
        install_build, "allowed_url", lambda url: True
    )  # plain http only on 127.0.0.1 here
    monkeypatch.setattr(install_build, "DOWNLOAD_BACKOFF", 0.0)
    pin = {
        "name": "torch-like",
        "filename": "torch_like-1.0-py3-none-any.whl",
        "url": url,
        "sha256": hashlib.sha256(DATA).hexdigest(),
    }
    stored = install_build.fetch_wheel(pin)
    assert stored.read_bytes() == DATA and len(server.seen) == 3
    assert Path(stored).parent.name == pin["sha256"]

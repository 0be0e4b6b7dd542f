"""The published site works offline: real asv results, a real publish, headless Chromium on 127.0.0.1.

One benchmark is run for real into a temporary results directory against a
temporary timeline repository, published, made self-contained, served by
http.server and opened in Debian's Chromium, which is driven through the
DevTools protocol over a pipe (``--remote-debugging-pipe``: no port, no
websocket library). The test then checks what a person would see: the flot
canvas of the benchmark graph exists, the graph's data JSON was fetched, no
script failed, and no request left localhost.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests import fakes
from tests.test_site_assets import local_loads

from mpsbench.core import asvconf
from mpsbench.site import site_assets

ROOT = Path(__file__).resolve().parents[1]
ASV = [sys.executable, "-m", "asv"]
CHROMIUM = Path("/usr/bin/chromium")
BENCHMARK = "benchmark_models.Training.time_step"
SELECTION = r"Training.time_step\('cpu', 'mlp', 1\)"
GRAPH_HASH = f"#{BENCHMARK}?p-device='cpu'&p-model='mlp'&p-batch_size=1"
SCREENSHOT_ENV = "MPSBENCH_SCREENSHOT"  # also copy the screenshot there, to look at it

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package"
    ),
]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, npm_cache: Path) -> Path:
    """A site published from one real asv result, made self-contained."""
    tmp = tmp_path_factory.mktemp("site")
    config = asvconf.load(ROOT / "asv.conf.json").raw
    branch = str(config.get("branches", ["main"])[0])
    timeline = tmp / "timeline"
    timeline.mkdir()
    fakes.git(timeline, "init", "-q", "-b", branch)
    commit = fakes.timeline_commit(
        timeline, "2.0.0", "a" * 40, "2026-01-01T00:00:00Z", channel=branch
    )
    config.update(
        repo=str(timeline),
        branches=[branch],
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(tmp / "results"),
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
    )
    conf = tmp / "asv.conf.json"
    conf.write_text(json.dumps(config))
    env = dict(os.environ, HOME=str(tmp / "home"))
    subprocess.run(
        [*ASV, "machine", "--yes", "--machine", "sitetest"],
        cwd=tmp,
        env=env,
        check=True,
        capture_output=True,
    )
    run = subprocess.run(
        [
            *ASV,
            "run",
            "--config",
            str(conf),
            "--python=same",
            "--quick",
            "--set-commit-hash",
            commit,
            "-b",
            SELECTION,
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    publish = subprocess.run(
        [*ASV, "publish", "--config", str(conf)],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert publish.returncode == 0, publish.stdout + publish.stderr
    site_assets.make_offline(tmp / "html", npm_cache)
    return tmp / "html"


class _LoggingHandler(http.server.SimpleHTTPRequestHandler):
    requested: list[str]

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest's output clean
        pass

    def do_GET(self) -> None:
        self.requested.append(self.path)
        super().do_GET()


@pytest.fixture
def served(published: Path) -> Iterator[tuple[str, list[str]]]:
    """The site on 127.0.0.1, and the paths the server was asked for."""
    requested: list[str] = []
    handler = type("Handler", (_LoggingHandler,), {"requested": requested})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(published))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _high_fd(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, profile: Path) -> None:
        to_chrome_read, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_write = os.pipe()
        # Above 9, so that the shell's "3<&N 4>&M" below never reads an fd it has just replaced.
        to_chrome_read, from_chrome_write = (
            _high_fd(fd) for fd in (to_chrome_read, from_chrome_write)
        )
        # Chromium reads commands on fd 3 and writes replies on fd 4: a shell puts the pipes there.
        command = f'exec "$0" "$@" 3<&{to_chrome_read} 4>&{from_chrome_write}'
        self.process = subprocess.Popen(
            [
                "/bin/bash",
                "-c",
                command,
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--window-size=1280,900",
                "about:blank",
            ],
            pass_fds=(to_chrome_read, from_chrome_write),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_read)
        os.close(from_chrome_write)
        self._reader = os.fdopen(self._from_chrome, "rb")
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the attached page once there is one) and return its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result
            self.events.append(reply)

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def open_page(self) -> None:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime"):
            self.send(f"{domain}.enable")

    def evaluate(self, expression: str) -> Any:
        return self.send("Runtime.evaluate", expression=expression, returnByValue=True)[
            "result"
        ].get("value")

    def wait_for(self, expression: str, seconds: float) -> Any:
        """Poll a JavaScript expression until it is truthy (the page loads data asynchronously).

        It returns as soon as the page is ready: ``seconds`` is only the bound a heavily loaded machine may need.
        """
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        return self.evaluate(expression)

    def close(self) -> None:
        try:
            self.session = ""
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.close()
        os.close(self._to_chrome)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [event["params"] for event in self.events if event.get("method") == method]


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[DevTools]:
    browser = DevTools(tmp_path / "profile")  # a fresh profile: no cache, no state
    try:
        browser.open_page()
        yield browser
    finally:
        browser.close()


def test_a_published_graph_renders_offline_with_every_request_on_localhost(
    published, served, chromium, tmp_path
):
    base, requested = served
    chromium.send("Page.navigate", url=f"{base}/index.html{GRAPH_HASH}")
    plotted = chromium.wait_for(
        "document.querySelectorAll('#graph-display canvas.flot-base').length", 300
    )
    # let the last requests land before reading the log
    chromium.wait_for("document.readyState === 'complete'", 120)
    screenshot = tmp_path / "site.png"
    screenshot.write_bytes(
        base64.b64decode(chromium.send("Page.captureScreenshot", format="png")["data"])
    )
    if os.environ.get(SCREENSHOT_ENV):
        Path(os.environ[SCREENSHOT_ENV]).write_bytes(screenshot.read_bytes())

    location = chromium.evaluate("window.location.pathname")
    assert location == "/index.html", f"the page went to {location}: a library failed to load"
    assert plotted, "no flot canvas in the graph display"
    assert chromium.of("Runtime.exceptionThrown") == []

    urls = [event["request"]["url"] for event in chromium.of("Network.requestWillBeSent")]
    hosts = {
        urlsplit(url).hostname for url in urls if not url.startswith(("data:", "blob:", "about:"))
    }
    assert hosts == {"127.0.0.1"}, urls
    paths = [urlsplit(path).path for path in requested]  # jQuery adds ?_=... to defeat caches
    graph_json = [
        path
        for path in paths
        if path.startswith("/graphs/") and path.endswith(f"/{BENCHMARK}.json")
    ]
    assert graph_json, paths
    answered = [
        (urlsplit(event["response"]["url"]).path, event["response"]["status"])
        for event in chromium.of("Network.responseReceived")
    ]
    assert (graph_json[0], 200) in answered, answered
    # the libraries came from the site itself, each one asked for
    for local in local_loads(published / "index.html"):
        assert "/" + local in paths, f"{local} was never requested"

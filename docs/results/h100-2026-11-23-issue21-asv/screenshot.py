"""Open a page of a published site in headless Chromium and save it whole (this run's figures page).

    .venv/bin/python docs/results/h100-2026-11-23-issue21-asv/screenshot.py HTML_DIR PAGE OUT.png [FROM UNTIL]

PAGE is a path under HTML_DIR (``mpsbench/summary.html``); FROM and UNTIL, the texts of two
headings, keep only the part of the page from the first up to the second. Uses
tests/test_site_browser.py's browsing (its DevTools client and a local http.server); the page
is captured beyond the viewport, so a tall figures page comes out whole.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.test_site_browser import DevTools, browsing


def _top(browser: DevTools, heading: str) -> float:
    return float(browser.evaluate(
        f"[...document.querySelectorAll('h1, h2, h3')].filter(e => e.textContent.trim() === {heading!r})[0]"
        ".getBoundingClientRect().top + window.scrollY"
    ))


def main(html: Path, page: str, out: Path, between: list[str]) -> None:
    with browsing(html) as (browser, base):
        browser.send("Page.navigate", url=f"{base}/{page}")
        browser.wait_for("document.readyState === 'complete' && [...document.images].every(i => i.complete)", 30)
        images = browser.evaluate("[...document.images].map(i => i.naturalWidth > 0)")
        clip = {}
        if between:
            top, bottom = (_top(browser, heading) for heading in between)
            width = browser.evaluate("document.documentElement.scrollWidth")
            clip = {"clip": {"x": 0, "y": top, "width": width, "height": bottom - top, "scale": 1}}
        shot = browser.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, **clip)
        out.write_bytes(base64.b64decode(shot["data"]))
        print(f"{out}: {sum(images)} of {len(images)} images drawn, exceptions {len(browser.of('Runtime.exceptionThrown'))}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4:6])

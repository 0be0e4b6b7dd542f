"""Open the published site in headless Chromium and save a graph's screenshot (the era demo's).

    .venv/bin/python docs/results/era-2026-11-23/screenshot.py HTML_DIR OUT.png 'GRAPH_HASH' [BUTTON...]

Each BUTTON is the text of a panel button to click first (e.g. ``era``: asv draws one branch
until another is selected).

Uses tests/test_site_browser.py's browsing (its DevTools client and a local http.server).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.test_site_browser import browsing


def main(html: Path, out: Path, graph: str, buttons: list[str]) -> None:
    with browsing(html) as (browser, base):
        browser.send("Page.navigate", url=f"{base}/index.html{graph}")
        plotted = browser.wait_for("document.querySelectorAll('#graph-display canvas.flot-base').length", 90)
        browser.wait_for("document.readyState === 'complete'", 10)
        for text in buttons:
            browser.evaluate(
                f"[...document.querySelectorAll('#graphdisplay-navigation a, #graphdisplay-navigation button')]"
                f".filter(e => e.textContent.trim() === {text!r})[0].click()"
            )
            browser.wait_for("false", 3)  # let asv fetch and draw the other graph
        out.write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", format="png")["data"]))
        print(f"{out}: plotted={plotted}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4:])

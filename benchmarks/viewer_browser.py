"""What a run page of 10,000 scenarios costs in the browser: render, scroll and jump.

The page shows 1,000 scenarios at a time (``?page=N``), so each page is a tenth of the run.

The run log of ``benchmarks/viewer.py`` (10,000 scenarios over 20 skills, one trial each, 4
criteria) is written into a fresh folder and served by the viewer on a loopback port in a
thread; a headless chromium (``/usr/bin/chromium`` or ``OPENKATA_CHROMIUM``, the browser the
browser tests drive) opens the run's page. Printed, from the browser's own clocks:

- the page's navigation: the answer's last byte, DOMContentLoaded, load and first
  contentful paint, in ms from the request (the log read anew, then once more kept, then the
  run's 10th page of scenarios);
- scrolling: the page scrolled by 600 px a frame from top to bottom, the time between frames
  (median, 95th percentile, worst) and the share of frames over 50 ms;
- ``j`` (the next failure) pressed 20 times: the worst ms from the key to the next frame.

    python benchmarks/viewer_browser.py                  # 10,000 scenarios
    python benchmarks/viewer_browser.py --scenarios 1000 --output 2000
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import os
import statistics
import tempfile
from typing import Any

from playwright.sync_api import Page, sync_playwright

from benchmarks._common import machine_line
from benchmarks.viewer import serving, write_log
from tests.browser.conftest import CHROMIUM_ARGS

CHROMIUM = os.environ.get("OPENKATA_CHROMIUM", "/usr/bin/chromium")

NAVIGATION = """() => {
  const [entry] = performance.getEntriesByType("navigation");
  const paint = performance.getEntriesByType("paint")
    .find(p => p.name === "first-contentful-paint");
  return {
    response: entry.responseEnd - entry.requestStart,
    dom: entry.domContentLoadedEventEnd - entry.requestStart,
    load: entry.loadEventEnd - entry.requestStart,
    paint: paint ? paint.startTime - entry.requestStart : null,
    rows: document.querySelectorAll("tr.scenario-row").length,
    height: document.documentElement.scrollHeight,
  };
}"""

# Scroll by 600 px each frame from the top to the bottom; the time between frames.
SCROLL = """() => new Promise(done => {
  window.scrollTo(0, 0);
  const gaps = [];
  let last = null;
  function frame(now) {
    if (last !== null) { gaps.push(now - last); }
    last = now;
    const before = window.scrollY;
    window.scrollBy(0, 600);
    if (window.scrollY === before && gaps.length > 0) { done(gaps); return; }
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
})"""

# Press j (the next failure) and wait for the frame after it: ms from the key to that frame.
JUMP = """() => new Promise(done => {
  const started = performance.now();
  document.dispatchEvent(new KeyboardEvent("keydown", {key: "j", bubbles: true}));
  requestAnimationFrame(() => done(performance.now() - started));
})"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=10_000)
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--output", type=int, default=10_000, help="characters of an answer")
    return parser.parse_args()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(page: Page, url: str) -> dict[str, Any]:
    page.goto(url, wait_until="load", timeout=600_000)
    shown: dict[str, Any] = page.evaluate(NAVIGATION)
    gaps: list[float] = page.evaluate(SCROLL)
    jumps = [page.evaluate(JUMP) for _ in range(20)]
    shown.update(
        frames=len(gaps),
        median=statistics.median(gaps),
        p95=percentile(gaps, 0.95),
        worst=max(gaps),
        slow=sum(gap > 50 for gap in gaps) / len(gaps),
        jump=max(jumps),
    )
    return shown


def main() -> None:
    args = parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="openkata-viewer-browser-bench-") as scratch:
        folder = Path(scratch)
        log = write_log(folder, args)
        relative = log.relative_to(folder).as_posix()
        print(f"run log: {args.scenarios:,} scenarios, {log.stat().st_size / 1e6:.0f} MB")
        with serving(folder) as base:
            url = f"{base}/run/{relative}"
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), headless=True
                )
                try:
                    page = browser.new_page(viewport={"width": 1280, "height": 900})
                    opened = [
                        ("first open", url),
                        ("open again", url),
                        ("page 10", f"{url}?page=10"),
                    ]
                    for name, address in opened:
                        shown = measure(page, address)
                        paint = "-" if shown["paint"] is None else f"{shown['paint']:.0f}"
                        print(
                            f"{name:<11} rows {shown['rows']:,}, height {shown['height']:,} px; "
                            f"answer {shown['response']:.0f} ms, DOMContentLoaded "
                            f"{shown['dom']:.0f} ms, load {shown['load']:.0f} ms, first paint "
                            f"{paint} ms"
                        )
                        print(
                            f"{'':<11} scroll: {shown['frames']} frames, median "
                            f"{shown['median']:.1f} ms, p95 {shown['p95']:.1f} ms, worst "
                            f"{shown['worst']:.0f} ms, over 50 ms {shown['slow']:.0%}; "
                            f"j worst {shown['jump']:.0f} ms"
                        )
                finally:
                    browser.close()


if __name__ == "__main__":
    main()

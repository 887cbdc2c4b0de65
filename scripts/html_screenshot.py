"""A screenshot of a run's HTML report, taken in headless chromium: how the README's picture
is made.

    python scripts/html_screenshot.py LOG -o docs/images/html-report.png

renders the page of the run log LOG (as ``python -m pytest_openkata html`` does), opens it in
Debian's chromium (``--chromium``, default ``/usr/bin/chromium``; playwright drives it, no
browser is downloaded) and writes a PNG of a 1280x1600 viewport, or of the whole page with
``--full-page``; ``--expand`` unfolds every section first. The image is written atomically and
never over another file (``-2`` and on), unless ``--replace`` says to replace it, as when the
README's picture is made again. Prints the path written. Needs the test extras
(``pip install -e '.[test]'``) for playwright.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from pytest_openkata.core.runlog import RunLogError, read_run_log
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.providers.reporters.html import render_html

# As the browser tests launch it: no sandbox (containers run as root), no GPU, and nothing
# of chromium's own that goes to the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def screenshot(
    page_file: Path, chromium: Path, *, width: int, height: int, full_page: bool, expand: bool
) -> bytes:
    """The PNG of a page file as headless chromium shows it; any request other than for the
    file itself is refused."""
    from playwright.sync_api import Route, sync_playwright

    own = page_file.resolve().as_uri()

    def only_the_page(route: Route) -> None:
        if route.request.url == own:
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.route("**/*", only_the_page)
            page.goto(own)
            if expand:
                page.click("#expand-all")
            return page.screenshot(full_page=full_page)
        finally:
            browser.close()


def replace_file(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, replacing what is there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=".screenshot-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(name, 0o644)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="a run log (.openkata/runs/*.jsonl)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1600)
    parser.add_argument("--full-page", action="store_true", help="the whole page, not 1600px")
    parser.add_argument("--expand", action="store_true", help="unfold every section first")
    parser.add_argument("--replace", action="store_true", help="replace an existing image")
    args = parser.parse_args(argv)
    try:
        html = render_html(read_run_log(args.log), source=str(args.log))
    except RunLogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.chromium.is_file():
        print(f"error: chromium not found at {args.chromium}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "report.html"
        page_file.write_text(html, encoding="utf-8")
        image = screenshot(
            page_file,
            args.chromium,
            width=args.width,
            height=args.height,
            full_page=args.full_page,
            expand=args.expand,
        )
    output: Path = args.output
    written = replace_file(output, image) if args.replace else write_new_report(output, image)
    print(written)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

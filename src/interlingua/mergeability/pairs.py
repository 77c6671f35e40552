"""The run's ``mergeability:`` section: weight coverage, diagnostics, barriers and the checkpoint arm.

Task kinds (planned in :mod:`interlingua.pipeline.plan`, run by :mod:`interlingua.pipeline.execute`):

``weights`` (one pair of run models, optionally over a base): where each model's
weights are (its folder; a packaged or GGUF model's converted float32 copy,
:func:`interlingua.data.models.gguf_cache.find_converted`; else only the GGUF header),
the coverage table and route (:func:`interlingua.mergeability.comparability.comparability`,
headers only) and, when the two share tensors, the streamed diagnostics
(:func:`interlingua.mergeability.diagnostics.weight_diagnostics`: global cosine,
relative L2, norm ratio; task-vector cosine and TIES sign agreement with a
base). A GGUF model without a converted copy is compared by its header
metadata (width, depth, vocabulary, heads, MLP width): route ``none`` with the
reason, so Gemma 3 270M vs SmolLM2-135M says *why* there is no native route
without loading either.

``barrier`` (one pair): the loss barrier (:func:`interlingua.mergeability.barrier.loss_barrier`)
on the run's corpus sides; pairs that cannot be interpolated get a row with
the refusal in ``note``.

Assembly (:func:`mergeability_tables`): ``coverage.csv``, ``mergeability.csv``
(one row per pair; CKA at the last layer from the run's results for the same
pair; the checkpoint arm's steps and ``log10(step_b / step_a)``),
``barriers.csv`` (per pair x language), ``barrier_curves.csv`` and
``checkpoint_correlations.csv`` (diagnostic x diagnostic Spearman over the
arm's pairs, permutation p, Benjamini-Hochberg q across the table, and a
redundancy flag for |rho| above ``mergeability.redundant``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interlingua.core.schema import last_layer_rows, result_table
from interlingua.core.store import Store, json_safe
from interlingua.data.models.spec import ModelSpec
from interlingua.mergeability.columns import (
    BARRIER_COLUMNS,
    BARRIER_CURVE_COLUMNS,
    CHECKPOINT_CORRELATION_COLUMNS,
    COVERAGE_COLUMNS,
    MERGEABILITY_COLUMNS,
)
from interlingua.mergeability.config import MergeabilitySpec

__all__ = [
    "DIAGNOSTICS",
    "gguf_header_facts",
    "locate_weights",
    "mergeability_tables",
    "run_barrier_pair",
    "run_weights_pair",
]

#: The per-pair values correlated across the checkpoint arm (those with any variation are kept).
DIAGNOSTICS = (
    "cosine",
    "rel_l2",
    "norm_ratio",
    "tv_cosine",
    "ties_sign_agreement",
    "barrier",
    "best_gain",
    "cka_last",
    "log10_step_ratio",
)


# ---------------------------------------------------------------------------- where the weights are
def locate_weights(spec: ModelSpec, store: Store) -> tuple[Any, str, Path | None]:
    """(a checkpoint reference or None, where it came from, the GGUF file when only a header is at hand)."""
    from interlingua.data.models.source import resolve_source

    source = resolve_source(spec, store.folder("models"), assemble=True)
    folder = Path(source.location)
    if source.kind == "hub":
        try:
            from huggingface_hub import snapshot_download

            folder = Path(
                snapshot_download(
                    source.location, revision=spec.revision, allow_patterns=["*.json", "*.safetensors", "tokenizer*"]
                )
            )
        except Exception as exc:  # offline or unknown: coverage says so
            return None, f"hub download failed ({type(exc).__name__}: {exc})", None
    if source.gguf_file is not None:
        from interlingua.data.models.gguf_cache import find_converted
        from interlingua.data.models.loading import _weights_sha256

        sha = _weights_sha256(source)
        converted = find_converted(sha, store.folder("models")) if sha else None
        if converted is not None:
            return str(converted), "converted", None
        return None, "gguf-header", folder / source.gguf_file
    if spec.adapter is not None:
        return (str(folder), str(Path(spec.adapter).expanduser())), "folder+adapter", None
    return str(folder), "folder", None


def gguf_header_facts(path: str | Path) -> dict[str, Any]:
    """Architecture facts from a GGUF file's metadata (the header only; no tensor data)."""
    from interlingua.data.models.gguf import read_gguf_header

    try:
        header = read_gguf_header(path)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    meta, names = header.metadata, header.tensors
    arch = str(meta.get("general.architecture", "unknown"))

    def get(key: str) -> Any:
        v = meta.get(f"{arch}.{key}")
        return v[2] if isinstance(v, tuple) else v  # a per-layer array: its length is no fact; keep the count

    tokens = meta.get("tokenizer.ggml.tokens")
    width, heads = get("embedding_length"), get("attention.head_count")
    head_dim = get("attention.key_length") or (width // heads if width and heads else None)
    return {
        "model_type": arch,
        "hidden": width,
        "layers": get("block_count"),
        "heads": heads,
        "kv_heads": get("attention.head_count_kv"),
        "head_dim": head_dim,
        "ffn": get("feed_forward_length"),
        "vocab": tokens[2] if isinstance(tokens, tuple) else None,
        "tied": "output.weight" not in names,
        "n_tensors": len(names),
    }


def facts_difference(fa: dict[str, Any], fb: dict[str, Any]) -> str:
    """The architecture facts on which A and B differ, with the numbers ("hidden width A 640, B 576; ...")."""
    why = [f"{what} A {fa.get(key)}, B {fb.get(key)}" for key, _, what in _FACT_REASONS if fa.get(key) != fb.get(key)]
    if fa.get("model_type") != fb.get("model_type"):
        why.insert(0, f"families differ ({fa.get('model_type')} vs {fb.get('model_type')})")
    return "; ".join(why)


def _facts_of(ckpt_ref: Any, gguf: Path | None) -> dict[str, Any]:
    if gguf is not None:
        return gguf_header_facts(gguf)
    from interlingua.mergeability.comparability import _facts, _map_all, read_checkpoint

    ck = read_checkpoint(ckpt_ref)
    return _facts(ck, _map_all(ck)).to_dict()


_FACT_REASONS = (
    ("hidden", "width_differs", "hidden width"),
    ("layers", "depth_differs", "blocks"),
    ("vocab", "vocab_rows_differ", "vocabulary rows"),
    ("heads", "heads_differ", "attention heads"),
    ("kv_heads", "grouped_query_heads", "key-value heads"),
    ("head_dim", "heads_differ", "head size"),
    ("ffn", "ffn_width_differs", "MLP width"),
)


def header_coverage(fa: dict[str, Any], fb: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """Route, reason and one coverage row per architecture fact, from config / GGUF header facts alone."""
    rows, why = [], []
    for key, code, what in _FACT_REASONS:
        a, b = fa.get(key), fb.get(key)
        same = a == b and a is not None
        detail = f"{what} A {a}, B {b}"
        rows.append(
            {
                "key": f"facts.{key}",
                "part": "facts",
                "layer": -1,
                "status": "shared" if same else "excluded",
                "reason": "" if same else code,
                "detail": "" if same else detail,
            }
        )
        if not same:
            why.append(detail)
    if fa.get("model_type") != fb.get("model_type"):
        why.insert(0, f"families differ ({fa.get('model_type')} vs {fb.get('model_type')})")
    route = "native" if not why else "none"  # header facts alone never establish a tensor-level route
    reason = (
        "header facts agree; convert the GGUF (a run extracting it does) to compare tensors"
        if not why
        else "no tensor-level route from the GGUF header alone; " + "; ".join(why)
    )
    return route, reason, rows


# ---------------------------------------------------------------------------- the runners
def run_weights_pair(
    a: str, b: str, base: str | None, specs: dict[str, ModelSpec], store: Store, *, diagnostics: bool, density: float
) -> dict[str, Any]:
    """Coverage rows and the summary row of one pair (see the module docstring)."""
    from interlingua.mergeability.comparability import comparability
    from interlingua.mergeability.errors import WeightsError

    ra, sa, ga = locate_weights(specs[a], store)
    rb, sb, gb = locate_weights(specs[b], store)
    row: dict[str, Any] = {
        "pair": f"{a}|{b}",
        "model_a": a,
        "model_b": b,
        "base": base or "",
        "source_a": sa,
        "source_b": sb,
    }
    labels = {"pair": row["pair"], "model_a": a, "model_b": b}
    if ra is None or rb is None:
        if ga is None and ra is None or gb is None and rb is None:
            row.update(route="none", reason=f"weights not found: A {sa}, B {sb}")
            return {"row": row, "coverage": []}
        fa, fb = _facts_of(ra, ga), _facts_of(rb, gb)
        route, reason, rows = header_coverage(fa, fb)
        row.update(
            route=route,
            reason=reason,
            shared_tensors=0,
            excluded_tensors=-1,
            shared_share=float("nan"),
            note="GGUF header only: no tensor diagnostics",
        )
        return {"row": json_safe(row), "coverage": [{**labels, "source": "header", **r} for r in rows]}
    cov = comparability(ra, rb)
    t = cov.table
    shared = t["status"] == "shared"
    na, nb = t["numel_a"].clip(lower=0), t["numel_b"].clip(lower=0)
    total = float(na.sum() + nb.sum())
    reason = cov.reason
    if cov.route != "native":
        differ = facts_difference(cov.a.to_dict(), cov.b.to_dict())
        reason = f"{reason} ({differ})" if differ else reason
    row.update(
        route=cov.route,
        reason=reason,
        shared_tensors=int(shared.sum()),
        excluded_tensors=int((~shared).sum()),
        shared_share=float((na[shared].sum() + nb[shared].sum()) / total) if total else float("nan"),
    )
    notes = []
    if diagnostics and shared.any():
        base_ref = None
        if base:
            base_ref, _, gbase = locate_weights(specs[base], store)
            if base_ref is None:
                notes.append(f"base {base} has no safetensors weights: no task-vector diagnostics")
        try:
            g = _diagnostics_global(ra, rb, base_ref, density)
            row.update(g)
        except WeightsError as err:
            notes.append(f"diagnostics: {err}")
    elif diagnostics:
        notes.append("no shared tensor: no diagnostics")
    row["note"] = "; ".join(notes)
    declared = {c.name for c in COVERAGE_COLUMNS}
    coverage = [
        {**labels, "source": "tensors", **{k: v for k, v in r.items() if k in declared}} for r in t.to_dict("records")
    ]
    return {"row": json_safe(row), "coverage": coverage}


def _diagnostics_global(ra: Any, rb: Any, base: Any, density: float) -> dict[str, Any]:
    from interlingua.mergeability.diagnostics import weight_diagnostics

    g = weight_diagnostics(ra, rb, base=base, density=density).global_
    keys = ("cosine", "rel_l2", "rel_l2_sym", "norm_ratio", "tv_cosine", "ties_sign_agreement", "numel")
    out = {k: g[k] for k in keys}
    out["diag_numel"] = int(out.pop("numel"))
    if base is None:
        out["tv_cosine"] = float("nan")
        out["ties_sign_agreement"] = float("nan")
    return out


def run_barrier_pair(
    a: str,
    b: str,
    specs: dict[str, ModelSpec],
    store: Store,
    texts: dict[str, list[str]],
    *,
    grid: list[float],
    max_length: int,
    batch_size: int,
    special_tokens: str,
) -> dict[str, Any]:
    """Barrier summary and curve rows of one pair on the given sides; a refusal is kept as a note."""
    from interlingua.core.errors import InterlinguaError
    from interlingua.mergeability.barrier import loss_barrier
    from interlingua.mergeability.errors import WeightsError

    labels = {"pair": f"{a}|{b}", "model_a": a, "model_b": b}
    ra, sa, _ = locate_weights(specs[a], store)
    rb, sb, _ = locate_weights(specs[b], store)
    if ra is None or rb is None:
        return {"summary": [{**labels, "note": f"no safetensors weights (A {sa}, B {sb})"}], "curve": []}
    try:
        res = loss_barrier(
            ra, rb, texts, ts=grid, max_length=max_length, batch_size=batch_size, special_tokens=special_tokens
        )
    except (WeightsError, InterlinguaError) as err:
        return {"summary": [{**labels, "note": str(err)}], "curve": []}
    summary = [
        json_safe({**labels, "language": r.pop("text"), **r, "note": ""}) for r in res.summary.to_dict("records")
    ]
    curve = [json_safe({**labels, "language": r.pop("text"), **r}) for r in res.curve.to_dict("records")]
    return {"summary": summary, "curve": curve}


# ---------------------------------------------------------------------------- assembly
def _cka_last(results: pd.DataFrame, a: str, b: str) -> float:
    """Mean last-layer matched value of the same-language cross-model pairs of A and B (first pooling, measure)."""
    if results is None or results.empty:
        return float("nan")
    rows = results[
        (results["kind"] == "cross_model")
        & (results["lang_a"] == results["lang_b"])
        & (
            ((results["model_a"] == a) & (results["model_b"] == b))
            | ((results["model_a"] == b) & (results["model_b"] == a))
        )
    ]
    if "grid" in rows:
        rows = rows[~rows["grid"].astype(bool)]
    if rows.empty:
        return float("nan")
    first = rows.iloc[0]
    rows = rows[(rows["pooling"] == first["pooling"]) & (rows["measure"] == first["measure"])]
    last = last_layer_rows(rows)
    return float(last["matched"].mean()) if not last.empty else float("nan")


def mergeability_tables(
    opts: MergeabilitySpec,
    weights: list[dict[str, Any]],
    barriers: list[dict[str, Any]],
    results: pd.DataFrame,
    *,
    seed: int = 0,
) -> dict[str, pd.DataFrame]:
    """``coverage``, ``mergeability``, ``barriers``, ``barrier_curves`` and ``checkpoint_correlations`` frames
    (``opts``: the run's ``mergeability:`` section)."""
    steps = dict(zip(opts.checkpoints.models, opts.checkpoints.steps)) if opts.checkpoints is not None else {}
    arm = set(steps)
    summary_rows = [r for out in barriers for r in out["summary"]]
    barrier_frame = result_table(summary_rows, BARRIER_COLUMNS)
    rows = []
    for out in weights:
        row = dict(out["row"])
        a, b = row["model_a"], row["model_b"]
        mine = barrier_frame[barrier_frame["pair"] == row["pair"]]
        scored = mine[mine["note"] == ""]
        row["barrier"] = float(scored["barrier"].mean()) if not scored.empty else float("nan")
        row["best_gain"] = float(scored["best_gain"].max()) if not scored.empty else float("nan")
        if not mine.empty and scored.empty:
            row["note"] = "; ".join(x for x in (row.get("note") or "", "barrier: " + mine["note"].iat[0]) if x)
        row["cka_last"] = _cka_last(results, a, b)
        row["checkpoint_arm"] = a in arm and b in arm and not row.get("base")
        if row["checkpoint_arm"]:
            row["step_a"], row["step_b"] = steps[a], steps[b]
            row["log10_step_ratio"] = math.log10(steps[b] / steps[a]) if steps[a] > 0 else float("nan")
        rows.append(row)
    table = result_table(rows, MERGEABILITY_COLUMNS)
    out = {
        "coverage": result_table([r for o in weights for r in o["coverage"]], COVERAGE_COLUMNS),
        "mergeability": table,
    }
    if opts.barriers is not None:
        out["barriers"] = barrier_frame
        out["barrier_curves"] = result_table([r for o in barriers for r in o["curve"]], BARRIER_CURVE_COLUMNS)
    if opts.checkpoints is not None:
        out["checkpoint_correlations"] = checkpoint_correlations(
            table[table["checkpoint_arm"]], permutations=opts.permutations, redundant=opts.redundant, seed=seed
        )
    return out


def checkpoint_correlations(frame: pd.DataFrame, *, permutations: int, redundant: float, seed: int) -> pd.DataFrame:
    """Diagnostic x diagnostic Spearman over the arm's pairs (each unordered cell once), BH q across the table."""
    import warnings

    from interlingua.analysis.stats import benjamini_hochberg, correlation_table

    usable = [
        c for c in DIAGNOSTICS if c in frame and frame[c].notna().sum() >= 3 and frame[c].nunique(dropna=True) > 1
    ]
    if len(usable) < 2:
        return result_table([], CHECKPOINT_CORRELATION_COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = correlation_table(
            frame[usable].astype(float),
            usable,
            usable,
            method="spearman",
            permutations=permutations,
            seed=seed,
            bootstrap=0,
            nan_policy="omit",
        )
    order = {c: i for i, c in enumerate(usable)}
    cells = full[[order[c] < order[p] for c, p in zip(full["column"], full["predictor"])]].copy()
    p = cells["p"].to_numpy(dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        q[ok] = benjamini_hochberg(p[ok])
    cells["q"] = q
    cells["redundant"] = cells["rho"].abs() > redundant
    keep = [c.name for c in CHECKPOINT_CORRELATION_COLUMNS]
    return result_table(cells[[c for c in keep if c in cells]].to_dict("records"), CHECKPOINT_CORRELATION_COLUMNS)

"""``validate --offline`` and ``plan --offline``: what can be checked and priced of a config without the Hub.

``interlingua validate`` runs pre-flight, which reads the corpus (FLORES+ is downloaded from the Hub) and
every model's files (``config.json``, tokenizer, weight headers: the Hub again). Where the Hub cannot be
reached those checks cannot run, and pretending they passed would be wrong. ``--offline`` runs every check
that needs no network and says which it skipped:

- the config's keys, values and cross-references (the same :func:`interlingua.pipeline.config.load_spec` as always);
- every Hub id (models, adapters, model-set authors) well-formed (``huggingface_hub``'s own validator),
  every revision a plausible ref, every local path present;
- the corpus: languages known, a FLORES+ split that exists and ``n`` within it;
- the stage checks that need only counts: folds and jackknife groups against ``n``, patching languages,
  URIEL coverage of the predictors, CUDA where a model asks for ``cuda``;
- the plan: its tasks are built from a placeholder corpus of the right size, so every pair, map, patching
  experiment and checkpoint pair the config asks for is enumerated.

``plan --offline`` then prices that plan with the published shapes of :mod:`interlingua.studies.shapes`
(labelled as such) and adds what a GPU machine needs: the download, GPU memory per model, and the time on one
GPU and on a Ray cluster of N GPUs (rough: forward passes at an assumed GPU rate, the analysis on CPUs).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import RunSpec

__all__ = ["GPU_FLOPS", "OfflineCheck", "gpu_cost", "offline_check", "offline_plan_command"]

#: Assumed dense float32 rate of one GPU (an A100's 19.5 TFLOP/s; an H100 is about 3x) and the share a forward
#: pass reaches. The studies' configs load float32 weights; a rough constant, not measured.
GPU_FLOPS = 19.5e12
GPU_EFFICIENCY = 0.35
#: Bytes of a placeholder sentence: FLORES+ devtest averages about 130 characters a sentence in English.
PLACEHOLDER_BYTES = 128
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


@dataclass
class OfflineCheck:
    """What ``--offline`` established: the spec, the placeholder corpus, the plan, and the skipped checks."""

    spec: RunSpec
    corpus: Any
    plan: Any
    hub_models: dict[str, str]  # run model name -> Hub id
    skipped: list[str]


def _is_local(path: str) -> bool:
    return Path(path).expanduser().exists() or path.startswith((".", "/", "~"))


def _check_repo(where: str, repo: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as err:
        raise ConfigError(f"{where}: {repo!r} is not a Hub id ({err}) ; write OWNER/NAME or a local folder") from None
    if "/" not in repo:
        raise ConfigError(f"{where}: {repo!r} has no owner ; Hub ids of the studies are OWNER/NAME")


def _check_model(where: str, m: Any, hub: dict[str, str]) -> None:
    if m.path is not None:
        if _is_local(m.path):
            if not Path(m.path).expanduser().exists():
                raise ConfigError(f"{where}.path: the folder {m.path} does not exist ; give an existing folder")
        else:
            _check_repo(f"{where}.path", m.path)
            hub[m.name or m.label] = m.path
    if m.adapter is not None and not m.adapter.startswith("zoo:") and not _is_local(m.adapter):
        _check_repo(f"{where}.adapter", m.adapter)
    for key in ("revision", "adapter_revision"):
        value = getattr(m, key)
        if value is not None and not _REVISION.match(value):
            raise ConfigError(f"{where}.{key}: {value!r} is not a branch, tag or commit ; fix it")


def placeholder_corpus(spec: RunSpec) -> Any:
    """A corpus of the config's languages and size, every sentence :data:`PLACEHOLDER_BYTES` bytes of text."""
    from interlingua.data.corpora import ParallelCorpus, normalize_language
    from interlingua.data.corpora.flores import FLORES_SPLITS

    languages = [normalize_language(c) for c in spec.corpus.languages]
    size = None
    if spec.corpus.source == "flores":
        split = spec.corpus.split or "devtest"
        if split not in FLORES_SPLITS:
            raise ConfigError(f"corpus.split: FLORES+ has no split {split!r} ; use one of {', '.join(FLORES_SPLITS)}")
        size = FLORES_SPLITS[split]
        if spec.corpus.n is not None and spec.corpus.n > size:
            raise ConfigError(f"corpus.n: {spec.corpus.n} sentences, but FLORES+ {split} has {size} ; lower n")
    n = spec.corpus.n or size
    if n is None:
        raise ConfigError(f"corpus.n: the size of a {spec.corpus.source} corpus is unknown offline ; set corpus.n")
    ids = tuple(f"placeholder-{i}" for i in range(n))
    texts = {lang: tuple("x" * PLACEHOLDER_BYTES for _ in range(n)) for lang in languages}
    return ParallelCorpus(name=f"{spec.corpus.source} (placeholder: {n} sentences)", ids=ids, texts=texts)


def offline_check(spec: RunSpec) -> OfflineCheck:
    """Every check of ``spec`` that needs no network (module docstring); ConfigError for the first that fails."""
    from interlingua.alignment.capability import options as alignment_options
    from interlingua.pipeline.cost import unhashed_fingerprints
    from interlingua.pipeline.plan import build_plan
    from interlingua.pipeline.preflight import check_stages

    hub: dict[str, str] = {}
    for i, m in enumerate(spec.models, start=1):
        _check_model(f"models.{i}", m, hub)
    for i, s in enumerate(spec.model_sets, start=1):
        _check_repo(f"model_sets.{i}.author", f"{s.author}/x")
        if s.adapter_over and not _is_local(s.adapter_over):
            _check_repo(f"model_sets.{i}.adapter_over", s.adapter_over)
    encoder = alignment_options(spec).encoder
    if encoder is not None and not isinstance(encoder, str):
        _check_model("alignment.encoder", encoder, {})
    corpus = placeholder_corpus(spec)
    check_stages(spec, corpus, placeholder=True)  # the placeholder text says nothing of word segmenters
    plan = build_plan(spec, corpus, unhashed_fingerprints(spec))
    skipped = [
        "the corpus text (downloaded from the Hub)" if spec.corpus.source != "local" else "",
        "each model's config.json, tokenizer and weight files, and gated access" if hub else "",
        "word segmenters on the corpus text" if "word_aligned" in spec.pooling else "",
    ]
    unresolved = [s.name for s in spec.model_sets if not s.resolved]
    if unresolved:
        skipped.append(
            f"the model sets {', '.join(unresolved)} (resolved from the Hub when the run starts; "
            "their models are not in the plan)"
        )
    return OfflineCheck(spec, corpus, plan, hub, [s for s in skipped if s])


def _shapes(check: OfflineCheck) -> tuple[dict[str, Any], dict[str, Any]]:
    """Cost shapes of the plan's models from the published table, and the table's entry of each."""
    from interlingua.pipeline.cost import ModelShape
    from interlingua.studies.shapes import published_shape

    shapes, table = {}, {}
    for name, m in check.plan.models.items():
        path = m.path or ""
        pub = published_shape(path)
        if pub is None:
            continue
        table[name] = pub
        shapes[name] = ModelShape(
            pub.layers,
            pub.hidden,
            pub.block_params,
            pub.vocab,
            pub.weight_bytes,
            f"the published-shapes table ({pub.bytes_note})",
        )
    return shapes, table


def gpu_cost(check: OfflineCheck, est: Any, table: dict[str, Any], gpus: list[int]) -> list[str]:
    """Download size, GPU memory per model and the time on 1 and N GPUs (rough; see the module docstring)."""
    spec, plan = check.spec, check.plan
    lines = ["", "GPU machine (rough; shapes from interlingua.studies.shapes, not read from the Hub):"]
    downloads: dict[tuple[str, str], int] = {}
    for name, m in plan.models.items():
        if name in table and m.path:
            downloads[(m.path, m.revision or "main")] = table[name].weight_bytes
    unknown = sorted(n for n in plan.models if n not in table)
    lines.append(
        f"  download: {sum(downloads.values()) / 1e9:.1f} GB of weights ({len(downloads)} repo revisions"
        + (f"; not in the table, so not counted: {', '.join(unknown)}" if unknown else "")
        + ")"
    )
    tokens = spec.max_length if check.corpus is None else min(PLACEHOLDER_BYTES / 4 + 1, spec.max_length)
    seen: set[tuple[str, int, int]] = set()
    lines.append("  GPU memory per model (weights in the config's dtype + hidden states of one batch + logits):")
    for name, m in plan.models.items():
        if name not in table:
            continue
        pub = table[name]
        width = {"float32": 4, "bfloat16": 2, "float16": 2}[m.dtype]
        weights = pub.total_params * width
        states = spec.batch_size * tokens * pub.hidden * (pub.layers + 1) * 4
        logits = spec.batch_size * tokens * pub.vocab * 4
        key = (m.path or "", pub.total_params, width)
        if key in seen:
            continue
        seen.add(key)
        lines.append(
            f"    {m.path}: {(weights + states + logits) * 1.2 / 2**30:.1f} GiB "
            f"({pub.total_params / 1e9:.2f} B parameters x {width} bytes, +20% for the framework)"
        )
    forward = {"model loading/conversion", "extraction", "patching", "fusion", "audits, quality, weights, barriers"}
    cpu_rate = est.rates["float32"] * 0.35  # cost.FORWARD_EFFICIENCY on this machine
    speedup = GPU_FLOPS * GPU_EFFICIENCY / cpu_rate
    # one after another on a GPU: the CPU estimate's concurrent extractions (workers) do not apply there
    fwd = sum(p.seconds + p.overlap for p in est.phases if p.name in forward and p.name != "model loading/conversion")
    load = sum(p.seconds for p in est.phases if p.name == "model loading/conversion")
    analysis = sum(p.seconds for p in est.phases if p.name not in forward)
    extract_models = len({t.model for t in plan.of_kind("extract")}) or 1
    from interlingua.pipeline.cost import _fmt

    one = load + fwd / speedup + analysis
    lines.append(
        f"  one GPU: about {_fmt(one)} (forward passes {_fmt(fwd / speedup)} at an assumed "
        f"{GPU_FLOPS / 1e12:.1f} TFLOP/s x {GPU_EFFICIENCY:.0%}, loading {_fmt(load)}, the analysis on "
        f"this machine's CPUs {_fmt(analysis)})"
    )
    for n in gpus:
        workers = max(1, min(n, extract_models))
        lines.append(
            f"  Ray, {n} GPUs (one node each, CPUs as here): about "
            f"{_fmt(load / workers + fwd / speedup / workers + analysis / n)} (extractions spread over "
            f"{workers} workers, one model per task; comparisons over {n})"
        )
    return lines


def offline_plan_command(
    spec: RunSpec, source: str, *, gpus: list[int] | None = None, show: Callable[[str], Any] = print
) -> int:
    """``interlingua plan CONFIG --offline``: the offline checks, then the plan priced from published shapes."""
    from interlingua.pipeline.cost import estimate, format_plan

    check = offline_check(spec)
    shapes, table = _shapes(check)
    est = estimate(check.plan, {}, None, stored=False, shapes=shapes)
    title = (
        f"{source}: {len(check.plan.models)} models, {len(check.corpus.languages)} languages, "
        f"{len(check.corpus)} sentences (offline: a placeholder corpus of {PLACEHOLDER_BYTES}-byte sentences; "
        "shapes from the published-shapes table)"
    )
    for line in format_plan(est, title=title):
        show(line)
    for line in gpu_cost(check, est, table, gpus or [4, 8]):
        show(line)
    show("skipped offline: " + "; ".join(check.skipped))
    return 0


def offline_validate_command(spec: RunSpec, source: str, *, show: Callable[[str], Any] = print) -> int:
    """``interlingua validate CONFIG --offline``: the checks that need no network, and which were skipped."""
    check = offline_check(spec)
    kinds = ", ".join(f"{v} {k}" for k, v in check.plan.summary().items())
    show(
        f"{source}: valid offline ({len(spec.models)} models, {len(check.hub_models)} from the Hub, "
        f"{len(check.corpus.languages)} languages, {len(check.corpus)} sentences; plan: {kinds})"
    )
    show("not checked offline (they need the Hub): " + "; ".join(check.skipped))
    return 0

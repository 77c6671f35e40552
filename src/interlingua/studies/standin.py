"""Stand-in mode: a study config rehearsed offline, with the same structure, on the project's zoo.

``interlingua run configs/studies/NAME.yaml --stand-in`` swaps every Hub model for a zoo piece (a small
GPT-2 trained from scratch on Bible verses, see :mod:`interlingua.zoo`), the Hub corpus for the packaged
Bible, and Hub model sets for fixed zoo pieces, and leaves everything else as the study has it: the same
model names, the same number of models, languages, checkpoints and adapters, the same sections (pairs,
maps, patching, audit, quality, predictors, mergeability, transport), so the same report sections. Only
sizes shrink (sentences, permutation draws, bootstrap resamples, probe sentences), so the whole pipeline
runs in minutes on CPUs.

Why a transform rather than a twin YAML per study: a twin drifts from its study the first time one of them
is edited; here the stand-in is derived from the real config at run time, and a test checks that every
model and language of every study has a stand-in.

What a stand-in is not: the zoo's models are tiny and trained on a few books, so their numbers say
nothing about the study's question. Where the zoo cannot mirror a property (the Goldfish data tiers are
checkpoints of one run; languages the Bible lacks are replaced by others of a similar script), the
tables below say so.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlingua.core.errors import ConfigError

__all__ = [
    "STAND_INS",
    "StandIn",
    "build_stand_in_families",
    "missing_stand_in_families",
    "stand_in_spec",
    "study_name",
]

#: Books the stand-in families train on; the stand-in corpus reads another (Mark), never trained on.
TRAIN_BOOKS = ("JHN", "LUK")
CORPUS_BOOKS = ["MRK"]
#: Sentences of the stand-in corpus (the studies read 500-1012).
STAND_IN_N = 64


def _family(name: str, languages: tuple[str, ...], **shape: Any) -> Any:
    """A stand-in zoo family: the tiny preset trained on two gospels with a 2000-piece vocabulary (Chinese and
    Japanese need about 1700 characters), with ``shape`` overrides (depth, width, checkpoints)."""
    from interlingua.zoo import preset

    options: dict[str, Any] = dict(
        name=name, languages=languages, books=TRAIN_BOOKS, vocab_size=2000, bilingual_vocab_size=2000, steps=40
    )
    options.update(shape)
    return preset("tiny", **options)


#: The cross-architecture stand-in: four families of different shapes, so the coverage table has blockers
#: (depth, width) as the real five do; English and Chinese share one family, shape and vocabulary size, as
#: the one natively mergeable pair (Pythia x Zh-Pythia) shares an architecture. Twelve English checkpoints
#: stand in for Pythia's twelve `stepN` revisions.
XARCH_CHECKPOINTS = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28, 32)


def _families() -> dict[str, Any]:
    return {
        "study-xarch-neox": _family("study-xarch-neox", ("eng_Latn", "cmn_Hans"), checkpoints=XARCH_CHECKPOINTS),
        "study-xarch-por": _family("study-xarch-por", ("por_Latn",), n_layer=3, n_embd=48, n_head=4, checkpoints=(4,)),
        "study-xarch-pol": _family("study-xarch-pol", ("pol_Latn",), n_layer=4, n_embd=24, n_head=2, checkpoints=(4,)),
        "study-xarch-ita": _family("study-xarch-ita", ("ita_Latn",), n_layer=3, n_embd=32, n_head=4, checkpoints=(4,)),
        "study-goldfish": _family(
            "study-goldfish",
            (
                "eng_Latn",
                "deu_Latn",
                "fra_Latn",
                "spa_Latn",
                "rus_Cyrl",
                "cmn_Hans",
                "jpn_Jpan",
                "arb_Arab",
                "hin_Deva",
            ),
            checkpoints=(4, 8, 16),
        ),
        "study-bilingual": _family(
            "study-bilingual", ("eng_Latn", "spa_Latn", "pol_Latn", "rus_Cyrl", "deu_Latn"), checkpoints=(4,)
        ),
    }


_XARCH_MODELS = {
    "EN_pythia": {"zoo": "study-xarch-neox:eng"},
    "ZH_pythia": {"zoo": "study-xarch-neox:cmn_Hans"},
    "PT_tucano": {"zoo": "study-xarch-por:por"},
    "PL_bielik": {"zoo": "study-xarch-pol:pol"},
    "IT_minerva": {"zoo": "study-xarch-ita:ita"},
}
_PYTHIA_STEPS = (1, 4, 16, 64, 256, 512, 1000, 4000, 8000, 16000, 32000, 64000)
_XARCH_CKPTS = {
    f"EN_pythia-step{real}": {"zoo": f"study-xarch-neox:eng@step{zoo}"}
    for real, zoo in zip(_PYTHIA_STEPS, XARCH_CHECKPOINTS)
}

_GF_LANGS = ("eng", "deu", "fra", "spa", "rus", "zho", "jpn", "arb", "hin")
#: Goldfish data tiers -> checkpoints of one zoo run (less training standing in for less data).
_GF_TIERS = {"1000mb": "final", "100mb": "step16", "10mb": "step8", "5mb": "step4"}
_GF_MODELS = {
    f"gf-{lang}-{tier}": {"zoo": f"study-goldfish:{'cmn_Hans' if lang == 'zho' else lang}@{ckpt}"}
    for lang in _GF_LANGS
    for tier, ckpt in _GF_TIERS.items()
}

#: Bilingual audit: Greek and Dutch are not in the packaged Bible; Russian (another non-Latin script) and
#: German (a close Germanic language) stand in for them.
_BI_LANGS = {"ell_Grek": "rus_Cyrl", "nld_Latn": "deu_Latn"}
_BI_L2 = {"ell": "rus", "spa": "spa", "nld": "deu", "pol": "pol"}
_BI_MODELS = {"gf-eng": {"zoo": "study-bilingual:eng"}}
#: The uploaded repos' design, one merged (identity adapter) and one trained adapter per pair, each read
#: with its pair's bilingual tokenizer: what the model set resolves to on the Hub, in miniature.
_BI_SET = [
    {
        "name": f"en_{l2[:2]}-{arm}",
        "zoo": f"study-bilingual:eng+{zoo}-{piece}",
        "tokenizer": f"zoo:study-bilingual:eng-{zoo}/tokenizer",
    }
    for l2, zoo in _BI_L2.items()
    for arm, piece in (("merged", "lora-identity"), ("trained", "lora"))
]


@dataclass(frozen=True)
class StandIn:
    """How one study is rehearsed: its families, model stand-ins, language swaps and model-set stand-ins."""

    study: str
    families: tuple[str, ...]
    models: Mapping[str, Mapping[str, Any]]
    languages: Mapping[str, str] = field(default_factory=dict)
    model_sets: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    note: str = ""


STAND_INS: dict[str, StandIn] = {
    "crossarch_1b": StandIn(
        "crossarch_1b",
        ("study-xarch-neox", "study-xarch-por", "study-xarch-pol", "study-xarch-ita"),
        {**_XARCH_MODELS, **_XARCH_CKPTS},
        note="five independent zoo runs of four shapes; English checkpoints for Pythia's revisions",
    ),
    "goldfish_convergence": StandIn(
        "goldfish_convergence",
        ("study-goldfish", "study-xarch-neox", "study-xarch-por", "study-xarch-pol", "study-xarch-ita"),
        {**_GF_MODELS, **_XARCH_MODELS},
        note="nine zoo runs; the data tiers are checkpoints of each run; the cross-lab models as in crossarch_1b",
    ),
    "goldfish_bilingual_audit": StandIn(
        "goldfish_bilingual_audit",
        ("study-bilingual",),
        _BI_MODELS,
        _BI_LANGS,
        {"uploaded": _BI_SET},
        note="Greek -> Russian, Dutch -> German; the model set -> 8 zoo adapters (identity and trained per pair)",
    ),
}


def study_name(source: str | Path) -> str:
    """The study a config file is (its file stem), or ConfigError naming the studies that have a stand-in."""
    stem = Path(str(source)).name.removesuffix(".yaml").removesuffix(".yml")
    if stem not in STAND_INS:
        raise ConfigError(
            f"{source}: --stand-in knows the studies {', '.join(sorted(STAND_INS))} (configs/studies/), not "
            f"{stem!r} ; run a study config, or swap the models for zoo pieces in your own config (configs/studies/"
            "README.md)"
        )
    return stem


def _swap_language(code: str, table: Mapping[str, str]) -> str:
    from interlingua.data.corpora import normalize_language

    canonical = normalize_language(code)
    return table.get(canonical, canonical)


def _walk_languages(node: Any, table: Mapping[str, str]) -> Any:
    """Every ``language`` / ``*_language`` value and ``languages`` list under ``node``, swapped by ``table``."""
    if isinstance(node, list):
        return [_walk_languages(v, table) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if (key == "language" or key.endswith("_language")) and isinstance(value, str):
            out[key] = _swap_language(value, table)
        elif key == "languages" and isinstance(value, list):
            out[key] = [_swap_language(v, table) for v in value]
        else:
            out[key] = _walk_languages(value, table)
    return out


#: probe relations whose answers all begin with one token in the zoo's tokenizers (see stand_in_spec)
_UNSCORABLE_RELATIONS = frozenset({"calling_code", "domain"})


def _cap(section: dict[str, Any] | None, key: str, most: int) -> None:
    if isinstance(section, dict) and isinstance(section.get(key), int) and section[key] > most:
        section[key] = most


def stand_in_spec(data: Mapping[str, Any], source: str | Path) -> dict[str, Any]:
    """The stand-in of the study config ``data`` (read from ``source``): the same structure on zoo pieces.

    Models are replaced by name (every model needs a stand-in: ConfigError otherwise), model sets by their
    fixed stand-ins, the corpus by the packaged Bible (Mark, :data:`STAND_IN_N` verses), languages the Bible
    lacks by :attr:`StandIn.languages`; draws, resamples and sentence counts are capped; the output folder
    gets ``-stand-in`` appended. Nothing else changes.
    """
    study = STAND_INS[study_name(source)]
    spec = copy.deepcopy(dict(data))
    models = []
    for entry in spec.get("models") or []:
        name = entry.get("name")
        if name not in study.models:
            raise ConfigError(f"{source}: model {name!r} has no stand-in in interlingua.studies.standin ; add one")
        models.append({"name": name, **study.models[name]})
    for model_set in spec.pop("model_sets", None) or []:
        set_name = model_set.get("name")
        if set_name not in study.model_sets:
            raise ConfigError(f"{source}: model set {set_name!r} has no stand-in ; add one")
        models += [{**e, "name": f"{set_name}/{e['name']}"} for e in study.model_sets[set_name]]
    spec["models"] = models
    spec = _walk_languages(spec, study.languages)
    corpus = spec["corpus"]
    spec["corpus"] = {"source": "bible", "languages": corpus["languages"], "books": CORPUS_BOOKS, "n": STAND_IN_N}
    alignment = spec.get("alignment")
    if isinstance(alignment, dict):
        if isinstance(alignment.get("encoder"), dict):  # a Hub encoder: the run's first model reads for it
            alignment["encoder"] = models[0]["name"]
        alignment["layer"] = 1
        _cap(alignment, "n", 16)
    _cap(spec.get("inference"), "permutations", 50)
    _cap(spec.get("inference"), "grid_permutations", 50)
    _cap(spec.get("inference"), "jackknife_groups", 8)
    _cap(spec.get("inference"), "bootstrap", 50)
    _cap(spec.get("maps"), "bootstrap", 50)
    _cap(spec.get("maps"), "folds", 2)  # held-out halves: the convergence study's 36 four-estimator maps
    for key, most in (("permutations", 200), ("bootstrap", 100)):
        _cap(spec.get("predictors"), key, most)
    _cap(spec.get("mergeability"), "permutations", 200)
    barriers = (spec.get("mergeability") or {}).get("barriers")
    if isinstance(barriers, dict):
        barriers["n"] = min(int(barriers.get("n") or 8), 8)  # 88 pairs x 5 points: the NLLs are the cost
    transport = spec.get("transport")
    if isinstance(transport, dict):
        transport["probe_n"], transport["eval_n"] = 32, 8
        _cap(transport, "top_k", 16)
    patching = spec.get("patching")
    if isinstance(patching, dict):
        patching["layers"] = [min(j, 1) for j in patching.get("layers", [1])]
        patching["pairs"] = 12
        # the zoo's SentencePiece tokenizers, trained on Bible verses, begin every calling code and internet
        # domain with one same piece, so no pair of countries differs there: not scorable on a stand-in
        if patching.get("relations"):
            patching["relations"] = [r for r in patching["relations"] if r not in _UNSCORABLE_RELATIONS] or ["capital"]
        for exp in patching.get("experiments") or []:
            if exp.get("layers"):
                exp["layers"] = [min(j, 1) for j in exp["layers"]]
    spec["max_length"] = min(int(spec.get("max_length", 96)), 96)
    spec["output"] = str(spec.get("output", study.study)).rstrip("/") + "-stand-in"
    return spec


def build_stand_in_families(study: str, root: str | Path | None, log: Callable[[str], None] | None = None) -> None:
    """Build (or verify) the zoo families ``study``'s stand-in reads, under the store ``root``."""
    from interlingua.zoo import build_zoo

    families = _families()
    for name in STAND_INS[study].families:
        build_zoo(families[name], root=root, log=log)


def missing_stand_in_families(study: str, root: str | Path | None) -> list[str]:
    """The zoo families ``study``'s stand-in reads that are not built under the store ``root`` (read-only: what
    ``validate --stand-in`` reports instead of training them), each as ``name (languages, checkpoints)``."""
    from interlingua.zoo.build import KEY_LENGTH, family_key, zoo_root
    from interlingua.zoo.data import load_zoo_data

    families = _families()
    missing = []
    for name in STAND_INS[study].families:
        config = families[name]
        folder = zoo_root(root) / family_key(config, load_zoo_data(config))[:KEY_LENGTH]
        if not (folder / "manifest.json").is_file():
            missing.append(f"{name} ({len(config.languages)} languages, {len(config.checkpoints)} checkpoints each)")
    return missing

"""Alignment error rate (Och & Ney, 2003) and the packaged hand-checked sample.

``AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)`` for predicted links ``A``,
sure links ``S`` and possible links ``P`` (``P ⊇ S``: the sure links are always
added to ``P``). Corpus AER sums the four counts over sentences before
dividing (the usual definition), not the per-sentence rates.

The sample (``data/eng_deu_bible_hand.json``) is a small English-German set
made by hand for this project: NOT a standard gold alignment; see its
``description``. Rerun the measurement::

    python -m interlingua.alignment --package gemma3-270m --layers 0,3,6,9,12,15,18
    python -m interlingua.alignment --package smollm2-135m --layers 0,5,10,15,20,25,30
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from interlingua.alignment.words import AlignmentError, Word, segment

if TYPE_CHECKING:
    from interlingua.alignment.simalign import AlignOptions

__all__ = ["AERCounts", "GoldPair", "aer", "aer_counts", "corpus_aer", "evaluate", "load_gold_sample", "parse_links"]

GOLD_SAMPLE = "eng_deu_bible_hand.json"
Link = tuple[int, int]


@dataclass(frozen=True)
class AERCounts:
    """``|A|``, ``|S|``, ``|A ∩ S|``, ``|A ∩ P|`` (summable over sentences)."""

    n_predicted: int
    n_sure: int
    hits_sure: int
    hits_possible: int

    def __add__(self, other: AERCounts) -> AERCounts:
        return AERCounts(
            self.n_predicted + other.n_predicted,
            self.n_sure + other.n_sure,
            self.hits_sure + other.hits_sure,
            self.hits_possible + other.hits_possible,
        )

    @property
    def aer(self) -> float:
        denom = self.n_predicted + self.n_sure
        if denom == 0:
            raise AlignmentError("AER is undefined when both the prediction and the sure links are empty")
        return 1.0 - (self.hits_sure + self.hits_possible) / denom

    @property
    def precision(self) -> float:
        """``|A ∩ P| / |A|`` (nan for an empty prediction)."""
        return self.hits_possible / self.n_predicted if self.n_predicted else float("nan")

    @property
    def recall(self) -> float:
        """``|A ∩ S| / |S|`` (nan without sure links)."""
        return self.hits_sure / self.n_sure if self.n_sure else float("nan")


def _links(x: Iterable[Any], name: str) -> set[Link]:
    try:
        return {(int(a), int(b)) for a, b in x}
    except (TypeError, ValueError) as exc:
        raise AlignmentError(f"{name} must be pairs (i, j) of word indices: {exc}") from exc


def aer_counts(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] = ()) -> AERCounts:
    """The four counts of one sentence; ``possible`` is united with ``sure``."""
    a = _links(predicted, "predicted")
    s = _links(sure, "sure")
    p = _links(possible, "possible") | s
    return AERCounts(len(a), len(s), len(a & s), len(a & p))


def aer(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] = ()) -> float:
    """``1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)`` of one sentence (P includes S)."""
    return aer_counts(predicted, sure, possible).aer


def corpus_aer(
    predicted: Sequence[Iterable[Link]],
    sure: Sequence[Iterable[Link]],
    possible: Sequence[Iterable[Link]] | None = None,
) -> AERCounts:
    """Counts summed over sentences (read ``.aer``, ``.precision``, ``.recall``)."""
    if len(predicted) != len(sure) or (possible is not None and len(possible) != len(sure)):
        raise AlignmentError("predicted, sure and possible need one entry per sentence")
    if len(sure) == 0:
        raise AlignmentError("no sentences to score")
    total = AERCounts(0, 0, 0, 0)
    for k in range(len(sure)):
        total = total + aer_counts(predicted[k], sure[k], () if possible is None else possible[k])
    return total


def parse_links(text: str) -> set[Link]:
    """``"0-1 2-3"`` -> ``{(0, 1), (2, 3)}`` (Pharaoh format)."""
    out: set[Link] = set()
    for item in text.split():
        a, sep, b = item.partition("-")
        if not sep or not a.isdigit() or not b.isdigit():
            raise AlignmentError(f"bad link {item!r}; write i-j with word indices")
        out.add((int(a), int(b)))
    return out


@dataclass(frozen=True)
class GoldPair:
    """One hand-aligned sentence pair of the sample."""

    id: str
    text_a: str
    text_b: str
    words_a: tuple[Word, ...]
    words_b: tuple[Word, ...]
    sure: frozenset[Link]
    possible: frozenset[Link]


def load_gold_sample(name: str = GOLD_SAMPLE) -> tuple[dict[str, Any], list[GoldPair]]:
    """The packaged hand-checked sample: (header, pairs). Word spans are recomputed
    with :func:`segment` and checked against the stored word lists."""
    raw = json.loads(resources.files("interlingua.alignment").joinpath("data", name).read_text("utf-8"))
    lang_a, lang_b = raw["source_languages"]
    pairs: list[GoldPair] = []
    for row in raw["pairs"]:
        wa = tuple(segment(row[lang_a], lang_a))
        wb = tuple(segment(row[lang_b], lang_b))
        if [w.text for w in wa] != row["eng_words"] or [w.text for w in wb] != row["deu_words"]:
            raise AlignmentError(f"gold pair {row['id']}: segmentation differs from the stored words")
        sure, possible = parse_links(row["sure"]), parse_links(row["possible"])
        for i, j in sure | possible:
            if not (0 <= i < len(wa) and 0 <= j < len(wb)):
                raise AlignmentError(f"gold pair {row['id']}: link {i}-{j} out of range")
        pairs.append(GoldPair(row["id"], row[lang_a], row[lang_b], wa, wb, frozenset(sure), frozenset(sure | possible)))
    header = {k: v for k, v in raw.items() if k != "pairs"}
    return header, pairs


def evaluate(
    loaded: Any,
    layers: Sequence[int],
    methods: Sequence[str] = ("inter", "itermax"),
    pairs: Sequence[GoldPair] | None = None,
    options: AlignOptions | None = None,
) -> list[dict[str, Any]]:
    """AER, precision and recall of the aligner on the gold sample per layer and method (``options``: the rest
    of the link rule, :class:`~interlingua.alignment.simalign.AlignOptions`; its layer and method are swept)."""
    from dataclasses import replace

    from interlingua.alignment.simalign import AlignOptions, align_states, word_states

    if pairs is None:
        pairs = load_gold_sample()[1]
    opts = AlignOptions() if options is None else options
    words_a = [p.words_a for p in pairs]
    words_b = [p.words_b for p in pairs]
    layers = [int(k) for k in layers]
    states_a = word_states(loaded, [p.text_a for p in pairs], words_a, layers)
    states_b = word_states(loaded, [p.text_b for p in pairs], words_b, layers)
    rows: list[dict[str, Any]] = []
    for li, layer in enumerate(layers):
        for method in methods:
            got = align_states(
                states_a, states_b, words_a, words_b, layer_index=li, options=replace(opts, method=method)
            )
            c = corpus_aer([g.links for g in got], [p.sure for p in pairs], [p.possible for p in pairs])
            rows.append(
                {
                    "layer": layer,
                    "method": method,
                    "aer": round(c.aer, 4),
                    "precision": round(c.precision, 4),
                    "recall": round(c.recall, 4),
                    "n_predicted": c.n_predicted,
                    "n_sure": c.n_sure,
                }
            )
    return rows


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    from interlingua.data.models import ModelSpec, load_model

    ap = argparse.ArgumentParser(description="AER of the word aligner on the hand-checked eng-deu sample")
    ap.add_argument("--package", help="packaged model (gemma3-270m, smollm2-135m)")
    ap.add_argument("--path", help="save_pretrained folder or Hub id (instead of --package)")
    ap.add_argument("--layers", default="", help="comma-separated hidden states (default: every layer)")
    ap.add_argument("--methods", default="inter,itermax,match")
    ap.add_argument("--distortion", type=float, default=0.0)
    args = ap.parse_args(argv)
    spec = ModelSpec(package=args.package) if args.package else ModelSpec(path=args.path)
    loaded = load_model(spec)
    layers = [int(x) for x in args.layers.split(",") if x] or list(range(loaded.n_hidden_states))
    header, pairs = load_gold_sample()
    print(f"# {loaded.name}: {len(pairs)} pairs, {sum(len(p.sure) for p in pairs)} sure links")
    print("layer\tmethod\tAER\tprecision\trecall\t|A|")
    from interlingua.alignment.simalign import AlignOptions

    options = AlignOptions(distortion=args.distortion)
    for row in evaluate(loaded, layers, args.methods.split(","), pairs, options):
        print(
            f"{row['layer']}\t{row['method']}\t{row['aer']:.3f}\t{row['precision']:.3f}\t{row['recall']:.3f}\t{row['n_predicted']}"
        )


if __name__ == "__main__":
    _main()

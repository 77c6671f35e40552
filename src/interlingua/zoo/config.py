"""``ZooConfig``: everything that decides what a zoo family contains, and its presets.

A family is a set of small models trained from scratch on Bible verses, one
per language, plus bilingual pieces for every English-L2 pair. Every field
except ``name`` and ``threads`` goes into the family's content key: change one
and a new family is built next to the old one; keep them all and the build is
a no-op. ``name`` only labels the family (the ref ``refs/<name>.json`` points
at its latest build), and ``threads`` only says how many CPU threads the build
may use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlingua.zoo.errors import ZooError

__all__ = ["PRESETS", "TrainSchedule", "ZooConfig", "preset"]


def _tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (str, int)):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class TrainSchedule:
    """How long and how fast :func:`~interlingua.zoo.train.train_loop` trains (AdamW, linear warm-up, cosine decay
    to 10%); a family's are :meth:`ZooConfig.model_schedule` and :meth:`ZooConfig.lora_schedule`."""

    #: optimizer steps
    steps: int
    #: sequences per step
    batch_size: int
    #: peak learning rate
    lr: float
    #: steps of linear warm-up to ``lr``
    warmup: int = 0
    #: AdamW's weight decay on the matrices (biases and norms: none)
    weight_decay: float = 0.0
    #: the gradients' global norm is clipped to this (0: no clipping)
    clip: float = 1.0

    def __post_init__(self) -> None:
        for key in ("steps", "batch_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ZooError(f"training {key} must be a positive integer, got {value!r}")
        if not self.lr > 0:
            raise ZooError(f"the learning rate must be positive, got {self.lr!r}")
        if self.warmup < 0 or self.weight_decay < 0 or self.clip < 0:
            raise ZooError("warmup, weight_decay and clip must be >= 0")


@dataclass(frozen=True)
class ZooConfig:
    """What to train. See :data:`PRESETS` for the prepared sizes.

    Data: ``languages`` (FLORES-style codes; the first one that is
    ``english`` is the base of the bilingual pieces), verses of the offline
    Bible corpus (``versions``, ``books``: see
    :func:`interlingua.data.corpora.load_bible`), ``heldout`` verse ids never
    trained on (the same ids for every language).

    Tokenizers: SentencePiece unigram with ``vocab_size`` pieces per language
    and ``bilingual_vocab_size`` per English-L2 pair.

    Models: GPT-2 with ``n_layer`` blocks of width ``n_embd`` and ``n_head``
    heads, ``max_length`` positions (longer verses are truncated), trained
    for ``steps`` AdamW steps of ``batch_size`` verses at peak learning rate
    ``lr`` (linear warm-up for ``warmup`` steps, cosine decay to 10%).
    Checkpoints are saved after each step in ``checkpoints`` (0 = the
    initialisation) and at the end (``final``).

    Adapters: LoRA of rank ``lora_r`` on ``lora_targets`` of the English
    model, trained for ``lora_steps`` on English + L2 verses.
    """

    name: str = "default"
    languages: tuple[str, ...] = ("eng_Latn", "deu_Latn", "spa_Latn", "rus_Cyrl")
    english: str = "eng_Latn"
    corpus: str = "bible"
    versions: tuple[tuple[str, str], ...] = ()
    books: tuple[str, ...] = ()
    heldout: int = 500
    vocab_size: int = 8000
    bilingual_vocab_size: int = 8000
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    max_length: int = 128
    dropout: float = 0.0
    steps: int = 400
    checkpoints: tuple[int, ...] = (0, 16, 32, 64, 128, 256)
    batch_size: int = 32
    lr: float = 2e-3
    warmup: int = 16
    weight_decay: float = 0.01
    eval_batch_size: int = 64
    lora_r: int = 8
    lora_alpha: int = 16
    lora_targets: tuple[str, ...] = ("c_attn",)
    lora_steps: int = 16
    lora_lr: float = 1e-3
    lora_batch_size: int = 16
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        from interlingua.data.corpora import normalize_language

        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        try:
            languages = tuple(normalize_language(str(code)) for code in _tuple(self.languages))
            english = normalize_language(str(self.english))
        except Exception as exc:  # LanguageError: say which field
            raise ZooError(f"zoo languages: {exc}") from None
        set_("languages", languages)
        set_("english", english)
        versions = self.versions.items() if isinstance(self.versions, Mapping) else self.versions
        set_("versions", tuple(sorted((normalize_language(str(k)), str(v)) for k, v in versions)))
        set_("books", tuple(str(b) for b in _tuple(self.books)))
        set_("checkpoints", tuple(sorted({int(s) for s in _tuple(self.checkpoints)})))
        set_("lora_targets", tuple(str(t) for t in _tuple(self.lora_targets)))
        self._validate()

    def _validate(self) -> None:
        if not self.languages:
            raise ZooError("a zoo family needs at least one language, e.g. languages=['eng_Latn']")
        if len(set(self.languages)) != len(self.languages):
            raise ZooError(f"languages {list(self.languages)} list a language twice; list each once")
        if self.corpus != "bible":
            raise ZooError(f"the zoo trains on the offline Bible corpus only (corpus='bible'), got {self.corpus!r}")
        if not self.name or not all(c.isalnum() or c in "._-" for c in self.name):
            raise ZooError(f"family name {self.name!r} must be letters, digits, '.', '_' or '-'")
        positive = {
            "heldout": self.heldout,
            "vocab_size": self.vocab_size,
            "bilingual_vocab_size": self.bilingual_vocab_size,
            "n_layer": self.n_layer,
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "max_length": self.max_length,
            "steps": self.steps,
            "batch_size": self.batch_size,
            "eval_batch_size": self.eval_batch_size,
            "lora_r": self.lora_r,
            "lora_steps": self.lora_steps,
            "lora_batch_size": self.lora_batch_size,
            "threads": self.threads,
        }
        for key, value in positive.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ZooError(f"zoo config {key} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ZooError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if self.vocab_size < 16 or self.bilingual_vocab_size < 16:
            raise ZooError("vocab_size and bilingual_vocab_size must be at least 16 pieces")
        if self.max_length < 4:
            raise ZooError(f"max_length must be at least 4 tokens, got {self.max_length}")
        bad = [s for s in self.checkpoints if not 0 <= s < self.steps]
        if bad:
            raise ZooError(
                f"checkpoints {bad} are not in 0..steps-1 (steps={self.steps}); the last step is "
                "always saved as 'final'"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ZooError(f"dropout must be in [0, 1), got {self.dropout}")
        if not (self.lr > 0 and self.lora_lr > 0):
            raise ZooError("lr and lora_lr must be positive")
        if self.warmup < 0 or self.weight_decay < 0:
            raise ZooError("warmup and weight_decay must be >= 0")
        if not self.lora_targets:
            raise ZooError("lora_targets must name at least one module, e.g. ['c_attn']")

    # ------------------------------------------------------------------ derived
    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """English-L2 pairs of the bilingual pieces (none without English in ``languages``)."""
        if self.english not in self.languages:
            return ()
        return tuple((self.english, lang) for lang in self.languages if lang != self.english)

    def model_schedule(self) -> TrainSchedule:
        """How each monolingual model is trained (``steps``, ``batch_size``, ``lr``, ``warmup``,
        ``weight_decay``)."""
        return TrainSchedule(
            steps=self.steps,
            batch_size=self.batch_size,
            lr=self.lr,
            warmup=self.warmup,
            weight_decay=self.weight_decay,
        )

    def lora_schedule(self) -> TrainSchedule:
        """How each LoRA adapter is trained (``lora_steps``, ``lora_batch_size``, ``lora_lr``; no warm-up or decay)."""
        return TrainSchedule(steps=self.lora_steps, batch_size=self.lora_batch_size, lr=self.lora_lr)

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """Steps saved as ``step<N>`` folders (the last step is ``final``)."""
        return self.checkpoints

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        data = dataclasses.asdict(self)
        data["versions"] = dict(self.versions)
        return data

    def key_dict(self) -> dict[str, Any]:
        """The fields that decide the family's content (all but ``name`` and ``threads``)."""
        data = self.to_dict()
        data.pop("name")
        data.pop("threads")
        return data

    def replace(self, **changes: Any) -> ZooConfig:
        """A copy with ``changes`` applied (validated like a new config)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ZooError(
                f"unknown zoo config field(s) {unknown}; known: {[f.name for f in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)


#: Prepared sizes. ``tiny``: two languages, the Gospel of John, a 2-block
#: width-32 GPT-2 and 400-piece vocabularies: builds in seconds (the tests).
#: ``default``: four languages, the whole Bible, 4 blocks of width 128, 8000
#: pieces: the whole family in about a quarter of an hour on 2 CPU cores.
#: ``small`` (below): ``tiny`` trained 300 steps.
PRESETS: dict[str, ZooConfig] = {
    "default": ZooConfig(),
    "tiny": ZooConfig(
        name="tiny",
        languages=("eng_Latn", "deu_Latn"),
        books=("JHN",),
        heldout=64,
        vocab_size=400,
        bilingual_vocab_size=400,
        n_layer=2,
        n_embd=32,
        n_head=2,
        max_length=96,
        steps=40,
        checkpoints=(0, 4, 8, 16, 32),
        batch_size=16,
        lr=5e-3,
        warmup=4,
        eval_batch_size=64,
        lora_r=4,
        lora_alpha=8,
        lora_steps=4,
        lora_lr=5e-3,
        lora_batch_size=8,
    ),
}


# "small": the tiny family's data and shapes trained 300 steps instead of 40. At 40 steps the English
# model is weaker than a unigram model of its own tokens, so a tokenizer whose ids merely share a
# frequency order scores far from chance; at 300 a foreign tokenizer sits at chance and a rebuilt
# tokenwise merge is clearly better (the audit demo). About 15 s on 2 cores.
PRESETS["small"] = PRESETS["tiny"].replace(name="small", steps=300, checkpoints=(0, 32))


def preset(which: str, /, **overrides: Any) -> ZooConfig:
    """The preset ``which`` (``tiny``, ``small`` or ``default``) with ``overrides`` (None values skipped) applied.

    The family name stays the preset's unless ``name=`` is among the overrides.
    """
    if which not in PRESETS:
        raise ZooError(f"unknown zoo preset {which!r}; choose one of: {', '.join(PRESETS)}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return PRESETS[which].replace(**overrides) if overrides else PRESETS[which]

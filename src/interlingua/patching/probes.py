"""Factual cloze probes shipped with the package, and where their subject and answer lie in tokens.

The data (``data/probes.json``, built by :mod:`interlingua.patching.data.build_probes`,
whose docstring gives every source and check) holds, per country (ISO 3166-1 alpha-2), its
CLDR name in each language and the answer of each relation in each language, and per relation
one template per language with the placeholder ``{X}``::

    probes = load_probes()
    probes.languages            # ('eng', 'deu', 'spa', 'rus', 'zho', 'jpn')
    probes.relations            # ('capital', 'official_language', 'continent')
    probes.probe("capital", "deu", "FR")
    # Probe(prompt='Die Hauptstadt von Frankreich ist', subject_start=19, subject_end=29, answer='Paris', ...)

Token rules (the same for every model):

* **prompt tokens**: the tokenizer's own encoding (``add_special_tokens=True``); leading special
  tokens it adds (``<bos>``, ``[CLS]``) are kept, trailing ones (``</s>``, ``[SEP]``) are dropped,
  because the model must continue the prompt, not a closed sequence.
* **subject span** (:func:`find_span`): the tokens from the first to the last whose character
  offsets (``return_offsets_mapping``; fast tokenizers only) cover at least one non-space
  character of the subject (so a space-only token between two words of a name is inside). A
  token glued to a neighbour of the name (``法国的`` as one token) is included; ``exact`` then
  says the span spills over the name.
* **answer token** (:func:`answer_token`): the first token the tokenizer gives the answer when it
  follows the prompt (``prompt + answer_prefix + answer``, ``answer_prefix`` a space in
  space-separated languages); if the prompt's tokens are not a prefix of that encoding (a merge
  across the boundary), the first token of ``answer_prefix + answer`` encoded alone.
* **answer tokens** (:func:`answer_tokens`): all of the answer's tokens by the same rule; the
  whole answer is scored by teacher forcing them after the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from interlingua.patching.errors import InterventionError

__all__ = [
    "PLACEHOLDER",
    "Probe",
    "ProbeSet",
    "EncodedPrompt",
    "load_probes",
    "probe_language",
    "render",
    "encode_prompt",
    "find_span",
    "answer_token",
    "answer_tokens",
]

PLACEHOLDER = "{X}"
FORMAT = "interlingua.probes/1"
#: corpus base codes whose probes are filed under another code (Mandarin's prompts are the probes' Chinese, zho)
PROBE_LANGUAGE = {"cmn": "zho"}


def probe_language(code: str) -> str:
    """The probe language of a corpus language code (``deu_Latn`` -> ``deu``, ``cmn_Hans`` -> ``zho``)."""
    base = str(code).split("_")[0]
    return PROBE_LANGUAGE.get(base, base)


@dataclass(frozen=True)
class Probe:
    """One cloze prompt: ``prompt`` mentions ``subject`` at ``[subject_start, subject_end)``."""

    relation: str
    language: str
    country: str
    subject: str
    prompt: str
    subject_start: int
    subject_end: int
    answer: str
    answer_prefix: str

    @property
    def continuation(self) -> str:
        """The text that completes the prompt: ``answer_prefix + answer``."""
        return self.answer_prefix + self.answer


def render(template: str, subject: str) -> tuple[str, int, int]:
    """``(prompt, start, end)``: ``template`` with its one ``{X}`` replaced by ``subject`` at ``[start, end)``."""
    if not isinstance(template, str) or template.count(PLACEHOLDER) != 1:
        raise InterventionError(f"a template needs exactly one {PLACEHOLDER} placeholder; got {template!r}.")
    if not isinstance(subject, str) or not subject.strip():
        raise InterventionError(f"the subject must be a non-empty string; got {subject!r}.")
    head, tail = template.split(PLACEHOLDER)
    if not tail.strip():
        raise InterventionError(
            f"template {template!r} ends with its subject: the subject's tokens would include the position "
            "whose next-token prediction is read, so text must follow {X}."
        )
    return head + subject + tail, len(head), len(head) + len(subject)


class ProbeSet:
    """The probe data: languages, relations with their templates, countries with names and answers."""

    def __init__(self, data: dict[str, Any], source: str = "<dict>") -> None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InterventionError(f"{source} is not a probe file of format {FORMAT!r}.")
        self.data = data
        self.source = source
        self.languages: tuple[str, ...] = tuple(data["languages"])
        self.relations: tuple[str, ...] = tuple(data["relations"])
        self.countries: tuple[str, ...] = tuple(data["countries"])
        self.built_with: dict[str, str] = dict(data.get("built_with", {}))

    def __repr__(self) -> str:
        return (
            f"ProbeSet({len(self.countries)} countries, relations {list(self.relations)}, "
            f"languages {list(self.languages)}, from {self.source})"
        )

    # -- checks ----------------------------------------------------------------------------------
    def _language(self, language: str) -> str:
        if language not in self.languages:
            raise InterventionError(f"unknown probe language {language!r}; the probes have {list(self.languages)}.")
        return language

    def _relation(self, relation: str) -> str:
        if relation not in self.relations:
            raise InterventionError(f"unknown relation {relation!r}; the probes have {list(self.relations)}.")
        return relation

    def _country(self, country: str) -> dict[str, Any]:
        record = self.data["countries"].get(country)
        if record is None:
            raise InterventionError(f"unknown country {country!r}; the probes have {list(self.countries)}.")
        return record

    # -- access ----------------------------------------------------------------------------------
    def template(self, relation: str, language: str) -> str:
        return str(self.data["relations"][self._relation(relation)]["templates"][self._language(language)])

    def name(self, country: str, language: str) -> str:
        return str(self._country(country)["names"][self._language(language)])

    def answer(self, country: str, relation: str, language: str) -> str | None:
        """The answer, or None when the country has no answer for the relation."""
        values = self._country(country).get(self._relation(relation))
        return None if values is None else str(values[self._language(language)])

    def answer_prefix(self, language: str, relation: str | None = None) -> str:
        """What separates the prompt from the answer: the language's (a space, or nothing in Chinese and
        Japanese), unless the relation sets its own (``""`` where the template ends with ``+`` or ``.``)."""
        if relation is not None:
            own = self.data["relations"][self._relation(relation)].get("answer_prefix")
            if own is not None:
                self._language(language)
                return str(own)
        return str(self.data["languages"][self._language(language)]["answer_prefix"])

    def countries_for(self, relation: str, countries: Iterable[str] | None = None) -> list[str]:
        """Countries with an answer for ``relation`` (in file order; restricted to ``countries`` if given)."""
        self._relation(relation)
        chosen = self.countries if countries is None else list(countries)
        return [c for c in chosen if self._country(c).get(relation) is not None]

    def probe(self, relation: str, language: str, country: str) -> Probe:
        answer = self.answer(country, relation, language)
        if answer is None:
            raise InterventionError(f"country {country!r} has no {relation!r} answer in the probe data.")
        subject = self.name(country, language)
        prompt, start, end = render(self.template(relation, language), subject)
        return Probe(
            relation, language, country, subject, prompt, start, end, answer, self.answer_prefix(language, relation)
        )

    def probes(self, relation: str, language: str, countries: Iterable[str] | None = None) -> list[Probe]:
        """One probe per country with an answer for ``relation``."""
        return [self.probe(relation, language, c) for c in self.countries_for(relation, countries)]


@lru_cache(maxsize=4)
def _load(path: str) -> ProbeSet:
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise InterventionError(f"cannot read the probe file {path}: {exc}") from exc
    return ProbeSet(data, path)


def load_probes(path: str | Path | None = None) -> ProbeSet:
    """The packaged probes (``interlingua/patching/data/probes.json``) or a file of the same format."""
    if path is None:
        path = str(resources.files("interlingua.patching") / "data" / "probes.json")
    return _load(str(path))


# -- tokens -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodedPrompt:
    """A prompt's token ids, the subject's token positions and the read-out position."""

    input_ids: tuple[int, ...]
    span: tuple[int, ...]
    exact: bool  # the span's tokens hold nothing but the subject (and spaces)

    @property
    def last(self) -> int:
        """Position whose next-token distribution is read."""
        return len(self.input_ids) - 1


def _encode(tokenizer: Any, text: str, offsets: bool) -> dict[str, Any]:
    try:
        return tokenizer(
            text,
            add_special_tokens=True,
            return_offsets_mapping=offsets,
            return_special_tokens_mask=True,
            verbose=False,
        )
    except NotImplementedError as exc:  # slow (Python) tokenizers have no offsets
        raise InterventionError(
            f"{type(tokenizer).__name__} gives no character offsets (return_offsets_mapping needs a fast "
            "tokenizer); load the tokenizer with use_fast=True."
        ) from exc


def _strip_trailing_special(ids: list[int], special: list[int]) -> int:
    """Number of tokens to keep: trailing special tokens (``</s>``, ``[SEP]``) dropped."""
    n = len(ids)
    while n > 0 and special[n - 1]:
        n -= 1
    return n


def encode_prompt(tokenizer: Any, prompt: str, start: int, end: int) -> EncodedPrompt:
    """Token ids of ``prompt`` and the positions of the characters ``[start, end)`` (see :func:`find_span`)."""
    if not (0 <= start < end <= len(prompt)):
        raise InterventionError(f"subject range [{start}, {end}) is not inside the prompt of {len(prompt)} characters.")
    enc = _encode(tokenizer, prompt, offsets=True)
    ids = list(enc["input_ids"])
    special = list(enc.get("special_tokens_mask") or [0] * len(ids))
    keep = _strip_trailing_special(ids, special)
    offsets = [tuple(o) for o in enc["offset_mapping"]][:keep]
    ids, special = ids[:keep], special[:keep]

    def content(a: int, b: int) -> list[int]:
        return [c for c in range(a, b) if not prompt[c].isspace()]

    covering = [
        i for i, (s, e) in enumerate(offsets) if not special[i] and e > s and content(max(s, start), min(e, end))
    ]
    if not covering:
        raise InterventionError(
            f"no token of {type(tokenizer).__name__} covers the subject {prompt[start:end]!r} in {prompt!r}."
        )
    span = list(range(covering[0], covering[-1] + 1))  # with any space-only token inside a multi-word name
    if any(special[i] for i in span):
        raise InterventionError(f"a special token lies inside the subject {prompt[start:end]!r} in {prompt!r}.")
    if span[-1] >= keep - 1:
        raise InterventionError(
            f"the subject {prompt[start:end]!r} reaches the last token of {prompt!r}; the read-out position must "
            "follow the subject."
        )
    exact = all(
        not content(s, e) or (start <= min(content(s, e)) and max(content(s, e)) < end)
        for s, e in (offsets[i] for i in span)
    )
    return EncodedPrompt(tuple(int(i) for i in ids), tuple(span), exact)


def find_span(tokenizer: Any, prompt: str, start: int, end: int) -> list[int]:
    """Token positions (in ``tokenizer(prompt)``'s ids) of the characters ``[start, end)`` of ``prompt``.

    The span runs from the first to the last token whose character offsets cover at least one
    non-space character of ``[start, end)``; special tokens never do. Raises
    :class:`InterventionError` when no token does, a special token lies inside, or the span
    reaches the last token.
    """
    return list(encode_prompt(tokenizer, prompt, start, end).span)


def answer_tokens(tokenizer: Any, prompt: str, continuation: str) -> tuple[int, ...]:
    """The ids of the whole ``continuation`` after ``prompt`` (see the module docstring).

    The tokens that follow the prompt's own tokens in the encoding of ``prompt + continuation``;
    if the prompt's tokens are not a prefix of it (a merge across the boundary), the encoding of
    ``continuation`` alone. Scoring them one after the other after the prompt (teacher forcing)
    gives the log-probability of the whole answer.
    """
    if not continuation.strip():
        raise InterventionError(f"the answer is empty: {continuation!r}.")
    p = _encode(tokenizer, prompt, offsets=False)
    f = _encode(tokenizer, prompt + continuation, offsets=False)
    p_ids = list(p["input_ids"])[: _strip_trailing_special(list(p["input_ids"]), list(p["special_tokens_mask"]))]
    f_ids = list(f["input_ids"])[: _strip_trailing_special(list(f["input_ids"]), list(f["special_tokens_mask"]))]
    if len(f_ids) > len(p_ids) and f_ids[: len(p_ids)] == p_ids:
        return tuple(int(i) for i in f_ids[len(p_ids) :])
    alone = tokenizer(continuation, add_special_tokens=False, return_special_tokens_mask=True, verbose=False)
    ids = [i for i, s in zip(alone["input_ids"], alone["special_tokens_mask"]) if not s]
    if not ids:
        raise InterventionError(f"{type(tokenizer).__name__} gives the answer {continuation!r} no token.")
    return tuple(int(i) for i in ids)


def answer_token(tokenizer: Any, prompt: str, continuation: str) -> int:
    """The id of the first token of ``continuation`` after ``prompt`` (the first of :func:`answer_tokens`)."""
    return answer_tokens(tokenizer, prompt, continuation)[0]

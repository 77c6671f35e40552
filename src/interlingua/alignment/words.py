"""Word segmentation with character spans, the unit of word alignment.

``segment(text, language)`` returns :class:`Word` objects whose ``start:end``
slice the original ``text`` exactly (``text[w.start:w.end] == w.text``).

Spaced scripts (the default): a word is a maximal run of word characters
(Unicode categories L*, M*, N* and ``_``; combining marks stay inside the
word, so Devanagari or Arabic diacritics do not split it), where one
apostrophe (``'``, ``’``, `````) or hyphen (``-``, ``‐``) *between* two word
characters joins the runs (``don`t``, ``Hazar-shual``, ``l'horloge`` are one
word each). Everything else (whitespace, punctuation, symbols) separates
words; with ``punctuation=True`` each punctuation/symbol character is
returned as a word of its own, otherwise it is dropped.

Scripts written without spaces need a dictionary segmenter:

- Chinese (``zho``/``cmn``/``yue``/``wuu``, or any ``*_Hans``/``*_Hant``/``*_Hani``):
  ``jieba`` (precise mode, HMM for unknown words; its dictionary ships in the
  wheel, so it works offline). Runs that jieba returns are re-split by the
  spaced-script rule above (so whitespace/punctuation never end up inside a
  word, and Latin text inside Chinese is handled as usual).
- Japanese (``jpn``, ``*_Jpan``): ``janome`` (pure Python, dictionary in the
  wheel) when installed.
- Thai (``tha``, ``*_Thai``): ``pythainlp`` (``newmm`` engine) when installed.
- Other unspaced scripts (Khmer, Lao, Myanmar, Tibetan, Javanese, Balinese, Tai Tham,
  Yi, ...): not supported; the language code (``jav_Java``) is refused.

A missing segmenter raises :class:`~interlingua.alignment.AlignmentError`
naming the package to install. :func:`check_segmentable` also reads the text:
sentences mostly in an unspaced script that the language's segmenter does not
handle (Javanese script under ``jav_Latn``, Thai under a code without
``_Thai``) are refused, since the spaced rule would make each sentence one word.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from interlingua.core.errors import InterlinguaError

__all__ = ["AlignmentError", "Word", "segment", "segment_many", "segmenter_for", "check_segmentable"]


class AlignmentError(InterlinguaError, ValueError):
    """Word alignment or word-aligned pooling got unusable input."""


@dataclass(frozen=True)
class Word:
    """A word and its character span ``[start, end)`` in the sentence."""

    text: str
    start: int
    end: int


_JOINERS = frozenset("'’`-‐")
_CHINESE = frozenset({"zho", "cmn", "yue", "wuu", "lzh", "hak", "nan", "gan", "hsn"})
_CHINESE_SCRIPTS = frozenset({"Hans", "Hant", "Hani"})
# ISO 15924 codes of scripts written without spaces between words, for which there is no segmenter here
_UNSUPPORTED_SCRIPTS = {
    "Khmr": "Khmer",
    "Laoo": "Lao",
    "Mymr": "Myanmar",
    "Tibt": "Tibetan",
    "Java": "Javanese",
    "Bali": "Balinese",
    "Bugi": "Buginese",
    "Batk": "Batak",
    "Lana": "Tai Tham",
    "Talu": "New Tai Lue",
    "Tale": "Tai Le",
    "Tavt": "Tai Viet",
    "Yiii": "Yi",
    "Tglg": "Tagalog (Baybayin)",
    "Hano": "Hanunoo",
    "Buhd": "Buhid",
    "Tagb": "Tagbanwa",
    "Maka": "Makasar",
    "Kawi": "Kawi",
    "Ahom": "Ahom",
}
# first words of the Unicode character names of unspaced scripts -> script name
_UNSPACED_NAMES = {
    "KHMER": "Khmer",
    "LAO": "Lao",
    "MYANMAR": "Myanmar",
    "TIBETAN": "Tibetan",
    "JAVANESE": "Javanese",
    "BALINESE": "Balinese",
    "BUGINESE": "Buginese",
    "BATAK": "Batak",
    "TAI THAM": "Tai Tham",
    "NEW TAI LUE": "New Tai Lue",
    "TAI LE": "Tai Le",
    "TAI VIET": "Tai Viet",
    "YI": "Yi",
    "TAGALOG": "Tagalog (Baybayin)",
    "HANUNOO": "Hanunoo",
    "BUHID": "Buhid",
    "TAGBANWA": "Tagbanwa",
    "MAKASAR": "Makasar",
    "KAWI": "Kawi",
    "AHOM": "Ahom",
    "THAI": "Thai",
    "CJK": "Han",
    "HIRAGANA": "Hiragana",
    "KATAKANA": "Katakana",
}
# the unspaced scripts each segmenter handles
_HANDLES = {
    "spaced": frozenset(),
    "jieba": frozenset({"Han"}),
    "janome": frozenset({"Han", "Hiragana", "Katakana"}),
    "pythainlp": frozenset({"Thai"}),
}
_CODE_FOR = {
    "Han": "a *_Hans or *_Hant code (jieba)",
    "Hiragana": "jpn_Jpan (janome)",
    "Katakana": "jpn_Jpan (janome)",
    "Thai": "a *_Thai code (pythainlp)",
}


def _is_word_char(ch: str) -> bool:
    return ch == "_" or unicodedata.category(ch)[0] in "LMN"


def _spaced(text: str, offset: int = 0, punctuation: bool = False) -> list[Word]:
    words: list[Word] = []
    n = len(text)
    i = 0
    while i < n:
        ch = text[i]
        if _is_word_char(ch):
            j = i + 1
            while j < n:
                if _is_word_char(text[j]):
                    j += 1
                elif text[j] in _JOINERS and j + 1 < n and _is_word_char(text[j + 1]):
                    j += 2
                else:
                    break
            words.append(Word(text[i:j], offset + i, offset + j))
            i = j
        else:
            if punctuation and not ch.isspace() and unicodedata.category(ch)[0] in "PS":
                words.append(Word(ch, offset + i, offset + i + 1))
            i += 1
    return words


def _split_code(language: str | None) -> tuple[str, str]:
    if not language:
        return "", ""
    code = language.replace("-", "_")
    iso, _, script = code.partition("_")
    return iso.lower(), script[:1].upper() + script[1:].lower()


def segmenter_for(language: str | None) -> str:
    """Name of the segmenter :func:`segment` uses for ``language`` (``"spaced"``,
    ``"jieba"``, ``"janome"``, ``"pythainlp"``); raises for unsupported scripts."""
    iso, script = _split_code(language)
    if iso in _CHINESE or script in _CHINESE_SCRIPTS:
        return "jieba"
    if iso == "jpn" or script == "Jpan":
        return "janome"
    if iso == "tha" or script == "Thai":
        return "pythainlp"
    if script in _UNSUPPORTED_SCRIPTS:
        raise AlignmentError(
            f"no word segmenter for {_UNSUPPORTED_SCRIPTS[script]} ({language}): the script is "
            "written without spaces and interlingua has no segmenter for it (each sentence would be one "
            "word); leave this language out of word-aligned pooling (alignment.pairs), or compare it with "
            "a sentence pooling (mean, sgpt, last)"
        )
    return "spaced"


@lru_cache(maxsize=4096)
def _unspaced_script(ch: str) -> str:
    """The unspaced script of a word character ("" for spaced scripts, digits and unnamed characters)."""
    name = unicodedata.name(ch, "")
    for prefix, script in _UNSPACED_NAMES.items():
        if name.startswith(prefix + " "):
            return script
    return ""


def check_segmentable(language: str | None, sentences: Sequence[str]) -> str:
    """The segmenter for ``language`` (see :func:`segmenter_for`), after checking that it can split ``sentences``.

    Raises :class:`AlignmentError` when more than half of the word characters are in an unspaced script the
    segmenter does not handle (each sentence would become one word), naming the script and what to do.
    """
    name = segmenter_for(language)
    counts: dict[str, int] = {}
    total = 0
    for text in sentences:
        for ch in text:
            if _is_word_char(ch):
                total += 1
                script = _unspaced_script(ch)
                if script and script not in _HANDLES[name]:
                    counts[script] = counts.get(script, 0) + 1
    if not counts or 2 * sum(counts.values()) <= total:
        return name
    script = max(counts, key=lambda k: counts[k])
    share = sum(counts.values()) / total
    hint = (
        f"pass the language as {_CODE_FOR[script]} if that is what the text is, or leave {language} out of "
        "word-aligned pooling"
        if script in _CODE_FOR
        else f"interlingua has no segmenter for it; leave {language} out of word-aligned pooling"
    )
    using = "the spaced-script rule" if name == "spaced" else name
    raise AlignmentError(
        f"{language}: {share:.0%} of the word characters are {script} script, which is written without spaces "
        f"between words, and {using} cannot split it (each sentence would be one word); {hint}"
    )


def missing_segmenter_error(package: str, language: str | None) -> AlignmentError:
    """The error for a word segmenter that is not installed: it names the ``align`` extra that brings all three."""
    return AlignmentError(
        f"word segmentation of {language} needs the {package!r} package, which is not installed (the text has no "
        f'spaces between words); install the aligner\'s extra: pip install "interlingua[align]" (or pip install '
        f"{package})"
    )


@lru_cache(maxsize=1)
def _jieba() -> Any:  # the jieba module (untyped)
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@lru_cache(maxsize=1)
def _janome() -> Any:  # a janome Tokenizer (untyped)
    from janome.tokenizer import Tokenizer

    return Tokenizer()


def _dictionary_runs(name: str, text: str, language: str | None) -> list[tuple[int, int]]:
    """Character spans of the pieces a dictionary segmenter cuts ``text`` into."""
    try:
        if name == "jieba":
            return [(s, e) for _, s, e in _jieba().tokenize(text, mode="default", HMM=True)]
        if name == "janome":
            pieces = [t.surface for t in _janome().tokenize(text)]
        else:
            from pythainlp.tokenize import word_tokenize

            pieces = word_tokenize(text, engine="newmm", keep_whitespace=True)
    except ImportError as exc:
        raise missing_segmenter_error(name, language) from exc
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        at = text.find(piece, pos)
        if not piece or at < 0:  # the segmenter normalised the text: fall back to order only
            continue
        spans.append((at, at + len(piece)))
        pos = at + len(piece)
    return spans


def segment(text: str, language: str | None = None, *, punctuation: bool = False) -> list[Word]:
    """Words of ``text`` with exact character spans (see the module docstring)."""
    if not isinstance(text, str):
        raise AlignmentError(f"text must be a string, got {type(text).__name__}")
    name = segmenter_for(language)
    if name == "spaced":
        return _spaced(text, 0, punctuation)
    words: list[Word] = []
    for start, end in _dictionary_runs(name, text, language):
        words.extend(_spaced(text[start:end], start, punctuation))
    return words


def segment_many(texts: Sequence[str], language: str | None = None, *, punctuation: bool = False) -> list[list[Word]]:
    """:func:`segment` for each text."""
    return [segment(t, language, punctuation=punctuation) for t in texts]

"""Training-corpus contamination: the share of a corpus's lines confidently in another language.

``contamination(lines, expected="deu_Latn")`` runs an offline language
identifier over (a sample of) the lines of one corpus and counts the lines it
identifies as ``other`` (English by default) with probability at least
``threshold``; ``contamination_table({name: source, ...})`` does it for many
corpora, one row each. A source is a list of strings (e.g. a ``datasets``
column), a ``datasets.Dataset`` with a ``text`` column, a local UTF-8 text
file (one line per line), or ``"bible:<lang>"``, a side of the verse-aligned
Bible corpus (:func:`interlingua.data.corpora.load_corpus`).

The identifier and its numbers
------------------------------
``py3langid`` >= 0.4 (the optional extra ``langid``), a naive-Bayes byte
n-gram model of 140 labels shipped in the wheel, so it runs offline. It is
loaded as ``LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)``;
``classify(line)`` gives the top label and its normalised probability. From
0.4 on, py3langid divides the log-scores by the square root of the line's
length in bytes before the softmax, so the probability is calibrated across
lengths (before 0.4 it was an untempered softmax, near 1.0 for almost any
line; thresholds would mean something else, hence the pin).

Counting, per corpus:

* a line is *considered* when it has at least ``min_chars`` characters after
  stripping (default 20); shorter lines are *skipped* (counted, not classified);
* it is *confidently other* when the top label is ``other``'s language and its
  probability is >= ``threshold`` (default 0.9); *confidently expected*
  likewise for ``expected``; otherwise, if its top probability is below
  ``threshold``, *uncertain*;
* ``share_other = n_other / n_considered`` with a Wilson 95% interval
  (:func:`interlingua.analysis.stats.wilson_interval`); uncertain lines stay in the
  denominator, so the share is a lower bound on what the identifier would
  call ``other`` at a lower threshold.

Labels: py3langid answers with ISO 639-1 codes (``en``, ``de``) and a few
ISO 639-3 ones (``ary``, ``gug``); :data:`LANGID_CODES` maps each label to the
project's FLORES-style code (passed through
:func:`~interlingua.data.corpora.normalize_language`, so ``tl`` is ``fil_Latn`` and
``zh`` is ``cmn_Hans``), choosing the individual language FLORES uses for a
macrolanguage label (``ar -> arb_Arab``, ``fa -> pes_Arab``, ``ms -> zsm_Latn``,
``sw -> swh_Latn``, ``no -> nob_Latn``). Languages are compared by their
ISO 639-3 part only: the identifier labels languages, not scripts, so
``expected="cmn_Hant"`` matches ``zh`` too. ``zxx`` (no linguistic content)
stays ``zxx``.
"""

from __future__ import annotations

import collections
import difflib
import importlib.metadata
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from interlingua.analysis.stats import wilson_interval
from interlingua.core.errors import InterlinguaError, LanguageError
from interlingua.core.languages import normalize_language

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_MIN_CHARS",
    "DEFAULT_THRESHOLD",
    "LANGID_CODES",
    "ContaminationError",
    "ContaminationResult",
    "contamination",
    "contamination_table",
    "langid_code",
    "read_lines",
]

DEFAULT_THRESHOLD = 0.9
DEFAULT_MIN_CHARS = 20
INSTALL_HINT = "pip install 'interlingua[langid]' (or: pip install 'py3langid>=0.4')"
_TOP = 5

#: py3langid label -> FLORES-style code (0.4.0's 140 labels; 'zxx' = no linguistic content).
LANGID_CODES: dict[str, str] = {
    "ace": "ace_Latn", "af": "afr_Latn", "am": "amh_Ethi", "an": "arg_Latn", "ar": "arb_Arab",
    "ary": "ary_Arab", "arz": "arz_Arab", "as": "asm_Beng", "az": "azj_Latn", "ba": "bak_Cyrl",
    "bcl": "bcl_Latn", "be": "bel_Cyrl", "bg": "bul_Cyrl", "bn": "ben_Beng", "br": "bre_Latn",
    "bs": "bos_Latn", "ca": "cat_Latn", "crh": "crh_Latn", "cs": "ces_Latn", "cy": "cym_Latn",
    "da": "dan_Latn", "de": "deu_Latn", "dz": "dzo_Tibt", "el": "ell_Grek", "en": "eng_Latn",
    "eo": "epo_Latn", "es": "spa_Latn", "et": "est_Latn", "eu": "eus_Latn", "ext": "ext_Latn",
    "fa": "pes_Arab", "fi": "fin_Latn", "fo": "fao_Latn", "fr": "fra_Latn", "fuv": "fuv_Latn",
    "fy": "fry_Latn", "ga": "gle_Latn", "gcf": "gcf_Latn", "gcr": "gcr_Latn", "gd": "gla_Latn",
    "gl": "glg_Latn", "gom": "gom_Deva", "grc": "grc_Grek", "gu": "guj_Gujr", "gug": "gug_Latn",
    "guw": "guw_Latn", "ha": "hau_Latn", "hbo": "hbo_Hebr", "he": "heb_Hebr", "hi": "hin_Deva",
    "hr": "hrv_Latn", "ht": "hat_Latn", "hu": "hun_Latn", "hy": "hye_Armn", "id": "ind_Latn",
    "ig": "ibo_Latn", "is": "isl_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "jv": "jav_Latn",
    "ka": "kat_Geor", "kab": "kab_Latn", "kik": "kik_Latn", "kk": "kaz_Cyrl", "km": "khm_Khmr",
    "kn": "kan_Knda", "ko": "kor_Hang", "ku": "kmr_Latn", "ky": "kir_Cyrl", "la": "lat_Latn",
    "lb": "ltz_Latn", "lg": "lug_Latn", "lij": "lij_Latn", "ln": "lin_Latn", "lo": "lao_Laoo",
    "lt": "lit_Latn", "ltg": "ltg_Latn", "lv": "lvs_Latn", "mg": "plt_Latn", "mk": "mkd_Cyrl",
    "ml": "mal_Mlym", "mn": "khk_Cyrl", "mr": "mar_Deva", "ms": "zsm_Latn", "mt": "mlt_Latn",
    "my": "mya_Mymr", "ne": "npi_Deva", "nl": "nld_Latn", "nn": "nno_Latn", "no": "nob_Latn",
    "nso": "nso_Latn", "oc": "oci_Latn", "om": "gaz_Latn", "or": "ory_Orya", "pa": "pan_Guru",
    "pcm": "pcm_Latn", "pl": "pol_Latn", "ps": "pbt_Arab", "pt": "por_Latn", "qu": "quy_Latn",
    "ro": "ron_Latn", "ru": "rus_Cyrl", "rw": "kin_Latn", "sa": "san_Deva", "sdh": "sdh_Arab",
    "se": "sme_Latn", "si": "sin_Sinh", "sk": "slk_Latn", "sl": "slv_Latn", "sn": "sna_Latn",
    "so": "som_Latn", "sq": "als_Latn", "sr": "srp_Cyrl", "st": "sot_Latn", "sv": "swe_Latn",
    "sw": "swh_Latn", "ta": "tam_Taml", "te": "tel_Telu", "tg": "tgk_Cyrl", "th": "tha_Thai",
    "tk": "tuk_Latn", "tl": "fil_Latn", "tr": "tur_Latn", "tt": "tat_Cyrl", "ug": "uig_Arab",
    "uk": "ukr_Cyrl", "ur": "urd_Arab", "uz": "uzn_Latn", "uzs": "uzs_Arab", "vec": "vec_Latn",
    "vi": "vie_Latn", "vo": "vol_Latn", "wa": "wln_Latn", "wuu": "wuu_Hans", "xh": "xho_Latn",
    "yo": "yor_Latn", "yue": "yue_Hant", "zh": "cmn_Hans", "zu": "zul_Latn", "zxx": "zxx",
}  # fmt: skip


class ContaminationError(InterlinguaError, ValueError):
    """A contamination audit cannot run: bad input, unknown language, or no identifier installed."""


@dataclass(frozen=True)
class ContaminationResult:
    """Counts and shares of one corpus (see the module docstring for the definitions)."""

    expected: str
    other: str
    n_available: int  # lines in the source
    n_lines: int  # lines audited (after sampling)
    n_considered: int  # of those, >= min_chars characters
    n_skipped: int  # too short
    n_other: int  # confidently `other`
    share_other: float
    ci_low: float  # Wilson 95% interval of share_other
    ci_high: float
    n_expected: int  # confidently `expected`
    share_expected: float
    n_uncertain: int  # top probability below threshold
    top_languages: tuple[tuple[str, int], ...]  # confident languages other than `expected`, most lines first
    threshold: float
    min_chars: int
    sample: int | None
    seed: int
    identifier: str
    corpus: str | None = None

    def as_row(self) -> dict[str, Any]:
        """One flat row (``top_languages`` as ``"fra_Latn:3, eng_Latn:2"``)."""
        row = asdict(self)
        row["top_languages"] = ", ".join(f"{code}:{count}" for code, count in self.top_languages)
        return row


_COLUMNS = [
    "corpus", "expected", "other", "n_available", "n_lines", "n_considered", "n_skipped",
    "n_other", "share_other", "ci_low", "ci_high", "n_expected", "share_expected", "n_uncertain",
    "top_languages", "threshold", "min_chars", "sample", "seed", "identifier",
]  # fmt: skip


def langid_code(label: str) -> str:
    """The FLORES-style code of a py3langid label (``en -> eng_Latn``); unknown labels as they are."""
    code = LANGID_CODES.get(label)
    if code is not None:
        return code
    try:
        return normalize_language(label)
    except LanguageError:
        return label


def _language(code: str) -> str:
    return code.split("_", 1)[0]


@lru_cache(maxsize=1)
def _identifier() -> tuple[Any, str]:
    """py3langid's identifier with normalised probabilities, and ``"py3langid <version>"``."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise ContaminationError(
            f"the contamination audit needs the offline language identifier py3langid: {INSTALL_HINT}"
        ) from None
    try:
        version = importlib.metadata.version("py3langid")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - installed without metadata
        version = "unknown"
    if not hasattr(LanguageIdentifier, "from_model_file"):
        raise ContaminationError(
            f"py3langid {version} is too old: its normalised probabilities are not length-calibrated, "
            f"so thresholds mean something else; {INSTALL_HINT}"
        )
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True), f"py3langid {version}"


def _identifiable() -> dict[str, str]:
    """ISO 639-3 language -> FLORES-style code, for every label the identifier knows."""
    identifier, _ = _identifier()
    codes = (langid_code(label) for label in identifier.labels)
    return {_language(code): code for code in codes if code != "zxx"}


def _resolve(code: str, role: str) -> str:
    """``code`` as a FLORES-style code the identifier can answer with; ContaminationError otherwise."""
    if not isinstance(code, str):
        raise ContaminationError(f"{role} must be a language code like 'deu_Latn', got {code!r}")
    try:
        flores = normalize_language(code)
    except LanguageError as exc:
        raise ContaminationError(f"{role}: {exc}") from None
    known = _identifiable()
    if _language(flores) not in known:
        near = difflib.get_close_matches(flores, sorted(known.values()), n=5, cutoff=0.5)
        hint = f"; nearest: {', '.join(near)}" if near else ""
        raise ContaminationError(
            f"{role} language {flores} is not one the identifier ({_identifier()[1]}) knows, so no line could "
            f"be attributed to it{hint}; known: {', '.join(sorted(known.values()))}"
        )
    return flores


def read_lines(source: Any) -> list[str]:
    """The lines of ``source``: a list of strings, a ``datasets.Dataset`` (``text`` column),
    a path to a UTF-8 text file, or ``"bible:<lang>"`` (that side of the Bible corpus)."""
    if isinstance(source, str) and source.startswith("bible:"):
        from interlingua.data.corpora import load_corpus

        language = source.split(":", 1)[1]
        return list(load_corpus("bible", [language]).sentences(language))
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ContaminationError(
                f"{str(source)[:80]!r} is not a file; give a list of lines, a path to a text file, or 'bible:<lang>'"
            )
        try:
            return path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ContaminationError(f"cannot read {path} as UTF-8 text ({exc})") from None
    column_names = getattr(source, "column_names", None)
    if isinstance(column_names, list):  # a datasets.Dataset
        if "text" not in column_names:
            raise ContaminationError(
                f"the dataset has no 'text' column (columns: {', '.join(column_names)}); pass dataset[column]"
            )
        source = source["text"]
    if not isinstance(source, Iterable):
        raise ContaminationError(f"cannot read lines from {type(source).__name__}")
    lines = list(source)
    bad = next((i for i, line in enumerate(lines) if not isinstance(line, str)), None)
    if bad is not None:
        raise ContaminationError(f"line {bad} is {type(lines[bad]).__name__}, not a string")
    return lines


def _check_options(sample: int | None, min_chars: int, threshold: float) -> None:
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise ContaminationError(f"sample must be a positive number of lines or None (all), got {sample!r}")
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 0:
        raise ContaminationError(f"min_chars must be a non-negative integer, got {min_chars!r}")
    if not isinstance(threshold, (int, float)) or not (0.0 < float(threshold) <= 1.0):
        raise ContaminationError(f"threshold must be a probability in (0, 1], got {threshold!r}")


def contamination(
    lines: Any,
    *,
    expected: str,
    other: str = "eng",
    sample: int | None = None,
    seed: int = 0,
    min_chars: int = DEFAULT_MIN_CHARS,
    threshold: float = DEFAULT_THRESHOLD,
    name: str | None = None,
) -> ContaminationResult:
    """Share of ``lines`` (a sample of ``sample`` of them, seeded) confidently identified as ``other``.

    Args:
        lines: a list of strings, a ``datasets.Dataset``, a text-file path, or ``"bible:<lang>"``.
        expected: the corpus's language (FLORES-style, ``deu_Latn``; ``deu`` works too).
        other: the language counted as contamination (default English).
        sample: audit this many lines, drawn without replacement and kept in corpus
            order (``np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))``);
            None or more than there are: all. Short lines are drawn too, then skipped.
        min_chars: lines shorter than this after stripping are skipped.
        threshold: the identifier's probability a line needs to count.

    Raises:
        ContaminationError: no lines, no line long enough, an unknown language,
            ``other == expected``, bad options, or py3langid not installed.
    """
    _check_options(sample, min_chars, threshold)
    expected_code = _resolve(expected, "expected")
    other_code = _resolve(other, "other")
    if _language(expected_code) == _language(other_code):
        raise ContaminationError(f"other ({other_code}) is the expected language; choose another one")
    every = read_lines(lines)
    if not every:
        raise ContaminationError(f"{name or 'the corpus'} has no lines")
    chosen = every
    if sample is not None and sample < len(every):
        positions = np.sort(np.random.default_rng(seed).choice(len(every), size=sample, replace=False))
        chosen = [every[i] for i in positions]
    considered = [line.strip() for line in chosen if len(line.strip()) >= min_chars]
    if not considered:
        raise ContaminationError(
            f"none of the {len(chosen)} lines of {name or 'the corpus'} has {min_chars} or more characters; "
            "lower min_chars"
        )
    identifier, identifier_name = _identifier()
    confident: collections.Counter[str] = collections.Counter()
    uncertain = 0
    for line in considered:
        label, probability = identifier.classify(line)
        if probability >= threshold:
            confident[_language(langid_code(label))] += 1
        else:
            uncertain += 1
    n = len(considered)
    n_other = confident[_language(other_code)]
    n_expected = confident[_language(expected_code)]
    low, high = wilson_interval(n_other, n)
    codes = _identifiable()
    top = tuple(
        (codes.get(language, language), count)
        for language, count in sorted(confident.items(), key=lambda item: (-item[1], item[0]))
        if language != _language(expected_code)
    )[:_TOP]
    return ContaminationResult(
        expected=expected_code,
        other=other_code,
        n_available=len(every),
        n_lines=len(chosen),
        n_considered=n,
        n_skipped=len(chosen) - n,
        n_other=n_other,
        share_other=n_other / n,
        ci_low=float(low),
        ci_high=float(high),
        n_expected=n_expected,
        share_expected=n_expected / n,
        n_uncertain=uncertain,
        top_languages=top,
        threshold=float(threshold),
        min_chars=min_chars,
        sample=sample,
        seed=seed,
        identifier=identifier_name,
        corpus=name,
    )


def _expected_for(name: str, source: Any, expected: str | Mapping[str, str] | None) -> str:
    if isinstance(expected, Mapping):
        if name not in expected:
            raise ContaminationError(f"expected has no language for corpus {name!r}")
        return expected[name]
    if isinstance(expected, str):
        return expected
    try:
        return normalize_language(name)
    except LanguageError:
        pass
    if isinstance(source, str) and source.startswith("bible:"):
        return source.split(":", 1)[1]
    raise ContaminationError(f"corpus {name!r} is not named by a language code; pass expected={{{name!r}: 'deu_Latn'}}")


def contamination_table(
    corpora: Mapping[str, Any],
    *,
    expected: str | Mapping[str, str] | None = None,
    other: str = "eng",
    sample: int | None = None,
    seed: int = 0,
    min_chars: int = DEFAULT_MIN_CHARS,
    threshold: float = DEFAULT_THRESHOLD,
) -> pd.DataFrame:
    """One row per corpus of :func:`contamination` (columns as :meth:`ContaminationResult.as_row`).

    ``corpora`` maps a name to a source (see :func:`read_lines`). Each corpus's
    expected language is ``expected[name]`` (a mapping), ``expected`` (one code
    for all), or else the name itself when it is a language code
    (``{"deu_Latn": "bible:deu_Latn"}``), or the language of a ``bible:`` source.
    """
    import pandas as pd

    if not isinstance(corpora, Mapping) or not corpora:
        raise ContaminationError("corpora must be a non-empty mapping of name -> lines, path or 'bible:<lang>'")
    rows = []
    for name, source in corpora.items():
        result = contamination(
            source,
            expected=_expected_for(str(name), source, expected),
            other=other,
            sample=sample,
            seed=seed,
            min_chars=min_chars,
            threshold=threshold,
            name=str(name),
        )
        rows.append(result.as_row())
    frame = pd.DataFrame(rows, columns=_COLUMNS)
    frame["sample"] = frame["sample"].astype("Int64")
    return frame

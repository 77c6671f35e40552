"""Language codes: one canonical spelling, the FLORES+ one (``eng_Latn``).

Models and corpora name languages differently: Goldfish model ids use a
lower-case script (``eng_latn``), some tools use bare ISO 639-3 codes or
macrolanguage codes (``zho``, ``swa``). Every corpus and every cache key in
interlingua uses the FLORES+ spelling, so two spellings of the same language
can never produce two cache entries or a failed join.
"""

from __future__ import annotations

import re

from interlingua.core.errors import LanguageError

__all__ = ["normalize_language", "DEFAULT_SCRIPTS", "REMAPS"]

#: Known remaps from macrolanguage / Goldfish codes to the FLORES+ config name.
#: Keys are ``(language, script)`` with the script in title case, or
#: ``(language, None)`` for a bare code written without a script.
REMAPS: dict[tuple[str, str | None], str] = {
    ("zho", "Hans"): "cmn_Hans",
    ("zho", "Hant"): "cmn_Hant",
    ("zho", None): "cmn_Hans",
    ("swa", "Latn"): "swh_Latn",
    ("swa", None): "swh_Latn",
    ("tgl", "Latn"): "fil_Latn",
    ("tgl", None): "fil_Latn",
    ("uzb", "Latn"): "uzn_Latn",
    ("uzb", None): "uzn_Latn",
}

#: The script a bare ISO 639-3 code (``"eng"``) gets. Only languages whose
#: usual script is unambiguous are listed; for the rest write the script.
DEFAULT_SCRIPTS: dict[str, str] = {
    "eng": "Latn",
    "deu": "Latn",
    "fra": "Latn",
    "spa": "Latn",
    "ita": "Latn",
    "por": "Latn",
    "nld": "Latn",
    "pol": "Latn",
    "ces": "Latn",
    "ron": "Latn",
    "hun": "Latn",
    "fin": "Latn",
    "swe": "Latn",
    "dan": "Latn",
    "tur": "Latn",
    "vie": "Latn",
    "ind": "Latn",
    "fil": "Latn",
    "swh": "Latn",
    "uzn": "Latn",
    "rus": "Cyrl",
    "ukr": "Cyrl",
    "bul": "Cyrl",
    "ell": "Grek",
    "heb": "Hebr",
    "arb": "Arab",
    "pes": "Arab",
    "urd": "Arab",
    "hin": "Deva",
    "mar": "Deva",
    "ben": "Beng",
    "tam": "Taml",
    "tel": "Telu",
    "tha": "Thai",
    "kor": "Hang",
    "jpn": "Jpan",
    "cmn": "Hans",
}

_CODE = re.compile(r"^(?P<lang>[A-Za-z]{3})(?:[_-](?P<script>[A-Za-z]{4}))?$")


def normalize_language(code: str) -> str:
    """Return the canonical FLORES+ code (``eng_Latn``) for ``code``.

    Accepts ``eng_Latn``, Goldfish-style ``eng_latn``, ``eng-Latn``, any
    letter case, and bare ISO 639-3 codes whose script is unambiguous
    (``eng``). Applies the known remaps (``zho_hans -> cmn_Hans``,
    ``swa -> swh_Latn``, ``tgl -> fil_Latn``, ``uzb -> uzn_Latn``).

    Raises:
        LanguageError: ``code`` is not a language code of that shape.
    """
    if not isinstance(code, str):
        raise LanguageError(
            f"language code must be a string like 'eng_Latn', got {code!r} "
            f"({type(code).__name__}); write the ISO 639-3 code and the ISO 15924 script"
        )
    match = _CODE.match(code.strip())
    if match is None:
        raise LanguageError(
            f"cannot parse language code {code!r}: expected an ISO 639-3 code and an "
            "ISO 15924 script such as 'eng_Latn', 'cmn_Hans' or Goldfish-style 'eng_latn'"
        )
    lang = match.group("lang").lower()
    script_raw = match.group("script")
    script = script_raw.title() if script_raw else None
    remapped = REMAPS.get((lang, script))
    if remapped is not None:
        return remapped
    if script is None:
        if lang not in DEFAULT_SCRIPTS:
            raise LanguageError(
                f"language code {code!r} has no script and interlingua does not know a "
                f"default script for {lang!r}: write it with its script, e.g. "
                f"'{lang}_Latn' or '{lang}_Cyrl'"
            )
        script = DEFAULT_SCRIPTS[lang]
    return f"{lang}_{script}"

"""The planners' key helpers (``PlanContext.ids_sha256`` / ``versioned``) give the bytes the keys always held:
store entries are found by key, so a helper that changed one byte would orphan every stored entry."""

from __future__ import annotations

import hashlib
import json

from interlingua import __version__
from interlingua.contract.keys import ids_sha256, versioned
from interlingua.data.corpora import ParallelCorpus


def _corpus() -> ParallelCorpus:
    ids = ("s1", "naïve-2", "s3")
    return ParallelCorpus(name="t", ids=ids, texts={"eng_Latn": ("a", "b", "c")})


def test_the_ids_key_is_the_sha256_of_the_ids_as_json() -> None:
    corpus = _corpus()
    whole = hashlib.sha256(json.dumps(["s1", "naïve-2", "s3"], ensure_ascii=False).encode("utf-8")).hexdigest()
    assert ids_sha256(corpus) == whole
    first = hashlib.sha256(json.dumps(["s1", "naïve-2"], ensure_ascii=False).encode("utf-8")).hexdigest()
    assert ids_sha256(corpus, 2) == first != whole


def test_a_versioned_payload_holds_the_package_version_and_nothing_else_changes() -> None:
    payload = {"format": 3, "n": None}
    assert versioned(payload) == {"version": __version__, "format": 3, "n": None}
    assert payload == {"format": 3, "n": None}  # the caller's dict is not changed

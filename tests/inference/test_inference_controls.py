"""The fixed shuffled control and per-pair seeds: deterministic, stable across versions, order-free."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from interlingua.analysis.inference import pair_seed, shuffle_permutation
from interlingua.core.errors import MeasureInputError


def test_shuffle_permutation_is_a_deterministic_permutation() -> None:
    p = shuffle_permutation(1012, 42)
    assert sorted(p.tolist()) == list(range(1012))
    np.testing.assert_array_equal(p, shuffle_permutation(1012, 42))
    np.testing.assert_array_equal(p, np.random.default_rng(42).permutation(1012))
    assert not np.array_equal(p, shuffle_permutation(1012, 43))


def test_shuffle_permutation_is_not_forced_to_be_a_derangement() -> None:
    """Fixed points occur as in a uniform permutation (mean 1): about 63% of seeds have at least one."""
    with_fixed = sum(bool(np.any(shuffle_permutation(200, s) == np.arange(200))) for s in range(400))
    assert 0.55 < with_fixed / 400 < 0.72  # 1 - 1/e = 0.632


def test_pair_seed_is_stable_and_order_free() -> None:
    s = pair_seed(42, "goldfish:eng_Latn", "goldfish:deu_Latn")
    # written out from the documented recipe, so stored runs keep their permutations across versions
    digest = hashlib.sha256(json.dumps([42, "goldfish:deu_Latn", "goldfish:eng_Latn"]).encode()).digest()
    assert s == int.from_bytes(digest[:8], "big") & (2**63 - 1)
    assert s == pair_seed(42, "goldfish:deu_Latn", "goldfish:eng_Latn")
    assert 0 <= s < 2**63
    assert pair_seed(42, "a", "b", ordered=True) != pair_seed(42, "b", "a", ordered=True)
    assert pair_seed(43, "a", "b") != pair_seed(42, "a", "b")
    assert pair_seed(42, "a", "bc") != pair_seed(42, "ab", "c")  # names cannot run into each other
    shuffle_permutation(10, s)  # usable as a seed


def test_bad_inputs_raise() -> None:
    with pytest.raises(MeasureInputError, match="n \\(number of rows\\) must be an integer >= 2"):
        shuffle_permutation(1, 0)
    with pytest.raises(MeasureInputError, match="seed must be a non-negative integer"):
        shuffle_permutation(10, -3)
    with pytest.raises(MeasureInputError, match="non-empty strings"):
        pair_seed(0, "", "b")
    with pytest.raises(MeasureInputError, match="seed"):
        pair_seed(-1, "a", "b")

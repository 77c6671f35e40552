"""The controls' behavioural rule is a test (Fisher's exact, Holm over the control's comparisons), not a trap.

Facts: the p-value is the hypergeometric one computed by hand; Holm agrees with statsmodels; one discordant trial
at a rate of 1.0 (30/30 against 29/30, the probe fit's identity control of the seven-relation run) passes; the
one-direction reflection's effect (0.95 against 0.25 at n = 30) and 30/30 against 20/30 among seven cells fail;
rows stored under the former Wilson-containment rule are judged afresh from their counts, and a stored failure
of another kind survives the re-judging.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from interlingua.patching.patch import (
    BEHAVIOUR_ALPHA,
    behaviour_tests,
    fisher_two_sided,
    holm_reject,
    identity_control_verdict,
    rejudge_control_rows,
    twin_control_verdict,
)

RELATIONS = ["capital", "official_language", "continent", "region", "currency", "calling_code", "domain"]


def _row(relation: str, condition: str, k: int, n: int = 30, *, answer: int | None = None) -> dict:
    """One summary row with k of n for flips and first-token success (whole-answer ``answer``, default k)."""
    whole = k if answer is None else answer
    return {
        "relation": relation,
        "donor_language": "deu",
        "target_language": "deu",
        "layer": 8,
        "condition": condition,
        "applicable": True,
        "n": n,
        "flips": k,
        "flip_rate": k / n,
        "success_rate": k / n,
        "success_answer_rate": whole / n,
        "map_dev": 0.0 if condition == "mapped" else math.nan,
        "map_site_cos": 1.0 if condition == "mapped" else math.nan,
        "map_site_p1": 1.0 if condition == "mapped" else math.nan,
    }


def _control(mapped: dict[str, int], within: dict[str, int], n: int = 30) -> pd.DataFrame:
    rows = []
    for rel in RELATIONS:
        rows += [_row(rel, "within", within.get(rel, 30), n), _row(rel, "mapped", mapped.get(rel, 30), n)]
    return pd.DataFrame(rows)


def _hypergeometric_two_sided(k1: int, n1: int, k2: int, n2: int) -> float:
    """Fisher's two-sided p by hand: every table with the margins, summed where no likelier than the observed."""
    total, col = n1 + n2, k1 + k2

    def prob(a: int) -> float:
        return math.comb(n1, a) * math.comb(n2, col - a) / math.comb(total, col)

    observed = prob(k1)
    lo, hi = max(0, col - n2), min(n1, col)
    return sum(prob(a) for a in range(lo, hi + 1) if prob(a) <= observed * (1 + 1e-7))


@pytest.mark.parametrize(
    "counts", [(30, 30, 29, 30), (29, 30, 27, 30), (30, 30, 20, 30), (28, 30, 8, 30), (5, 12, 9, 40)]
)
def test_fisher_p_is_the_hypergeometric_sum(counts):
    assert fisher_two_sided(*counts) == pytest.approx(_hypergeometric_two_sided(*counts), rel=1e-9)


def test_fisher_of_one_discordant_trial_at_the_ceiling_is_one():
    assert fisher_two_sided(30, 30, 29, 30) == pytest.approx(1.0)


def test_holm_agrees_with_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = [0.0001, 0.004, 0.012, 0.03, 0.2, 0.0024, 0.9, 0.011]
    for alpha in (0.05, 0.01):
        assert holm_reject(p, alpha) == list(multipletests(p, alpha=alpha, method="holm")[0])


def test_one_discordant_trial_passes_the_identity_control():
    # the seven-relation run's probe fit: capital 29/30 against 30/30, currency 27/30 against 29/30
    table = _control({"capital": 29, "currency": 27}, {"currency": 29})
    verdict = identity_control_verdict(table)
    assert verdict["identity_control"] == "passed", verdict["identity_control_note"]
    tests = behaviour_tests(table[table["applicable"]])
    assert len(tests) == 3 * len(RELATIONS) and not tests["rejected"].any()


def test_the_reflections_effect_fails_both_controls():
    # the one-direction reflection of the issue: directional success 0.95 within, 0.25 mapped, n = 30
    table = _control({"continent": round(0.25 * 30)}, {"continent": round(0.95 * 30)})
    verdict = identity_control_verdict(table)
    assert verdict["identity_control"] == "failed"
    assert "continent j=8: mapped success 0.267 vs within 0.933" in verdict["identity_control_note"]
    twin = twin_control_verdict(table, {8: 0.0}, {8: 1.0})
    assert twin["twin_control"] == "failed" and "Fisher p" in twin["twin_control_note"]


def test_thirty_against_twenty_fails_among_seven_cells():
    table = _control({"capital": 20}, {})
    tests = behaviour_tests(table[table["applicable"]])
    worst = tests.sort_values("p").iloc[0]
    assert worst["p"] < BEHAVIOUR_ALPHA / len(tests)  # Holm's first threshold, 0.05 / 21
    assert identity_control_verdict(table)["identity_control"] == "failed"


def test_a_difference_the_test_cannot_tell_at_n30_passes():
    # 30/30 against 25/30 (p 0.052 alone): not told apart at n = 30, the limit of a 30-pair cell
    assert identity_control_verdict(_control({"capital": 25}, {}))["identity_control"] == "passed"


def test_stored_rows_are_judged_afresh_from_their_counts():
    table = _control({"capital": 29}, {})
    old = "capital j=8: mapped success 0.967 vs within 1.000"
    rows = [{**r, "identity_control": "failed", "identity_control_note": old} for r in table.to_dict("records")]
    again = rejudge_control_rows(rows, "identity")
    assert {r["identity_control"] for r in again} == {"passed"} and again[0]["identity_control_note"] == ""
    # a failure of another kind (the patch site) is kept, and a behavioural one recomputed beside it
    other = "patch-site P@1 0.9 < 1"
    rows = [{**r, "identity_control_note": f"{old}; {other}"} for r in rows]
    assert rejudge_control_rows(rows, "identity")[0]["identity_control"] == "failed"
    assert rejudge_control_rows(rows, "identity")[0]["identity_control_note"] == other
    bad = _control({"capital": 20}, {}).to_dict("records")
    bad = [{**r, "twin_control": "passed", "twin_control_note": ""} for r in bad]
    judged = rejudge_control_rows(bad, "twin")[0]
    assert judged["twin_control"] == "failed" and judged["twin_control_note"].startswith("capital j=8: mapped flip")


def test_rejudging_a_fresh_verdict_changes_nothing():
    table = _control({"region": 19}, {})
    verdict = identity_control_verdict(table)
    rows = [{**r, **verdict} for r in table.to_dict("records")]
    assert rejudge_control_rows(rows, "identity")[0]["identity_control_note"] == verdict["identity_control_note"]

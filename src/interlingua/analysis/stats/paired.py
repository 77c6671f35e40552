"""Paired contrast of two arms measured on the same cells (e.g. two models on the same languages).

:func:`paired_contrast` reports the mean difference with a t interval, the
paired t-test and the Wilcoxon signed-rank test side by side, plus what the
sample size allows (the smallest attainable Wilcoxon p) and a plain-language
note for degenerate cases.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy
from scipy import stats as sps

from interlingua.analysis.stats.errors import StatsError, as_vector, check_level

__all__ = ["PairedContrast", "paired_contrast", "wilcoxon_auto_method"]


@dataclass(frozen=True)
class PairedContrast:
    """Result of :func:`paired_contrast`; ``d = a - b`` over the paired cells."""

    labels: tuple[str, str]
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    sd_diff: float
    level: float
    ci_low: float
    ci_high: float
    t: float
    df: int
    t_p: float
    wilcoxon_stat: float
    wilcoxon_p: float
    wilcoxon_method: str
    n_nonzero: int
    wilcoxon_min_p: float
    alpha: float
    note: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (labels as a list), e.g. for a JSON or CSV row."""
        out = asdict(self)
        out["labels"] = list(self.labels)
        return out


def _scipy_at_least(major: int, minor: int) -> bool:
    parts = scipy.__version__.split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def wilcoxon_auto_method(d: np.ndarray) -> str:
    """What scipy's ``wilcoxon(method='auto')`` resolves to for differences ``d``.

    scipy >= 1.15: more than 50 differences (zeros included) -> "asymptotic";
    otherwise no ties and no zeros -> "exact"; otherwise at most 13 -> "permutation"
    (all 2**n sign flips enumerated, so exact for the ties); otherwise "asymptotic".
    Older scipy: "exact" when n <= 50 without ties or zeros, else "asymptotic".
    """
    n = d.size
    nonzero = d[d != 0]
    has_zero = nonzero.size < n
    has_ties = np.unique(np.abs(nonzero)).size < nonzero.size
    if n > 50:
        return "asymptotic"
    if not (has_ties or has_zero):
        return "exact"
    if _scipy_at_least(1, 15) and n <= 13:
        return "permutation"
    return "asymptotic"


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def paired_contrast(
    a: Any,
    b: Any,
    *,
    level: float = 0.95,
    labels: tuple[str, str] = ("a", "b"),
    alpha: float = 0.05,
) -> PairedContrast:
    """Compare arm ``a`` with arm ``b`` over paired cells: differences ``d = a - b``.

    - ``ci_low``/``ci_high``: t interval of the mean difference at ``level``
      (mean_diff +- t_{(1+level)/2, n-1} sd_diff / sqrt(n)).
    - ``t``, ``t_p``: two-sided paired t-test, equal to ``scipy.stats.ttest_rel(a, b)``.
    - ``wilcoxon_stat``, ``wilcoxon_p``: two-sided signed-rank test, equal to
      ``scipy.stats.wilcoxon(a, b)`` with scipy's defaults: ``zero_method='wilcox'``
      (zero differences dropped), ``correction=False``, ``method='auto'``;
      ``wilcoxon_method`` says what 'auto' resolved to (see :func:`wilcoxon_auto_method`:
      with scipy >= 1.15, exact null for <= 50 differences without ties or zeros,
      sign-flip enumeration for <= 13 with ties/zeros, normal approximation otherwise).
    - ``wilcoxon_min_p``: the smallest two-sided Wilcoxon p attainable with
      ``n_nonzero`` nonzero differences, ``min(1, 2 / 2**n_nonzero)``.
    - ``note``: degenerate cases in words. All differences zero: the arms are
      identical, no test (t and Wilcoxon p are NaN; scipy would report p = 1 with
      warnings). All differences equal but nonzero (sd 0): t is infinite and
      t_p = 0, as scipy reports, which is degenerate; the note says so.

    StatsError: fewer than 2 pairs, unequal lengths, NaN/inf (positions named).
    """
    level = check_level(level)
    alpha = check_level(alpha, "alpha")
    name_a, name_b = (str(s) for s in labels)
    xa = as_vector(a, f"arm {name_a!r}")
    xb = as_vector(b, f"arm {name_b!r}")
    if xa.size != xb.size:
        raise StatsError(
            f"the arms must be paired cell by cell; {name_a!r} has {xa.size} values and {name_b!r} has {xb.size}. "
            "Align them on the same cells first."
        )
    n = int(xa.size)
    if n < 2:
        raise StatsError(
            f"a paired contrast needs at least 2 pairs; got {n}. Add cells or report the difference alone."
        )
    d = xa - xb
    mean_diff = float(d.mean())
    sd = float(d.std(ddof=1))
    df = n - 1
    half = float(sps.t.ppf(0.5 + level / 2, df)) * sd / math.sqrt(n)
    n_nonzero = int(np.count_nonzero(d))
    min_p = min(1.0, 2.0 / 2.0**n_nonzero)
    notes: list[str] = []
    nan = float("nan")
    if n_nonzero == 0:
        t = t_p = w_stat = w_p = nan
        method = "none"
        notes.append("all differences are zero: the arms are identical (no test)")
    else:
        with warnings.catch_warnings():  # scipy warns on sd = 0 (precision loss); the note says it instead
            warnings.simplefilter("ignore", RuntimeWarning)
            tt = sps.ttest_rel(xa, xb)
            wx = sps.wilcoxon(xa, xb)
        t, t_p = float(tt.statistic), float(tt.pvalue)
        w_stat, w_p = float(wx.statistic), float(wx.pvalue)
        method = wilcoxon_auto_method(d)
        if sd == 0.0:
            notes.append(
                f"every difference equals {_fmt(mean_diff)} (sd 0): the t statistic is infinite and its p = 0 is "
                "degenerate; rely on the Wilcoxon p"
            )
        if min_p > alpha:
            notes.append(
                f"{n_nonzero} nonzero differences: the smallest attainable Wilcoxon p is {min_p:.4g}; "
                f"it cannot be significant at {alpha:g}"
            )
    return PairedContrast(
        labels=(name_a, name_b),
        n=n,
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        mean_diff=mean_diff,
        sd_diff=sd,
        level=level,
        ci_low=mean_diff - half,
        ci_high=mean_diff + half,
        t=t,
        df=df,
        t_p=t_p,
        wilcoxon_stat=w_stat,
        wilcoxon_p=w_p,
        wilcoxon_method=method,
        n_nonzero=n_nonzero,
        wilcoxon_min_p=min_p,
        alpha=alpha,
        note="; ".join(notes),
    )

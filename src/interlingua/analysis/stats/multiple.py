"""Multiple-testing correction: Benjamini-Hochberg q-values.

One table of correlations tests many hypotheses; q-values control the false
discovery rate across the table (Benjamini & Hochberg 1995).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interlingua.analysis.stats.errors import StatsError

__all__ = ["benjamini_hochberg"]


def benjamini_hochberg(p: Any) -> np.ndarray:
    """Benjamini-Hochberg q-values of ``p``, same shape.

    q_(i) = min over j >= i of m p_(j) / j (p sorted ascending), clipped at 1:
    the step-up procedure, so q is monotone in p. NaN p's (untested cells)
    pass through as NaN and are not counted in m. Equals
    ``statsmodels.stats.multitest.multipletests(p, method='fdr_bh')[1]`` on
    the non-NaN entries.
    """
    try:
        arr = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatsError(f"p-values must be numeric; got values that do not convert to float ({exc}).") from exc
    flat = arr.ravel()
    tested = ~np.isnan(flat)
    values = flat[tested]
    if ((values < 0) | (values > 1)).any():
        bad = np.flatnonzero(tested)[(values < 0) | (values > 1)]
        raise StatsError(
            f"p-values must lie in [0, 1]; positions {bad[:10].tolist()} do not. Pass p-values, not statistics."
        )
    q = np.full(flat.shape, np.nan)
    m = values.size
    if m:
        order = np.argsort(values, kind="stable")
        scaled = values[order] * m / np.arange(1, m + 1)
        stepped = np.minimum.accumulate(scaled[::-1])[::-1]
        out = np.empty(m)
        out[order] = np.minimum(stepped, 1.0)
        q[tested] = out
    return q.reshape(arr.shape)

"""The field's other libraries next to interlingua: which peers each measure was checked against, and
``check(X, Y)``, which runs every installed peer on a user's arrays and says, per measure, whether
the numbers agree, differ by a named convention (and which measure id reproduces the peer), or differ.

Peers (optional; ``pip install "interlingua[peers]"``): pytorch-cka (``cka``), ckatorch, rsatoolbox,
hoggorm. A peer that is not installed is skipped and named in :attr:`CheckReport.missing`.
The agreement itself is tested in ``tests/oracles/``; ``docs/protocol.md`` ("Peers' conventions")
has the table of our defaults, the peers' conventions and how to reproduce each.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from interlingua.analysis.measures.validation import as_matrix, check_rows
from interlingua.core.errors import MeasureInputError

__all__ = ["PEERS", "PeerCheck", "CheckReport", "check", "peers_of", "check_table"]

#: Tolerance for peers that compute in float64 (the values are in [-1, 1]; both sides round at ~1e-15,
#: the summation orders differ, so 1e-9 leaves room for ill-conditioned but ordinary data).
TOL_FLOAT64 = 1e-9
#: pytorch-cka's minibatch path accumulates HSIC in float32 tensors (torch.zeros default dtype):
#: relative rounding ~6e-8 per addition, so 1e-5 on a value in [0, 1].
TOL_FLOAT32 = 1e-5
#: hoggorm's RVcoeff forms n x n Grams and multiplies them (O(n^3)): skipped above this n.
HOGGORM_MAX_N = 3000


def raw_gram_tolerance(x: np.ndarray, y: np.ndarray) -> float:
    """Tolerance for a float64 peer that forms the UNCENTRED Gram ``X X^T`` (pytorch-cka, ckatorch).

    With a large column mean the Gram's entries are ``r`` times the centred ones (``r``: the raw over
    the centred sum of squares) and the HSIC terms cancel down to the centred size, so the peer loses
    ``log10(r_x r_y)`` digits, accumulated over the n rows: ``eps r_x r_y n``. interlingua centres the
    columns first and keeps them (``tests/oracles`` shows it equals the peer fed centred data to 1e-12).
    """

    def ratio(a: np.ndarray) -> float:
        centred = float(((a - a.mean(axis=0)) ** 2).sum())
        return float((a**2).sum()) / centred if centred > 0 else 1.0

    return TOL_FLOAT64 + float(np.finfo(np.float64).eps) * ratio(x) * ratio(y) * x.shape[0]


@dataclass(frozen=True)
class Peer:
    """One peer library's check of one of our measures."""

    peer: str  # distribution name on PyPI
    module: str  # import name
    call: str  # what was called
    convention: str  # the peer's convention, in words
    reproduce: str  # our measure id that reproduces the peer ("" when our default already agrees)


#: Per measure id: the peers it was checked against in tests/oracles/ and each peer's convention.
PEERS: dict[str, list[Peer]] = {
    "cka_linear_biased": [
        Peer("hoggorm", "hoggorm", "RVcoeff([X - mean, Y - mean])", "RV coefficient; the caller centres", ""),
        Peer(
            "hoggorm",
            "hoggorm",
            "RVcoeff([X, Y])",
            "RV of the arrays as given (no centring)",
            "cka_linear_uncentered",
        ),
        Peer("ckatorch", "ckatorch", "cka_base(kernel='linear')", "biased HSIC, as ours", ""),
    ],
    "cka_linear_debiased": [
        Peer(
            "pytorch-cka",
            "cka",
            "cka_from_features(X, Y)",
            "unbiased HSIC (Song et al. 2012), value clipped to [0, 1]",
            "",
        ),
        Peer(
            "pytorch-cka",
            "cka",
            "compute_cka(..., DataLoader(batch_size=b))",
            "unbiased HSIC summed over minibatches of b rows (Nguyen et al. 2020), float32 sums, clipped to [0, 1]",
            "cka_linear_minibatch<b>",
        ),
        Peer("ckatorch", "ckatorch", "cka_base(kernel='linear', unbiased=True)", "unbiased HSIC, as ours", ""),
    ],
    "cka_rbf_median1.0": [
        Peer(
            "ckatorch",
            "ckatorch",
            "cka_base(kernel='rbf', threshold=t)",
            "sigma^2 = t^2 x median of all n^2 squared distances (Kornblith's notebook; torch's lower median)",
            "cka_rbf_kornblith<t>",
        ),
    ],
    "cca_mean_sq": [
        Peer(
            "Kornblith's notebook (not on PyPI)",
            "",
            "cca(X, Y): QR of the raw features",
            "no centring of the columns",
            "cca_mean_sq_uncentered",
        ),
    ],
    "procrustes_resid2_centered_unitnorm": [
        Peer(
            "netrep (not on PyPI: its published facts are tests)",
            "",
            "LinearMetric(alpha=1, score_method='angular')",
            "angular distance arccos(score), lower = more similar",
            "procrustes_angular",
        ),
        Peer(
            "netrep (not on PyPI: its published facts are tests)",
            "",
            "LinearMetric(alpha=1, score_method='euclidean')",
            "Euclidean residual of the centred data at their own scale",
            "procrustes_euclidean",
        ),
    ],
    "rsa_spearman_corr": [
        Peer("rsatoolbox", "rsatoolbox", "compare(calc_rdm(method='correlation'), method='spearman')", "as ours", ""),
        Peer(
            "rsatoolbox",
            "rsatoolbox",
            "compare(..., method='corr' | 'cosine' | 'tau-a' | 'rho-a')",
            "other RDM comparisons",
            "rsa_<pearson|cosine|kendalltaua|rhoa>_corr",
        ),
    ],
    "rsa_spearman_euclidean": [
        Peer(
            "rsatoolbox",
            "rsatoolbox",
            "compare(calc_rdm(method='euclidean'), method='spearman')",
            "squared distance / width: the same ranks",
            "",
        ),
        Peer(
            "rsatoolbox",
            "rsatoolbox",
            "compare(calc_rdm(method='euclidean'), method='corr' | 'cosine' | 'tau-a' | 'rho-a')",
            "squared Euclidean RDM (matters for 'corr' and 'cosine')",
            "rsa_<pearson|cosine|kendalltaua|rhoa>_sqeuclidean",
        ),
    ],
}


def peers_of(measure_id: str) -> list[dict[str, str]]:
    """The peers ``measure_id`` was checked against, each with its convention (JSON-safe)."""
    return [asdict(p) for p in PEERS.get(measure_id, [])]


# --------------------------------------------------------------------------- check


@dataclass(frozen=True)
class PeerCheck:
    """One peer value next to ours, with the verdict."""

    peer: str
    call: str
    measure: str  # our default measure that means the same thing
    ours: float
    theirs: float
    difference: float  # theirs - ours
    verdict: str  # "agrees", "differs by convention: ...", "differs"
    convention: str = ""  # our id reproducing the peer's convention, when there is one
    convention_value: float = math.nan
    tolerance: float = TOL_FLOAT64


@dataclass
class CheckReport:
    """:func:`check`'s result: the rows, the peers that are not installed, and the input shapes."""

    rows: list[PeerCheck]
    missing: list[str]
    n: int
    p: int
    q: int
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe: nan becomes None."""

        def clean(v: Any) -> Any:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        return {
            "n": self.n,
            "p": self.p,
            "q": self.q,
            "missing": self.missing,
            "notes": self.notes,
            "rows": [{k: clean(v) for k, v in asdict(r).items()} for r in self.rows],
        }


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _ours(measure_id: str, x: np.ndarray, y: np.ndarray) -> float:
    from interlingua.analysis.measures import MeasureWarning, get_measure

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        try:
            return float(get_measure(measure_id)(x, y))
        except MeasureInputError:
            return math.nan


def _verdict(
    peer: str,
    call: str,
    measure: str,
    theirs: float,
    x: np.ndarray,
    y: np.ndarray,
    *,
    tol: float,
    convention: str = "",
    why: str = "",
    clip: bool = False,
) -> PeerCheck:
    """Compare ``theirs`` with our ``measure`` and, failing that, with the ``convention`` id."""
    ours = _ours(measure, x, y)
    conv = _ours(convention, x, y) if convention else math.nan
    if clip:  # the peer clips to [0, 1]: a clipped value of ours is that convention, not a disagreement
        ours_c, conv_c = min(max(ours, 0.0), 1.0), min(max(conv, 0.0), 1.0)
    else:
        ours_c, conv_c = ours, conv
    if abs(theirs - ours) <= tol:
        verdict = "agrees"
    elif clip and abs(theirs - ours_c) <= tol:
        verdict = f"differs by convention: {peer} clips to [0, 1] (ours {ours:.6g} is outside)"
    elif convention and abs(theirs - conv_c) <= tol:
        verdict = f"differs by convention: {why} (reproduce with {convention})"
    else:
        verdict = "differs"
    return PeerCheck(peer, call, measure, ours, theirs, theirs - ours, verdict, convention, conv, tol)


def _run_pytorch_cka(x: np.ndarray, y: np.ndarray, batch_size: int | None) -> list[PeerCheck]:
    import torch
    from cka import cka_from_features, compute_cka

    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    rows = [
        _verdict(
            "pytorch-cka",
            "cka_from_features(X, Y)",
            "cka_linear_debiased",
            float(cka_from_features(tx, ty)),
            x,
            y,
            tol=raw_gram_tolerance(x, y),
            clip=True,
        )
    ]
    if batch_size:
        theirs = float(pytorch_cka_minibatch(x, y, batch_size, compute_cka))
        rows.append(
            _verdict(
                "pytorch-cka",
                f"compute_cka(..., DataLoader(batch_size={batch_size}))",
                "cka_linear_debiased",
                theirs,
                x,
                y,
                tol=TOL_FLOAT32,
                convention=f"cka_linear_minibatch{batch_size}",
                why=f"HSIC summed over minibatches of {batch_size} rows",
                clip=True,
            )
        )
    return rows


def pytorch_cka_minibatch(x: np.ndarray, y: np.ndarray, batch_size: int, compute_cka: Callable[..., Any]) -> float:
    """pytorch-cka's minibatch CKA of two arrays: each side is the output of an embedding lookup of the
    row indices, fed by a DataLoader of ``batch_size`` consecutive rows (no shuffling)."""
    import torch
    from torch import nn

    m1 = nn.Sequential(nn.Embedding.from_pretrained(torch.from_numpy(x)))
    m2 = nn.Sequential(nn.Embedding.from_pretrained(torch.from_numpy(y)))
    rows: Any = torch.arange(x.shape[0])  # a tensor is a map-style dataset of its rows
    loader: Any = torch.utils.data.DataLoader(rows, batch_size=batch_size, shuffle=False)
    return float(compute_cka(m1, m2, loader, layers=["0"], progress=False)[0][0, 0])


def _run_ckatorch(x: np.ndarray, y: np.ndarray) -> list[PeerCheck]:
    import ckatorch
    import torch

    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    out = []
    for debiased in (False, True):
        mid = "cka_linear_debiased" if debiased else "cka_linear_biased"
        theirs = float(ckatorch.cka_base(tx, ty, kernel="linear", unbiased=debiased))
        out.append(
            _verdict(
                "ckatorch",
                f"cka_base(kernel='linear', unbiased={debiased})",
                mid,
                theirs,
                x,
                y,
                tol=raw_gram_tolerance(x, y),
            )
        )
    theirs = float(ckatorch.cka_base(tx, ty, kernel="rbf", threshold=1.0))
    out.append(
        _verdict(
            "ckatorch",
            "cka_base(kernel='rbf', threshold=1.0)",
            "cka_rbf_median1.0",
            theirs,
            x,
            y,
            tol=TOL_FLOAT64,
            convention="cka_rbf_kornblith1.0",
            why="bandwidth sigma^2 = median of all n^2 squared distances (Kornblith)",
        )
    )
    if out[-1].verdict == "differs" and abs(theirs - _rbf_cka_lower_median(x, y)) <= TOL_FLOAT64:
        out[-1] = replace(
            out[-1],
            verdict="differs by convention: ckatorch's torch.median takes the lower of the two middle squared "
            "distances (n even), numpy's median their mean; for odd n it equals cka_rbf_kornblith1.0",
        )
    return out


def _rbf_cka_lower_median(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith's RBF CKA (threshold 1) with the median of the n^2 squared distances taken as torch.median
    does: the lower of the two middle values when n^2 is even (ckatorch's bandwidth)."""
    from interlingua.analysis.measures.cka import center_gram, cka_from_grams

    grams = []
    for a in (x, y):
        ac = a - a.mean(axis=0)
        sq = np.einsum("ij,ij->i", ac, ac)
        d2 = np.clip(sq[:, None] + sq[None, :] - 2.0 * (ac @ ac.T), 0.0, None)
        np.fill_diagonal(d2, 0.0)
        med = float(np.sort(d2.ravel())[(d2.size - 1) // 2])
        if not med > 0:
            return math.nan
        grams.append(center_gram(np.exp(-d2 / (2.0 * med))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cka_from_grams(grams[0], grams[1])


def _run_hoggorm(x: np.ndarray, y: np.ndarray) -> list[PeerCheck]:
    import hoggorm

    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    return [
        _verdict(
            "hoggorm",
            "RVcoeff([X - mean, Y - mean])",
            "cka_linear_biased",
            float(hoggorm.RVcoeff([xc, yc])[0, 1]),
            x,
            y,
            tol=TOL_FLOAT64,
        ),
        _verdict(
            "hoggorm",
            "RVcoeff([X, Y])",
            "cka_linear_biased",
            float(hoggorm.RVcoeff([x, y])[0, 1]),
            x,
            y,
            tol=TOL_FLOAT64,
            convention="cka_linear_uncentered",
            why="hoggorm does not centre",
        ),
        _verdict(
            "hoggorm",
            "RV2coeff([X - mean, Y - mean])",
            "rv_modified",
            float(hoggorm.RV2coeff([xc, yc])[0, 1]),
            x,
            y,
            tol=TOL_FLOAT64,
        ),
    ]


#: rsatoolbox comparison method -> our comparison name
RSATOOLBOX_COMPARISONS = {
    "spearman": "spearman",
    "corr": "pearson",
    "cosine": "cosine",
    "tau-a": "kendalltaua",
    "rho-a": "rhoa",
}


def rsatoolbox_value(x: np.ndarray, y: np.ndarray, rdm_method: str, comparison: str) -> float:
    """rsatoolbox's ``compare(calc_rdm(X), calc_rdm(Y), method=comparison)`` on the rows of two arrays."""
    from rsatoolbox.data import Dataset
    from rsatoolbox.rdm import calc_rdm, compare

    rx: Any = calc_rdm(Dataset(x), method=rdm_method)  # one RDMs object for one dataset
    ry: Any = calc_rdm(Dataset(y), method=rdm_method)
    return float(np.asarray(compare(rx, ry, method=comparison)).ravel()[0])


def _run_rsatoolbox(x: np.ndarray, y: np.ndarray) -> list[PeerCheck]:
    out = []
    for rdm_method, ours_rdm, conv_rdm in (("correlation", "corr", "corr"), ("euclidean", "euclidean", "sqeuclidean")):
        for method, ours_cmp in RSATOOLBOX_COMPARISONS.items():
            theirs = rsatoolbox_value(x, y, rdm_method, method)
            call = f"compare(calc_rdm(method='{rdm_method}'), method='{method}')"
            if ours_cmp == "spearman":
                out.append(_verdict("rsatoolbox", call, f"rsa_spearman_{ours_rdm}", theirs, x, y, tol=TOL_FLOAT64))
                continue
            conv = f"rsa_{ours_cmp}_{conv_rdm}"
            why = f"RDM comparison '{method}'" + (" of squared Euclidean RDMs" if conv_rdm == "sqeuclidean" else "")
            out.append(
                _verdict(
                    "rsatoolbox",
                    call,
                    f"rsa_spearman_{ours_rdm}",
                    theirs,
                    x,
                    y,
                    tol=TOL_FLOAT64,
                    convention=conv,
                    why=why,
                )
            )
    return out


#: peer name -> (import name, runner)
RUNNERS: dict[str, tuple[str, Callable[..., list[PeerCheck]]]] = {
    "pytorch-cka": ("cka", _run_pytorch_cka),
    "ckatorch": ("ckatorch", _run_ckatorch),
    "hoggorm": ("hoggorm", _run_hoggorm),
    "rsatoolbox": ("rsatoolbox", _run_rsatoolbox),
}


def check(X: Any, Y: Any, *, batch_size: int | None = None, peers: list[str] | None = None) -> CheckReport:
    """Run every installed peer on ``X`` (n x p) and ``Y`` (n x q) next to interlingua.

    Returns a :class:`CheckReport` whose rows hold our value, the peer's, their difference and a
    verdict: ``agrees`` (within the peer's precision), ``differs by convention: ...`` (naming the
    convention and the measure id of ours that reproduces it) or ``differs``. ``batch_size`` adds
    pytorch-cka's minibatch estimator with that batch size. ``peers`` restricts the peers run.
    Bad input (not 2-D, non-finite, mismatched rows, fewer than 4 rows) raises
    :class:`~interlingua.core.errors.MeasureInputError`.
    """
    x, y = as_matrix(X, "X"), as_matrix(Y, "Y")
    n = check_rows(x, y, min_n=4, what="check")
    if batch_size is not None and (int(batch_size) != batch_size or batch_size < 4):
        raise MeasureInputError(f"check: batch_size must be an integer >= 4; got {batch_size}.")
    if batch_size is not None and 0 < n % batch_size < 4:
        raise MeasureInputError(
            f"check: n={n} rows leave a last batch of {n % batch_size} < 4 rows, whose unbiased HSIC is undefined "
            "(pytorch-cka raises); pick a batch size for which n % batch_size is 0 or at least 4."
        )
    names = list(RUNNERS) if peers is None else peers
    unknown = sorted(set(names) - set(RUNNERS))
    if unknown:
        raise MeasureInputError(f"check: unknown peer(s) {unknown}; known: {sorted(RUNNERS)}.")
    rows: list[PeerCheck] = []
    missing: list[str] = []
    notes: list[str] = []
    for name in names:
        module, runner = RUNNERS[name]
        if not _installed(module):
            missing.append(name)
            continue
        if name == "hoggorm" and n > HOGGORM_MAX_N:
            notes.append(f"hoggorm skipped: its RVcoeff multiplies n x n matrices (O(n^3)); n={n} > {HOGGORM_MAX_N}.")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows.extend(runner(x, y, batch_size) if name == "pytorch-cka" else runner(x, y))
        except Exception as exc:  # a peer's own failure on these data is reported, not raised
            notes.append(f"{name} failed on these arrays: {type(exc).__name__}: {exc}")
    return CheckReport(rows, missing, n, x.shape[1], y.shape[1], notes)


def check_table(report: CheckReport) -> str:
    """The report as an aligned plain-text table, with the missing peers and notes after it."""
    head = ("peer", "call", "interlingua measure", "ours", "theirs", "difference", "verdict")
    cells = [head] + [
        (r.peer, r.call, r.measure, f"{r.ours:.10g}", f"{r.theirs:.10g}", f"{r.difference:.3g}", r.verdict)
        for r in report.rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head) - 1)]
    lines = [f"n = {report.n} rows, X width {report.p}, Y width {report.q}"]
    for i, c in enumerate(cells):
        lines.append("  ".join([v.ljust(w) for v, w in zip(c, widths)] + [c[-1]]).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in [*widths, len(c[-1])]))
    if report.missing:
        lines.append(f'\nnot installed (pip install "interlingua[peers]"): {", ".join(report.missing)}')
    lines.extend(report.notes)
    return "\n".join(lines)

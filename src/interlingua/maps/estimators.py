"""Map estimators: fit ``f`` so that ``f(X) ~ Y`` for paired sentence representations.

One interface (scikit-learn conventions):

- ``fit(X, Y) -> self``; X is ``(n, p)`` (source), Y ``(n, q)`` (target),
  row i of both the same sentence; computed in float64;
- ``transform(X) -> (m, q)`` float64;
- ``score(X, Y) -> float``: ``1 - ||Y - f(X)||_F^2 / ||Y - mean(Y)||_F^2``
  (the variance-weighted R^2: one minus the relative MSE, means over the given rows);
- ``fit_many(X, [Y1, Y2, ...]) -> [map, ...]``: one map per target sharing
  the work that depends on X only (ridge and affine share their decompositions);
- ``save(path, metadata=...)`` / ``Map.load(path)`` (also :func:`load_map`):
  a safetensors file with the hyper-parameters, fit details and a sha256 per
  tensor in the header; ``key``: a content key over the estimator, its
  hyper-parameters and the fitted tensors.

Estimators (registry ids, :func:`get_map`):

``identity``
    ``f(x) = x``. Needs equal widths (``MapInputError`` otherwise).
``procrustes`` / ``procrustes_scaled``
    Centring (``center=True``, the default): both sides are centred with their
    training means and the translation is part of the map,
    ``f(x) = mu_y + s (x - mu_x) R``. ``R = U V^T`` from the thin SVD
    ``X_c^T Y_c = U S V^T`` in float64: orthogonal when p == q, semi-orthogonal
    otherwise (p < q: orthonormal rows, an isometric embedding; p > q:
    orthonormal columns, an orthogonal projection onto q directions followed by
    an isometry). ``s = 1``, or with ``scale=True`` the least-squares isotropic
    scale ``s = sum(S) / ||X_c||_F^2``. ``center=False`` fits ``f(x) = s x R``
    on the raw rows. When ``X_c^T Y_c`` is rank deficient the rotation is not
    unique; the SVD's choice is used and a :class:`MapWarning` says so.
    :meth:`Procrustes.reverse` gives the map fitted the other way (Y to X) from
    the same SVD: ``R^T`` (exactly what a fit on (Y, X) computes).
``procrustes_span``
    Equal widths only. The same objective as ``procrustes`` (every optimal
    rotation of it), but where the training rows leave the rotation free (rank
    of ``X_c^T Y_c`` below the width: fewer centred rows than the width, or
    collinear columns) it takes the optimal rotation CLOSEST TO THE IDENTITY
    instead of the SVD's arbitrary choice: with the full SVD ``M = X_c^T Y_c =
    U S V^T`` of rank r, ``R = U_r V_r^T + U_0 W V_0^T`` where ``W = Q P^T``
    from the SVD ``V_0^T U_0 = P Sigma Q^T`` maximises ``trace(R)``. Every
    direction orthogonal to both sides' centred training rows is then mapped
    exactly to itself (identity on the complement of the training span), a map
    of a side onto itself is exactly the identity, and on full-rank data it is
    plain Procrustes. Use it within one model (two languages share the basis)
    when there are fewer sentences than the width; across models the identity
    on the unseen directions is no more meaningful than no map.
``affine``
    Least squares with an intercept: ``f(x) = mu_y + (x - mu_x) W``, W from a
    QR factorisation of the centred training rows. Needs more training rows
    than input width (``n_train > p``): ``MapInputError`` otherwise (use
    ``ridge``). Collinear columns give the minimum-norm solution with a warning.
``ridge``
    ``W(lambda) = (X_c^T X_c + lambda I)^{-1} X_c^T Y_c`` with an unpenalised
    intercept. lambda is chosen by inner k-fold cross-validation (``cv=5``,
    seeded, :func:`interlingua.maps.folds.kfold` over the training rows)
    over a grid: by default ``relative_alphas`` times the mean eigenvalue of
    ``X_c^T X_c`` (``||X_c||_F^2 / p``); ``alphas=`` gives absolute values,
    ``alpha=`` a fixed value without CV. The criterion is the mean over inner
    folds of the validation mean squared error (over rows and outputs); the
    first best in grid order wins. Each inner fold costs ONE eigendecomposition
    of its centred training Gram (downdated from the full one; the n x n Gram
    when p > n), reused for every lambda and every target (``fit_many``).
``mlp``
    One hidden layer (torch; :mod:`interlingua.maps.mlp`).
"""

from __future__ import annotations

import abc
import hashlib
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from interlingua.core.named import Registry
from interlingua.maps import _linalg
from interlingua.maps._checks import as_matrix, check_finite_output, check_pair
from interlingua.maps.errors import MapFileError, MapInputError, MapWarning

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "FORMAT",
    "Underdetermined",
    "Map",
    "Identity",
    "Procrustes",
    "ProcrustesSpan",
    "Affine",
    "Ridge",
    "DEFAULT_RELATIVE_ALPHAS",
    "MAPS",
    "get_map",
    "list_maps",
    "register_map",
    "load_map",
]

FORMAT = "interlingua.map/1"
#: what an estimator does with training rows that do not determine the map (see :attr:`Map.underdetermined`)
Underdetermined = Literal["refuse", "warn", "resolve"]
DEFAULT_RELATIVE_ALPHAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def _warn(message: str) -> None:
    warnings.warn(message, MapWarning, stacklevel=3)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(obj: Any) -> str:
    def default(o: Any) -> Any:
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        raise TypeError(f"cannot write {type(o).__name__} to a map header")

    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=default, allow_nan=True)


class Map(abc.ABC):
    """Base class: a map from a source space (width p) to a target space (width q).

    Subclasses declare ``_defaults`` (hyper-parameters and their defaults),
    implement ``_fit(x, y)``, ``_transform(x)``, ``_state()`` and
    ``_set_state(arrays)``. Fitted attributes end in ``_``; ``fit_info_``
    records what the fit decided (chosen lambda, rank, epochs, ...).
    """

    _defaults: ClassVar[dict[str, Any]] = {}
    #: f(mean of rows) == mean of f(rows) (an affine map): the evaluation then centres mapped rows cheaply
    is_affine: ClassVar[bool] = True
    #: what a fit does when its training rows do not determine the map (fewer rows than the width): "refuse"
    #: (raises MapInputError), "warn" (fits one of the solutions, with a MapWarning) or "resolve" (one answer
    #: by a stated rule: a penalty, the rotation closest to the identity, a seed, or nothing to fit). None:
    #: undeclared. :func:`interlingua.testing.check_map_estimator` holds every estimator to its declaration.
    underdetermined: ClassVar[Underdetermined | None] = None
    #: fitted on ``(X, X Q)`` for an orthogonal ``Q`` (rows spanning the width), the map is ``x -> x Q``; a
    #: penalised fit (``fit_info_["alpha"]``) the ridge shrinkage of ``Q`` that its penalty implies (see
    #: :mod:`interlingua.maps.planted`). Checked on held-out rows by :mod:`interlingua.testing`.
    recovers_rotation: ClassVar[bool] = False

    def __init__(self, **params: Any) -> None:
        unknown = sorted(set(params) - set(self._defaults))
        if unknown:
            raise MapInputError(
                f"{type(self).__name__} has no parameter(s) {unknown}; its parameters are {sorted(self._defaults)}."
            )
        self._params = {**self._defaults, **params}
        self._validate_params()
        self.n_features_in_: int | None = None
        self.n_features_out_: int | None = None
        self.fit_info_: dict[str, Any] = {}
        self.metadata_: dict[str, Any] | None = None  # the header metadata of a loaded map

    # -- identity of the estimator ------------------------------------------------------------
    @property
    def name(self) -> str:
        """The registry id this configuration corresponds to (e.g. ``"procrustes_scaled"``)."""
        return _CLASS_NAMES.get(type(self), type(self).__name__.lower())

    @property
    def params(self) -> dict[str, Any]:
        """Hyper-parameters (JSON-ready copy)."""
        return json.loads(_canonical(self._params))

    def _validate_params(self) -> None:  # noqa: B027 (an optional hook: the default accepts any hyper-parameters)
        """Check the hyper-parameters, raising MapInputError; estimators with constraints override it."""

    def clone(self) -> Self:
        """An unfitted copy with the same hyper-parameters."""
        return type(self)(**self._params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        state = "fitted" if self.is_fitted else "unfitted"
        return f"{type(self).__name__}({args}) [{state}]"

    @property
    def is_fitted(self) -> bool:
        return self.n_features_in_ is not None

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise MapInputError(f"this {self.name} map is not fitted yet; call fit(X, Y) first.")

    # -- the interface ---------------------------------------------------------------------
    def fit(self, X: Any, Y: Any) -> Self:
        """Fit the map on paired rows (row i of X and row i of Y are one sentence); returns self."""
        x, y = check_pair(X, Y, ("X (source)", "Y (target)"))
        return self._fit_checked(x, y)

    def _fit_checked(self, x: np.ndarray, y: np.ndarray) -> Self:
        self.fit_info_ = {"n_train": int(x.shape[0])}
        self._fit(x, y)
        self.n_features_in_, self.n_features_out_ = int(x.shape[1]), int(y.shape[1])
        return self

    def fit_many(self, X: Any, Ys: Sequence[Any]) -> list[Map]:
        """One fitted copy per target in ``Ys`` (same source rows); estimators share X-only work where they can."""
        x = as_matrix(X, "X (source)")
        ys = [check_pair(x, Y, ("X (source)", f"Ys[{i}]"))[1] for i, Y in enumerate(Ys)]
        return [self.clone()._fit_checked(x, y) for y in ys]

    def transform(self, X: Any) -> np.ndarray:
        """``f(X)``: an ``(m, q)`` float64 array."""
        self._check_fitted()
        x = as_matrix(X, "X")
        if x.shape[1] != self.n_features_in_:
            raise MapInputError(
                f"this map was fitted on width {self.n_features_in_} but X has width {x.shape[1]}; "
                "pass the same layer of the same model it was fitted on."
            )
        return check_finite_output(self._transform(x), f"the {self.name} map")

    def fit_transform(self, X: Any, Y: Any) -> np.ndarray:
        return self.fit(X, Y).transform(X)

    def score(self, X: Any, Y: Any) -> float:
        """``1 - ||Y - f(X)||_F^2 / ||Y - mean(Y)||_F^2`` over the given rows (nan when Y is constant, and nan
        with a :class:`MapWarning` when the value is below float64's range instead of ``-inf``)."""
        x, y = check_pair(X, Y, ("X", "Y"), min_rows=1)
        resid = y - self.transform(x)
        yc = y - y.mean(axis=0)
        # R^2 is a ratio: one exact power-of-two scale for both terms keeps their squares inside float64
        peak = max(float(np.max(np.abs(resid))), float(np.max(np.abs(yc))))
        if peak > 0 and math.isfinite(peak):
            f = math.ldexp(1.0, -math.frexp(peak)[1])
            resid, yc = resid * f, yc * f
        den = float(np.einsum("ij,ij->", yc, yc))
        if not den > 0:
            return math.nan
        value = 1.0 - float(np.einsum("ij,ij->", resid, resid)) / den
        if not math.isfinite(value):
            _warn(
                f"the {self.name} map's R^2 on these rows is below -1e308: its residuals are more than ~1e154 times "
                "the spread of Y (e.g. X at another magnitude than the rows it was fitted on, or an outlier row); "
                "returned nan. Check the scale of X and Y against the fitting rows."
            )
            return math.nan
        return value

    # -- subclass hooks -----------------------------------------------------------------------
    @abc.abstractmethod
    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        """Implemented by each estimator."""

    @abc.abstractmethod
    def _transform(self, x: np.ndarray) -> np.ndarray:
        """Implemented by each estimator."""

    @abc.abstractmethod
    def _state(self) -> dict[str, np.ndarray]:
        """Implemented by each estimator."""

    @abc.abstractmethod
    def _set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Implemented by each estimator."""

    # -- persistence ------------------------------------------------------------------------------
    def _tensors(self) -> dict[str, np.ndarray]:
        return {k: np.ascontiguousarray(v) for k, v in sorted(self._state().items())}

    @staticmethod
    def _checksums(tensors: Mapping[str, np.ndarray]) -> dict[str, str]:
        return {k: _sha256(v.tobytes()) for k, v in sorted(tensors.items())}

    def _key_fields(self, checksums: Mapping[str, str]) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "class": type(self).__name__,
            "params": self.params,
            "n_features_in": self.n_features_in_,
            "n_features_out": self.n_features_out_,
            "layout": {k: [str(v.dtype), list(v.shape)] for k, v in sorted(self._tensors().items())},
            "checksums": dict(checksums),
        }

    @property
    def key(self) -> str:
        """Content key (sha256 hex) of the fitted map: estimator class, hyper-parameters, widths and tensor bytes."""
        self._check_fitted()
        return _sha256(_canonical(self._key_fields(self._checksums(self._tensors()))).encode("utf-8"))

    def save(self, path: str | Path, *, metadata: Mapping[str, Any] | None = None) -> Path:
        """Write the fitted map to ``path`` (safetensors, written atomically); returns the path.

        The header holds ``format``, ``estimator`` (registry id), ``class``,
        ``params`` and ``fit_info`` (JSON), the widths, ``metadata`` (JSON: your
        provenance, e.g. models, languages, layers, fold), a sha256 per tensor,
        the content ``key`` and ``header_sha256`` over all of it.
        """
        from safetensors.numpy import save_file

        from interlingua.core.store import atomic_write

        self._check_fitted()
        tensors = self._tensors()
        checksums = self._checksums(tensors)
        header = {
            "format": FORMAT,
            "estimator": self.name,
            "class": type(self).__name__,
            "params": _canonical(self.params),
            "fit_info": _canonical(self.fit_info_),
            "n_features_in": str(self.n_features_in_),
            "n_features_out": str(self.n_features_out_),
            "metadata": _canonical(dict(metadata or {})),
            "checksums": _canonical(checksums),
            "key": _sha256(_canonical(self._key_fields(checksums)).encode("utf-8")),
        }
        header["header_sha256"] = _sha256(_canonical(header).encode("utf-8"))
        path = Path(path)
        atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=header))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Map:
        """Read a map written by :meth:`save`, verifying every checksum; ``Procrustes.load`` also checks the class."""
        m = load_map(path)
        if cls is not Map and not isinstance(m, cls):
            raise MapFileError(f"{path} holds a {type(m).__name__} map, not a {cls.__name__}; use load_map(path).")
        return m


def load_map(path: str | Path) -> Map:
    """Read a map file written by :meth:`Map.save`; returns the fitted map with ``metadata_`` set.

    Raises :class:`MapFileError` when the file is missing, not a map, or its
    header, tensors or key do not match what was written.
    """
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise MapFileError(f"map file {path} does not exist; fit and save it first (fit_and_save).")
    try:
        with safe_open(str(path), framework="numpy") as fh:
            header = dict(fh.metadata() or {})
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 (a safe_open handle is not iterable)
    except Exception as exc:
        raise MapFileError(f"{path} is not a readable safetensors file ({type(exc).__name__}: {exc}).") from None
    if header.get("format") != FORMAT:
        raise MapFileError(
            f"{path} is not an interlingua map file (format {header.get('format')!r}, expected {FORMAT!r})."
        )
    digest = header.pop("header_sha256", None)
    if digest != _sha256(_canonical(header).encode("utf-8")):
        raise MapFileError(f"{path}: the header fails its checksum (edited or damaged); refit and save the map again.")
    cls = _CLASSES.get(header.get("class", ""))
    if cls is None:
        raise MapFileError(f"{path}: unknown map class {header.get('class')!r}; known: {sorted(_CLASSES)}.")
    try:
        stored = json.loads(header["checksums"])
        params = json.loads(header["params"])
        fit_info = json.loads(header["fit_info"])
        metadata = json.loads(header["metadata"])
        n_in, n_out = int(header["n_features_in"]), int(header["n_features_out"])
    except (KeyError, ValueError) as exc:
        raise MapFileError(f"{path}: incomplete map header ({exc}).") from None
    if Map._checksums(tensors) != stored:
        raise MapFileError(f"{path}: tensor bytes do not match their checksums (damaged on disk); refit the map.")
    m = cls(**params)
    m._set_state(tensors)
    m.n_features_in_, m.n_features_out_ = n_in, n_out
    m.fit_info_ = fit_info
    m.metadata_ = metadata
    if m.key != header.get("key"):
        raise MapFileError(f"{path}: content key mismatch (written by another version?); refit and save the map.")
    return m


# -- linear maps -------------------------------------------------------------------------------


class _Linear(Map):
    """``f(x) = x @ coef_ + intercept_`` (float64)."""

    coef_: np.ndarray
    intercept_: np.ndarray

    def _transform(self, x: np.ndarray) -> np.ndarray:
        out = x @ self.coef_
        out += self.intercept_
        return out

    def _state(self) -> dict[str, np.ndarray]:
        return {"coef": self.coef_, "intercept": self.intercept_}

    def _set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        self.coef_ = np.asarray(arrays["coef"], dtype=np.float64)
        self.intercept_ = np.asarray(arrays["intercept"], dtype=np.float64)


def _centre(a: np.ndarray, center: bool = True) -> tuple[np.ndarray, np.ndarray]:
    if not center:
        return a, np.zeros(a.shape[1])
    mean = a.mean(axis=0)
    return a - mean, mean


class Identity(Map):
    """``f(x) = x``: the no-map baseline; needs equal widths."""

    underdetermined: ClassVar[Underdetermined | None] = "resolve"  # nothing is fitted

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        if x.shape[1] != y.shape[1]:
            raise MapInputError(
                f"the identity map needs equal widths; source has {x.shape[1]} and target {y.shape[1]} "
                "(use 'procrustes' to map between different widths)."
            )

    def _transform(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def _state(self) -> dict[str, np.ndarray]:
        return {}

    def _set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        pass


class Procrustes(_Linear):
    """Orthogonal / semi-orthogonal Procrustes, optionally with isotropic scale (see the module docstring)."""

    underdetermined: ClassVar[Underdetermined | None] = "warn"  # the SVD's rotation
    recovers_rotation: ClassVar[bool] = True

    _defaults: ClassVar[dict[str, Any]] = {"center": True, "scale": False}

    def _validate_params(self) -> None:
        for k in ("center", "scale"):
            if not isinstance(self._params[k], bool):
                raise MapInputError(f"Procrustes parameter {k} must be True or False; got {self._params[k]!r}.")

    @property
    def name(self) -> str:
        base = "procrustes_scaled" if self._params["scale"] else "procrustes"
        return base if self._params["center"] else base + "_uncentred"

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        center = self._params["center"]
        xc, mx = _centre(x, center)
        yc, my = _centre(y, center)
        nx2, ny2 = float(np.einsum("ij,ij->", xc, xc)), float(np.einsum("ij,ij->", yc, yc))
        for side, v in (("X (source)", nx2), ("Y (target)", ny2)):
            if not v > 0:
                raise MapInputError(
                    f"Procrustes is undefined: {side} has no variance"
                    f"{' (every training row equal)' if center else ' (every entry zero)'}; check this layer's "
                    "representations."
                )
        u, s, vt = _linalg.svd(xc.T @ yc)
        rank = int(np.count_nonzero(s > s[0] * max(xc.shape[1], yc.shape[1]) * np.finfo(np.float64).eps))
        self.rotation_ = self._rotation(u, s, vt, rank, x.shape)
        self.singular_values_ = s
        self.x_mean_, self.y_mean_ = mx, my
        self.norms_sq_ = np.array([nx2, ny2])
        self._finish()
        self.fit_info_.update(rank=rank, scale=self.scale_)

    def _rotation(self, u: np.ndarray, s: np.ndarray, vt: np.ndarray, rank: int, shape: tuple[int, int]) -> np.ndarray:
        """``U V^T``; where the rank leaves it free, the SVD's choice (said in a warning)."""
        if rank < s.size:
            _warn(
                f"Procrustes: X_c^T Y_c has rank {rank} < {s.size} (n_train={shape[0]}, widths {u.shape[0]} and "
                f"{vt.shape[1]}), so the rotation is not unique in {s.size - rank} direction(s); the SVD's choice is "
                "used."
            )
        return u @ vt

    def _finish(self) -> None:
        nx2 = float(self.norms_sq_[0])
        self.scale_ = float(self.singular_values_.sum() / nx2) if self._params["scale"] else 1.0
        self.coef_ = self.rotation_ * self.scale_ if self._params["scale"] else self.rotation_
        self.intercept_ = self.y_mean_ - self.x_mean_ @ self.coef_

    def reverse(self) -> Procrustes:
        """The Procrustes map from Y to X fitted on the same rows: ``R^T`` from the same SVD (no refit)."""
        self._check_fitted()
        r = type(self)(**self._params)
        r.rotation_ = np.ascontiguousarray(self.rotation_.T)
        r.singular_values_ = self.singular_values_
        r.x_mean_, r.y_mean_ = self.y_mean_, self.x_mean_
        r.norms_sq_ = self.norms_sq_[::-1].copy()
        r._finish()
        r.n_features_in_, r.n_features_out_ = self.n_features_out_, self.n_features_in_
        r.fit_info_ = {**self.fit_info_, "scale": r.scale_, "reverse_of_svd": True}
        return r

    def _state(self) -> dict[str, np.ndarray]:
        return {
            "coef": self.coef_,
            "intercept": self.intercept_,
            "rotation": self.rotation_,
            "singular_values": self.singular_values_,
            "x_mean": self.x_mean_,
            "y_mean": self.y_mean_,
            "norms_sq": self.norms_sq_,
        }

    def _set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        super()._set_state(arrays)
        self.rotation_ = np.asarray(arrays["rotation"], dtype=np.float64)
        self.singular_values_ = np.asarray(arrays["singular_values"], dtype=np.float64)
        self.x_mean_ = np.asarray(arrays["x_mean"], dtype=np.float64)
        self.y_mean_ = np.asarray(arrays["y_mean"], dtype=np.float64)
        self.norms_sq_ = np.asarray(arrays["norms_sq"], dtype=np.float64)
        self.scale_ = float(self.singular_values_.sum() / self.norms_sq_[0]) if self._params["scale"] else 1.0


class ProcrustesSpan(Procrustes):
    """Procrustes that is the identity where the training rows leave the rotation free (equal widths only).

    See the module docstring: of all rotations optimal for the training rows,
    the one closest to the identity (largest trace), so directions outside both
    sides' training span map to themselves. :meth:`reverse` is ``R^T``, which
    is exactly the fit on (Y, X).
    """

    underdetermined: ClassVar[Underdetermined | None] = "resolve"  # closest to identity

    @property
    def name(self) -> str:
        base = "procrustes_span_scaled" if self._params["scale"] else "procrustes_span"
        return base if self._params["center"] else base + "_uncentred"

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        if x.shape[1] != y.shape[1]:
            raise MapInputError(
                f"procrustes_span needs equal widths (the identity on unseen directions needs one space); source has "
                f"{x.shape[1]} and target {y.shape[1]}. Use 'ridge' (regularised) or fit on more sentences."
            )
        super()._fit(x, y)
        self.fit_info_["free_directions"] = int(x.shape[1] - self.fit_info_["rank"])

    def _rotation(self, u: np.ndarray, s: np.ndarray, vt: np.ndarray, rank: int, shape: tuple[int, int]) -> np.ndarray:
        r = u[:, :rank] @ vt[:rank]
        if rank < s.size:
            # the free part U_0 W V_0^T with the largest trace: trace(W C), C = V_0^T U_0 = P Sigma Q^T -> W = Q P^T
            u0, v0 = u[:, rank:], vt[rank:].T
            p_, _, qt = _linalg.svd(v0.T @ u0)
            r += (u0 @ qt.T) @ (p_.T @ v0.T)
        return r


class _AffineSource:
    """QR of one source's centred training rows, shared by every target fitted on them."""

    def __init__(self, x: np.ndarray) -> None:
        import scipy.linalg as sla

        n, p = x.shape
        if n - 1 < p:
            raise MapInputError(
                f"affine least squares needs more training rows than input width (n_train > width, so that the "
                f"centred rows can span every input direction); got n_train={n}, width {p}. Use 'ridge' "
                "(regularised), 'procrustes', or reduce the width first."
            )
        self.xc, self.mean = _centre(x)
        self.q, self.r = sla.qr(self.xc, mode="economic", check_finite=False)
        d = np.abs(np.diag(self.r))
        self.full_rank = bool(d.min() > d.max() * max(n, p) * np.finfo(np.float64).eps * 10)
        self.rank = p
        if not self.full_rank:
            self.rank = int(np.linalg.matrix_rank(self.xc))
            _warn(
                f"affine: the centred training rows have rank {self.rank} < width {p} (constant or collinear "
                "columns); the minimum-norm least-squares solution is used."
            )

    def solve(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import scipy.linalg as sla

        yc, my = _centre(y)
        if self.full_rank:
            w = sla.solve_triangular(self.r, self.q.T @ yc, check_finite=False)
        else:
            w = sla.lstsq(self.xc, yc, check_finite=False)[0]
        return w, my - self.mean @ w


class Affine(_Linear):
    """Least squares with an intercept; needs n_train > width."""

    underdetermined: ClassVar[Underdetermined | None] = "refuse"
    recovers_rotation: ClassVar[bool] = True

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        src = _AffineSource(x)
        self.coef_, self.intercept_ = src.solve(y)
        self.fit_info_.update(rank=src.rank)

    def fit_many(self, X: Any, Ys: Sequence[Any]) -> list[Map]:
        x = as_matrix(X, "X (source)")
        ys = [check_pair(x, Y, ("X (source)", f"Ys[{i}]"))[1] for i, Y in enumerate(Ys)]
        src = _AffineSource(x)
        out: list[Map] = []
        for y in ys:
            m = self.clone()
            m.coef_, m.intercept_ = src.solve(y)
            m.n_features_in_, m.n_features_out_ = x.shape[1], y.shape[1]
            m.fit_info_ = {"n_train": int(x.shape[0]), "rank": src.rank}
            out.append(m)
        return out


class _RidgeSource:
    """One source's centred training rows and every eigendecomposition ridge needs, shared by any number of targets.

    Primal (p <= n): the p x p Gram ``G = X_c^T X_c``; the Gram of each inner
    fold's training rows is downdated from it (subtract the validation rows'
    Gram and re-centre with the inner mean: ``G_in = G - X_v^T X_v - n_in m m^T``),
    then eigendecomposed once. Dual (p > n): the n x n Gram of the inner
    training rows, ``W = X^T U diag(1 / (mu + lambda)) U^T Y``.
    """

    def __init__(self, x: np.ndarray, alphas: np.ndarray | None, relative: Sequence[float], cv: int, seed: int) -> None:
        from interlingua.maps.folds import kfold

        self.xc, self.mean = _centre(x)
        n, p = self.xc.shape
        self.primal = p <= n
        sq = float(np.einsum("ij,ij->", self.xc, self.xc))
        if not sq > 0:
            raise MapInputError("ridge is undefined: the source has no variance (every training row equal).")
        self.alpha_scale = sq / p
        self.alphas = (
            np.asarray(alphas, dtype=np.float64) if alphas is not None else np.asarray(relative) * self.alpha_scale
        )
        self.gram = self.xc.T @ self.xc if self.primal else self.xc @ self.xc.T
        lam, self.vecs = _linalg.eigh(self.gram)
        self.lam = np.maximum(lam, 0.0)
        self.inner: list[dict[str, Any]] = []
        self.cv = 0
        if self.alphas.size > 1:
            k = min(int(cv), n // 2)
            if k < 2:
                raise MapInputError(
                    f"ridge's inner cross-validation needs at least 4 training rows; got {n}. Pass alpha= to fix "
                    "lambda."
                )
            if k < cv:
                _warn(f"ridge: {n} training rows allow only {k} inner folds (asked for {cv}).")
            self.cv = k
            for tr, va in kfold(n, k, seed):
                self.inner.append(self._inner_fold(tr, va))

    def _inner_fold(self, tr: np.ndarray, va: np.ndarray) -> dict[str, Any]:
        xv = self.xc[va]
        n_in = tr.size
        if self.primal:
            m = -xv.sum(axis=0) / n_in  # mean of the inner training rows (the centred rows sum to 0)
            g_in = self.gram - xv.T @ xv
            g_in -= n_in * np.outer(m, m)
            lam, vecs = _linalg.eigh(g_in)
            a = (xv - m) @ vecs
            return {"tr": tr, "va": va, "xv": xv, "m": m, "lam": np.maximum(lam, 0.0), "vecs": vecs, "a": a}
        xin = self.xc[tr]
        m = xin.mean(axis=0)
        xin = xin - m
        lam, vecs = _linalg.eigh(xin @ xin.T)
        a = ((xv - m) @ xin.T) @ vecs
        return {"tr": tr, "va": va, "lam": np.maximum(lam, 0.0), "vecs": vecs, "a": a}

    def fit(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        yc, my = _centre(y)
        c = self.xc.T @ yc if self.primal else None
        info: dict[str, Any] = {"alphas": self.alphas.tolist(), "inner_folds": self.cv}
        if self.inner:
            mse = np.empty((len(self.inner), self.alphas.size))
            for f, fold in enumerate(self.inner):
                yv = yc[fold["va"]]
                n_in = fold["tr"].size
                m_y = -yv.sum(axis=0) / n_in
                if self.primal:
                    c_in = c - fold["xv"].T @ yv
                    c_in -= n_in * np.outer(fold["m"], m_y)
                    b = fold["vecs"].T @ c_in
                else:
                    b = fold["vecs"].T @ (yc[fold["tr"]] - m_y)
                target = yv - m_y
                for i, alpha in enumerate(self.alphas):
                    err = target - (fold["a"] * (1.0 / (fold["lam"] + alpha))) @ b
                    mse[f, i] = float(np.einsum("ij,ij->", err, err)) / err.size
            curve = mse.mean(axis=0)
            best = int(np.argmin(curve))
            info["cv_mse"] = curve.tolist()
        else:
            best = 0
        alpha = float(self.alphas[best])
        if not alpha > 0 and np.min(self.lam) <= 0:
            raise MapInputError("ridge with lambda = 0 on rank-deficient rows has no unique solution; use lambda > 0.")
        d = 1.0 / (self.lam + alpha)
        if self.primal:
            coef = self.vecs @ (d[:, None] * (self.vecs.T @ c))
        else:
            coef = self.xc.T @ (self.vecs @ (d[:, None] * (self.vecs.T @ yc)))
        info.update(alpha=alpha, alpha_relative=alpha / self.alpha_scale, form="primal" if self.primal else "dual")
        if self.inner and best in (0, self.alphas.size - 1) and self.alphas.size > 2:
            info["alpha_at_grid_edge"] = True
        return coef, my - self.mean @ coef, info


class Ridge(_Linear):
    """Ridge regression with an intercept; lambda by inner k-fold CV over a grid (see the module docstring)."""

    underdetermined: ClassVar[Underdetermined | None] = "resolve"  # the penalty
    recovers_rotation: ClassVar[bool] = True

    _defaults: ClassVar[dict[str, Any]] = {
        "alpha": None,
        "alphas": None,
        "relative_alphas": DEFAULT_RELATIVE_ALPHAS,
        "cv": 5,
        "seed": 0,
    }

    def _validate_params(self) -> None:
        p = self._params
        if p["alpha"] is not None and not (
            isinstance(p["alpha"], (int, float)) and p["alpha"] >= 0 and math.isfinite(p["alpha"])
        ):
            raise MapInputError(f"ridge alpha must be a finite number >= 0; got {p['alpha']!r}.")
        for name in ("alphas", "relative_alphas"):
            v = p[name]
            if v is not None:
                v = tuple(float(a) for a in v)
                if not v or any(not (a > 0 and math.isfinite(a)) for a in v):
                    raise MapInputError(f"ridge {name} must be a non-empty list of positive numbers; got {p[name]!r}.")
                p[name] = v
        if isinstance(p["cv"], bool) or not isinstance(p["cv"], int) or p["cv"] < 2:
            raise MapInputError(f"ridge cv must be an integer >= 2; got {p['cv']!r}.")
        if isinstance(p["seed"], bool) or not isinstance(p["seed"], int) or p["seed"] < 0:
            raise MapInputError(f"ridge seed must be a non-negative integer; got {p['seed']!r}.")

    def _source(self, x: np.ndarray) -> _RidgeSource:
        p = self._params
        alphas = (p["alpha"],) if p["alpha"] is not None else p["alphas"]
        return _RidgeSource(
            x, None if alphas is None else np.asarray(alphas, float), p["relative_alphas"], p["cv"], p["seed"]
        )

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        self.coef_, self.intercept_, info = self._source(x).fit(y)
        self.fit_info_.update(info)

    def fit_many(self, X: Any, Ys: Sequence[Any]) -> list[Map]:
        x = as_matrix(X, "X (source)")
        ys = [check_pair(x, Y, ("X (source)", f"Ys[{i}]"))[1] for i, Y in enumerate(Ys)]
        src = self._source(x)
        out: list[Map] = []
        for y in ys:
            m = self.clone()
            m.coef_, m.intercept_, info = src.fit(y)
            m.n_features_in_, m.n_features_out_ = x.shape[1], y.shape[1]
            m.fit_info_ = {"n_train": int(x.shape[0]), **info}
            out.append(m)
        return out

    @property
    def alpha_(self) -> float:
        self._check_fitted()
        return float(self.fit_info_["alpha"])


# -- registry ----------------------------------------------------------------------------------

#: The map estimators by id (:class:`~interlingua.core.named.Registry`): each id is a class and its fixed
#: default hyper-parameters, declared once with :func:`register_map` (here, and ``mlp`` in
#: :mod:`interlingua.maps.mlp`).
MAPS: Registry[tuple[type[Map], dict[str, Any]]] = Registry(
    "map id", error=MapInputError, unknown="unknown map {name!r}; known maps: {names}."
)
_CLASSES: dict[str, type[Map]] = {}
_CLASS_NAMES: dict[type, str] = {}


def register_map(name: str, cls: type[Map], **defaults: Any) -> None:
    """Register ``cls`` under ``name`` with fixed default hyper-parameters (e.g. ``scale=True``)."""
    MAPS.add(name, (cls, defaults))
    _CLASSES.setdefault(cls.__name__, cls)
    _CLASS_NAMES.setdefault(cls, name)


def get_map(name: str | Map, **params: Any) -> Map:
    """A new, unfitted map: ``get_map("ridge", cv=10)``; a :class:`Map` instance is cloned (``params`` update it)."""
    if isinstance(name, Map):
        return type(name)(**{**name._params, **params})
    cls, defaults = MAPS.get(name)
    return cls(**{**defaults, **params})


def list_maps() -> list[str]:
    """Registered map ids, in registration order."""
    return MAPS.names()


register_map("identity", Identity)
register_map("procrustes", Procrustes)
register_map("procrustes_scaled", Procrustes, scale=True)
register_map("procrustes_span", ProcrustesSpan)
register_map("affine", Affine)
register_map("ridge", Ridge)

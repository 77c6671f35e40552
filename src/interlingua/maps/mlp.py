"""A one-hidden-layer MLP map (torch), seeded, with early stopping on a validation split.

``f(x) = mu_y + s_y * (GELU(((x - mu_x) / s_x) W1 + b1) W2 + b2)``

- inputs are standardised per column with the training mean and standard
  deviation (a constant column keeps scale 1); the target is centred and
  divided by ONE number, its root mean square over all entries, so the
  training loss (mean squared error) is proportional to the raw MSE;
- a validation split of ``val_fraction`` of the TRAINING rows (drawn with
  ``numpy.random.default_rng(seed)``; at least one row, and at least one row
  left to train on) is held out from the gradient steps; after every epoch
  its MSE is measured, the best weights are kept, and training stops after
  ``patience`` epochs without improvement (or at ``max_epochs``); the best
  weights are restored;
- weights are initialised (uniform in +-1/sqrt(fan_in), as torch's Linear
  does) and mini-batches shuffled from a ``torch.Generator`` seeded with
  ``seed``; no global random state is read or changed. Adam, full float32 by
  default (``dtype="float64"`` for double precision).

Threads: fitting and transforming run on ``threads`` torch threads (default
1; the caller's setting is restored afterwards). One thread is also the
fastest for these small matrices on a busy machine (OpenMP threads that wait
for each other on oversubscribed cores cost ~20x here), and it makes the
result independent of the caller's thread setting: the same seed, data and
torch version give bit-identical weights (tested).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np

from interlingua.maps.errors import MapInputError
from interlingua.maps.estimators import Map, Underdetermined, register_map

__all__ = ["MLP"]


@contextlib.contextmanager
def _torch_threads(k: int) -> Iterator[None]:
    """Run torch CPU ops on ``k`` threads, restoring the caller's setting afterwards."""
    import torch

    before = torch.get_num_threads()
    if before != k:
        torch.set_num_threads(k)
    try:
        yield
    finally:
        if before != k:
            torch.set_num_threads(before)


class MLP(Map):
    """One hidden layer, GELU, Adam, early stopping on a seeded validation split of the training rows."""

    _defaults: ClassVar[dict[str, Any]] = {
        "hidden": 512,
        "lr": 1e-3,
        "weight_decay": 0.0,
        "batch_size": 128,
        "max_epochs": 200,
        "patience": 10,
        "val_fraction": 0.1,
        "seed": 0,
        "dtype": "float32",
        "threads": 1,
    }
    is_affine: ClassVar[bool] = False
    underdetermined: ClassVar[Underdetermined | None] = "resolve"  # seeded training

    def _validate_params(self) -> None:
        p = self._params
        ints = {"hidden": 1, "batch_size": 1, "max_epochs": 1, "patience": 1, "seed": 0, "threads": 1}
        for k, lo in ints.items():
            if isinstance(p[k], bool) or not isinstance(p[k], int) or p[k] < lo:
                raise MapInputError(f"MLP parameter {k} must be an integer >= {lo}; got {p[k]!r}.")
        for k in ("lr", "weight_decay"):
            if not isinstance(p[k], (int, float)) or not math.isfinite(p[k]) or p[k] < 0 or (k == "lr" and p[k] == 0):
                raise MapInputError(
                    f"MLP parameter {k} must be a finite number{' > 0' if k == 'lr' else ' >= 0'}; got {p[k]!r}."
                )
        if not isinstance(p["val_fraction"], (int, float)) or not 0 < p["val_fraction"] < 1:
            raise MapInputError(f"MLP val_fraction must lie in (0, 1); got {p['val_fraction']!r}.")
        if p["dtype"] not in ("float32", "float64"):
            raise MapInputError(f"MLP dtype must be 'float32' or 'float64'; got {p['dtype']!r}.")

    def _torch_dtype(self) -> Any:
        import torch

        return torch.float32 if self._params["dtype"] == "float32" else torch.float64

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        with _torch_threads(self._params["threads"]):
            self._fit_torch(x, y)

    def _fit_torch(self, x: np.ndarray, y: np.ndarray) -> None:
        import torch

        p = self._params
        n = x.shape[0]
        n_val = max(1, int(round(p["val_fraction"] * n)))
        if n - n_val < 1:
            raise MapInputError(f"the MLP needs at least 2 training rows (one to train on, one to validate); got {n}.")
        order = np.random.default_rng(p["seed"]).permutation(n)
        val_idx, tr_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
        xm, xs = x[tr_idx].mean(axis=0), x[tr_idx].std(axis=0)
        xs = np.where(xs > 0, xs, 1.0)
        ym = y[tr_idx].mean(axis=0)
        ys = float(np.sqrt(np.mean((y[tr_idx] - ym) ** 2)))
        ys = ys if ys > 0 else 1.0
        dt = self._torch_dtype()
        gen = torch.Generator().manual_seed(int(p["seed"]))
        xt = torch.from_numpy((x - xm) / xs).to(dt)
        yt = torch.from_numpy((y - ym) / ys).to(dt)
        d_in, d_out, h = x.shape[1], y.shape[1], p["hidden"]

        def uniform(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
            bound = 1.0 / math.sqrt(fan_in)
            return ((torch.rand(shape, generator=gen, dtype=dt) * 2 - 1) * bound).requires_grad_(True)

        params = [uniform((d_in, h), d_in), uniform((h,), d_in), uniform((h, d_out), h), uniform((d_out,), h)]
        opt = torch.optim.Adam(params, lr=p["lr"], weight_decay=p["weight_decay"])
        x_tr, y_tr, x_va, y_va = xt[tr_idx], yt[tr_idx], xt[val_idx], yt[val_idx]

        def forward(inp: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.gelu(inp @ params[0] + params[1]) @ params[2] + params[3]

        best = (math.inf, -1, [t.detach().clone() for t in params])
        epoch, bs = 0, p["batch_size"]
        for epoch in range(1, p["max_epochs"] + 1):
            perm = torch.randperm(x_tr.shape[0], generator=gen)
            for s in range(0, x_tr.shape[0], bs):
                idx = perm[s : s + bs]
                opt.zero_grad(set_to_none=True)
                loss = torch.mean((forward(x_tr[idx]) - y_tr[idx]) ** 2)
                loss.backward()
                opt.step()
            with torch.no_grad():
                val = float(torch.mean((forward(x_va) - y_va) ** 2))
            if not math.isfinite(val):
                break
            if val < best[0]:
                best = (val, epoch, [t.detach().clone() for t in params])
            elif epoch - best[1] >= p["patience"]:
                break
        if best[1] < 0:
            raise MapInputError("the MLP diverged in its first epoch (non-finite validation loss); lower lr.")
        w1, b1, w2, b2 = (t.numpy().copy() for t in best[2])
        self.w1_, self.b1_, self.w2_, self.b2_ = w1, b1, w2, b2
        self.x_mean_, self.x_scale_, self.y_mean_ = xm, xs, ym
        self.y_scale_ = np.array([ys])
        self.fit_info_.update(
            epochs=epoch, best_epoch=best[1], val_mse_scaled=best[0], n_val=int(n_val), n_fit=int(tr_idx.size)
        )

    def _transform(self, x: np.ndarray) -> np.ndarray:
        import torch

        dt = self._torch_dtype()
        with torch.no_grad(), _torch_threads(self._params["threads"]):
            xt = torch.from_numpy((x - self.x_mean_) / self.x_scale_).to(dt)
            w1, b1, w2, b2 = (torch.from_numpy(a) for a in (self.w1_, self.b1_, self.w2_, self.b2_))
            out = torch.nn.functional.gelu(xt @ w1 + b1) @ w2 + b2
        return out.numpy().astype(np.float64) * float(self.y_scale_[0]) + self.y_mean_

    def _state(self) -> dict[str, np.ndarray]:
        return {
            "w1": self.w1_,
            "b1": self.b1_,
            "w2": self.w2_,
            "b2": self.b2_,
            "x_mean": self.x_mean_,
            "x_scale": self.x_scale_,
            "y_mean": self.y_mean_,
            "y_scale": self.y_scale_,
        }

    def _set_state(self, arrays: Mapping[str, np.ndarray]) -> None:
        for k in ("w1", "b1", "w2", "b2", "x_mean", "x_scale", "y_mean", "y_scale"):
            setattr(self, k + "_", np.asarray(arrays[k]))


register_map("mlp", MLP)

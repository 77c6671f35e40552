"""``interlingua check X.npy Y.npy``: every installed peer library next to interlingua on a user's arrays.

Prints one row per peer call: our value, the peer's, the difference and a verdict (agrees / differs
by convention, naming it and the measure id that reproduces it / differs); ``--json`` prints the same
as JSON. See :func:`interlingua.analysis.peers.check`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from interlingua.core.errors import MeasureInputError

__all__ = ["add_parser", "load_array", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="compare interlingua's measures with the installed peer libraries on two .npy arrays",
        description="Run every installed peer library (pytorch-cka, ckatorch, rsatoolbox, hoggorm) on X and Y "
        "next to interlingua, and print each value, the difference and a verdict: agrees, differs by a named "
        "convention (with the measure id that reproduces it), or differs. X and Y: .npy files of shape (n, p) "
        "and (n, q), rows paired.",
    )
    p.add_argument("x", metavar="X.npy", help="first array, (n, p)")
    p.add_argument("y", metavar="Y.npy", help="second array, (n, q), same n rows")
    p.add_argument("--batch-size", type=int, default=None, help="also run pytorch-cka's minibatch estimator")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def load_array(path: str, side: str) -> np.ndarray:
    """A 2-D finite float array from a ``.npy`` file, or :class:`MeasureInputError` saying what is wrong."""
    f = Path(path)
    if not f.is_file():
        raise MeasureInputError(f"{side}: no file {path!r}; pass a .npy file written by numpy.save.")
    try:
        a = np.load(f, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # EOFError: an empty or truncated file
        raise MeasureInputError(
            f"{side}: {path!r} is not a readable .npy array ({exc}); write it with numpy.save."
        ) from exc
    if not isinstance(a, np.ndarray) or a.ndim != 2:
        shape = getattr(a, "shape", None)
        raise MeasureInputError(f"{side}: {path!r} has shape {shape}; expected a 2-D (rows, features) array.")
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        raise MeasureInputError(f"{side}: {path!r} has dtype {a.dtype}; expected real numbers.")
    return a


def run(args: argparse.Namespace) -> int:
    from interlingua.analysis.peers import check, check_table

    x, y = load_array(args.x, "X"), load_array(args.y, "Y")
    report = check(x, y, batch_size=args.batch_size)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(check_table(report))
    return 0

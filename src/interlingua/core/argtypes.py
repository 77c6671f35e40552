"""Argument types for the CLI's numeric options: a number outside its range is refused where it is parsed.

``--gpus 0`` used to reach a division, ``demo -n 0`` read as "the default" and a negative ``--steps`` reached the
trainer; each option now says its range (argparse turns the ``ArgumentTypeError`` into one error line, exit 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["float_in", "int_in"]


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; give a whole number from {low} to {high}")
        return value

    parse.__name__ = "whole number"
    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number in ``[low, high]``."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range; give a number from {low:g} to {high:g}")
        return value

    parse.__name__ = "number"
    return parse

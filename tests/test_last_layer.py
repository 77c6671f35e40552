"""schema.last_layer_rows: the one definition of "the last layer" (report, predictors, sweeps, mergeability).

On rows laid out as a run lays them out (contract.pairs.layer_pairs outside the grid, every layer pair inside it),
the rows it selects are exactly those at relative depth 1 on both sides outside the grid: one per pair x
pooling x measure, whatever the two depths, in the table's order and with its index.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from interlingua.contract.pairs import layer_pairs
from interlingua.core.schema import last_layer_rows


def _rows(depths: dict[str, tuple[int, int]]) -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for (pair, (la, lb)), pooling, measure in itertools.product(depths.items(), ("mean", "last"), ("cka", "rsa")):
        grid = [(ka, kb) for ka in range(la) for kb in range(lb)]
        for is_grid, layers in ((False, layer_pairs(la, lb)), (True, grid)):
            for ka, kb in layers:
                rows.append(
                    {
                        "pair": pair,
                        "pooling": pooling,
                        "measure": measure,
                        "grid": is_grid,
                        "layer_a": ka,
                        "layer_b": kb,
                        "depth_a": ka / max(la - 1, 1),
                        "depth_b": kb / max(lb - 1, 1),
                        "matched": rng.random(),
                    }
                )
    frame = pd.DataFrame(rows)
    return frame.sample(frac=1.0, random_state=1)  # any row order, an index that is not a range


@pytest.mark.parametrize(
    "depths", [{"a|b": (5, 5)}, {"a|c": (5, 7), "c|a": (7, 5)}, {"a|a": (3, 3), "a|b": (3, 9), "b|b": (9, 9)}]
)
def test_the_last_layer_rows_are_the_rows_of_depth_one_outside_the_grid(depths) -> None:
    table = _rows(depths)
    last = last_layer_rows(table)
    expected = table[~table["grid"] & (table["depth_a"] == 1.0) & (table["depth_b"] == 1.0)]
    pd.testing.assert_frame_equal(last, expected)
    assert len(last) == len(depths) * 2 * 2  # one per pair x pooling x measure
    assert last.groupby(["pair", "pooling", "measure"]).size().eq(1).all()


def test_a_table_without_rows_or_without_a_grid_column() -> None:
    table = _rows({"a|b": (4, 6)})
    assert last_layer_rows(table.iloc[:0]).empty
    outside = table[~table["grid"]].drop(columns="grid")
    assert last_layer_rows(outside).index.tolist() == last_layer_rows(table).index.tolist()

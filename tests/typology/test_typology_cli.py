"""`interlingua typology` and `interlingua contamination` from the command line."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("py3langid")


def test_typology_cli_writes_the_distances(tmp_path):
    from interlingua.analysis.typology import uriel_distance
    from interlingua.cli import main

    pytest.importorskip("numpy")
    out = tmp_path / "d.csv"
    assert main(["typology", "eng_Latn", "nld_Latn", "spa_Latn", "--kinds", "syntactic", "-o", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 3
    row = frame[(frame["lang_a"] == "eng_Latn") & (frame["lang_b"] == "nld_Latn")].iloc[0]
    assert row["syntactic"] == pytest.approx(uriel_distance("eng_Latn", "nld_Latn"), abs=1e-12)
    assert round(row["syntactic"], 4) == 0.0757
    assert main(["typology", "eng_Latn", "qqq_Latn"]) == 2


def test_contamination_cli(tmp_path):
    from interlingua.cli import main

    text = tmp_path / "de.txt"
    text.write_text(
        "\n".join(
            [
                "Das ist ein ganz normaler deutscher Satz über das Wetter heute.",
                "This is an ordinary English sentence about the weather today.",
            ]
        ),
        encoding="utf-8",
    )
    out = tmp_path / "c.csv"
    assert main(["contamination", f"deu_Latn={text}", "-o", str(out)]) == 0
    row = pd.read_csv(out).iloc[0]
    assert row["n_considered"] == 2 and row["n_other"] == 1 and row["share_other"] == 0.5
    assert main(["contamination", "nonsense"]) == 2

"""One home for every column: each capability declares its tables' columns with their glossary text.

The report's glossary is read from these declarations only (``Capability.columns`` / ``report_columns``), so
a column without text, a table declared twice, or a table written with columns nobody declared must fail;
``report/`` is a toolkit that imports no capability and no pipeline module.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pandas as pd
import pytest

import interlingua.report
from interlingua.contract.capability import Capability, Kind
from interlingua.pipeline import registry
from interlingua.pipeline.assemble import _check_declared
from interlingua.pipeline.report import REPORT_COLUMNS, declared_columns, derived_columns
from interlingua.report.glossary import describe

DTYPES = {"str", "int", "float", "bool"}


@pytest.mark.parametrize("cap", registry.capabilities(), ids=lambda c: c.name)
def test_every_declared_column_has_its_glossary_text(cap: Capability) -> None:
    for stem, columns in cap.columns.items():
        names = [c.name for c in columns]
        assert len(names) == len(set(names)), f"{cap.name}: {stem}.csv declares a column twice"
        for c in columns:
            assert c.doc.strip(), f"{cap.name}: {stem}.csv's {c.name!r} has no glossary text"
            assert c.dtype in DTYPES, (stem, c.name, c.dtype)
    for c in cap.report_columns:
        assert c.doc.strip(), f"{cap.name}: report column {c.name!r} has no glossary text"


def test_a_capability_with_tables_declares_them() -> None:
    for cap in registry.capabilities():
        if cap.tables is not None:
            assert cap.columns, f"{cap.name} writes tables but declares no columns"
    # every table stem has one owner, and the frame's derived columns come first in the glossary
    declared = declared_columns()
    assert {"results", "maps", "audit", "quality", "patching", "transport"} <= set(declared)
    assert derived_columns()[: len(REPORT_COLUMNS)] == REPORT_COLUMNS


def test_the_glossary_text_is_the_declaring_capability_s() -> None:
    declared = declared_columns()
    maps = registry.capability("maps").columns["maps"]
    p1 = next(c for c in maps if c.name == "p1")
    assert describe("p1", ["results", "maps"], declared) == p1.doc
    assert describe("no such column", ["results", "maps"], declared) == ""
    # a name two files describe differently is given each file's text, with the file named
    both = describe("pair", ["results", "mergeability"], declared)
    assert "`results.csv`:" in both and "`mergeability.csv`:" in both


def test_a_table_written_but_not_declared_is_an_error() -> None:
    toy = Capability("toy", columns={"toy": registry.capability("maps").columns["maps"][:2]})
    ok = pd.DataFrame(columns=[c.name for c in toy.columns["toy"]])
    _check_declared(toy, {"toy": ok})  # declared: passes
    with pytest.raises(ValueError, match=r"writes other\.csv but declares no columns"):
        _check_declared(toy, {"other": ok})
    with pytest.raises(ValueError, match=r"undeclared columns \['extra'\]"):
        _check_declared(toy, {"toy": ok.assign(extra=[])})


def test_every_table_is_checked_column_by_column() -> None:
    """The tables once left unchecked are declared like every other, in the order they are written."""
    from interlingua.analysis.typology.uriel import KINDS
    from interlingua.core.schema import RESULT_COLUMNS, column_names
    from interlingua.mergeability.columns import COVERAGE_COLUMNS
    from interlingua.patching.patch import CONTROL_COLUMNS, SUMMARY_COLUMNS
    from interlingua.predictors import KNOWN_PREDICTORS

    declared = declared_columns()
    assert declared["coverage"] == COVERAGE_COLUMNS
    # patching.csv: the experiment and its fit, the trials' summary, the maps' pooling and trials, the controls
    want = ["experiment", "fit", *SUMMARY_COLUMNS, "pooling", "pairs", *CONTROL_COLUMNS]
    assert column_names(declared["patching"]) == want
    # typology.csv and predictor_pairs.csv: every column a run can ask for (a URIEL kind, a predictor)
    typology = column_names(declared["typology"])
    assert typology == ["lang_a", "lang_b", "uriel_a", "uriel_b", *KINDS, "source"]
    pairs = column_names(declared["predictor_pairs"])
    assert pairs[: len(RESULT_COLUMNS)] == column_names(RESULT_COLUMNS)
    assert set(pairs) == set(column_names(RESULT_COLUMNS)) | set(KNOWN_PREDICTORS)  # length_control: a result


def test_kinds_declare_no_tables() -> None:
    assert "tables" not in {f.name for f in dataclasses.fields(Kind)}


def test_the_report_toolkit_imports_no_capability_and_no_pipeline() -> None:
    folder = Path(interlingua.report.__file__).parent
    below = ("interlingua.core", "interlingua.data", "interlingua.report")
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                if name.startswith("interlingua"):
                    assert name.startswith(below), f"{path.name} imports {name}"

"""The study configs' first command without the Hub: ``validate`` (and ``plan``) without ``--offline`` either
works or says ``--offline`` in its one error line (issue 36: it advised rewriting the config); a missing word
segmenter names the extra that installs it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from interlingua.cli import main

STUDIES = Path(__file__).resolve().parents[1] / "configs" / "studies"
NAMES = sorted(p.stem for p in STUDIES.glob("*.yaml"))


@pytest.mark.parametrize("command", ["validate", "plan"])
@pytest.mark.parametrize("name", NAMES)
def test_without_the_hub_the_error_names_offline(name, command, tmp_path, capsys):
    # conftest sets HF_HUB_OFFLINE=1: the Hub is out of reach, as on a machine without network
    config = STUDIES / f"{name}.yaml"
    code = main([command, str(config), "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("interlingua: error: ")
    assert f"`interlingua {command} {config} --offline`" in err
    if command == "validate":
        assert not (tmp_path / "cache").exists()  # nothing written on the way


@pytest.mark.slow
def test_offline_still_works_for_every_study(capsys):
    for name in NAMES:
        assert main(["validate", str(STUDIES / f"{name}.yaml"), "--offline"]) == 0
    assert "valid offline" in capsys.readouterr().out


def test_a_missing_segmenter_names_the_align_extra(monkeypatch, capsys):
    """goldfish_convergence compares Chinese and Japanese words: without jieba its offline check says which extra."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jieba" else real(name, *a))
    assert main(["validate", str(STUDIES / "goldfish_convergence.yaml"), "--offline"]) == 2
    err = capsys.readouterr().err
    assert "needs the 'jieba' package" in err and 'pip install "interlingua[align]"' in err


def test_the_readme_install_line_of_the_convergence_study_has_the_align_extra():
    text = (STUDIES / "README.md").read_text(encoding="utf-8")
    assert 'pip install "interlingua[align]"' in text
    header = (STUDIES / "goldfish_convergence.yaml").read_text(encoding="utf-8")
    assert 'pip install "interlingua[align]"' in header

"""One progress bar per phase, each counting only its own tasks (its ETA is not diluted by other phases)."""

from __future__ import annotations

from types import SimpleNamespace

from interlingua.pipeline import execute


def test_each_phase_has_its_own_bar_count_and_closes_when_done(monkeypatch, capsys):
    monkeypatch.setattr(execute, "task_label", lambda task: task.kind)
    kinds = {"compare": SimpleNamespace(progress="comparing"), "nll": SimpleNamespace(progress=None)}
    tasks = [SimpleNamespace(kind=k) for k in ["nll", "compare", "compare", "nll", "compare"]]
    bars = execute.PhaseBars(tasks, kinds, enabled=True)
    assert bars.totals == {"nll": 2, "comparing pairs": 3}
    seen = []
    for task in tasks:
        bar = bars.start(task)
        seen.append((bar.desc, bar.total, bar.n))
        bars.finish(task)
    # each bar counts its own phase from 0 to its own total; the outer count never waits on another phase
    assert seen == [
        ("nll", 2, 0),
        ("comparing pairs", 3, 0),
        ("comparing pairs", 3, 1),
        ("nll", 2, 1),
        ("comparing pairs", 3, 2),
    ]
    assert bars.bars == {}  # every bar closed once its phase finished
    err = capsys.readouterr().err
    assert "comparing pairs: 100%" in err and "nll: 100%" in err


def test_dependency_deprecations_go_to_the_log_file_not_the_terminal(tmp_path, monkeypatch, capsys):
    import warnings

    from interlingua.analysis.measures import MeasureWarning
    from interlingua.commands import warnings_summary
    from interlingua.commands.warnings_summary import summarised_warnings

    monkeypatch.setenv("INTERLINGUA_CACHE", str(tmp_path))
    theirs = "/site-packages/transformers/modeling_utils.py"
    with summarised_warnings():
        for _ in range(5):
            warnings.warn_explicit("`torch_dtype` is deprecated", FutureWarning, theirs, 10)
        warnings.warn("reduced to 9 components", MeasureWarning, stacklevel=1)
        ours = warnings_summary.__file__  # a FutureWarning of interlingua's own stays on the terminal
        warnings.warn_explicit("our option is deprecated", FutureWarning, ours, 1)
    err = capsys.readouterr().err.splitlines()
    log = tmp_path / "logs" / "warnings.log"
    assert err == [
        "interlingua: warning: reduced to 9 components [MeasureWarning]",
        "interlingua: warning: our option is deprecated [FutureWarning]",
        f"interlingua: 5 deprecation warning(s) from dependencies (transformers) written to {log}",
    ]
    assert log.read_text().count("torch_dtype") == 5

"""interlingua: do independently trained language models share representational geometry?

``interlingua.run(spec)`` runs a whole analysis (a path to a YAML config, a
mapping, or a :class:`~interlingua.pipeline.config.RunSpec`) and returns its tables;
``interlingua.extract(model, sentences, poolings, tokenizer=...)`` reads pooled
hidden states of a model you loaded; ``interlingua.compare(X, Y, measures=...)``
compares two arrays of paired rows (a table with controls and p-values).
"""

from __future__ import annotations

from typing import Any

from interlingua.core.numerics import ensure_cnr

ensure_cnr()  # MKL's bit-reproducible mode, before any torch product of this process (numerics.py)

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "compare",
    "compare_arrays",
    "extract",
    "packaged_model",
    "run",
    "RunResult",
    "RunSpec",
    "load_spec",
]


def __getattr__(name: str) -> Any:
    # Lazy: `import interlingua` stays cheap (no torch import) for the CLI's --help.
    if name in ("run", "RunResult"):
        from interlingua.pipeline import runs as pipeline

        return getattr(pipeline, name)
    if name in ("compare", "compare_arrays"):  # one function, two names: interlingua.compare(X, Y, ...)
        from interlingua.comparison import compare_arrays

        return compare_arrays
    if name == "extract":
        from interlingua.data.representations import extract

        return extract
    if name == "check":  # interlingua.check(X, Y): the installed peer libraries next to interlingua
        from interlingua.analysis.peers import check

        return check
    if name == "packaged_model":
        from interlingua.data.models.loading import packaged_model

        return packaged_model
    if name in ("RunSpec", "load_spec"):
        from interlingua.pipeline import config

        return getattr(config, name)
    raise AttributeError(f"module 'interlingua' has no attribute {name!r}")

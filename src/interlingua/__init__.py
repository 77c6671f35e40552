"""interlingua: do independently trained language models share representational geometry?

``interlingua.run(spec)`` runs a whole analysis (a path to a YAML config, a
mapping, or a :class:`~interlingua.config.RunSpec`) and returns its table.
"""

from __future__ import annotations

from typing import Any

from interlingua.numerics import ensure_cnr

ensure_cnr()  # MKL's bit-reproducible mode, before any torch product of this process (numerics.py)

__version__ = "0.2.0"

__all__ = ["__version__", "run", "RunSpec", "load_spec"]


def __getattr__(name: str) -> Any:
    # Lazy: `import interlingua` stays cheap (no torch import) for the CLI's --help.
    if name == "run":
        from interlingua.pipeline import run

        return run
    if name in ("RunSpec", "load_spec"):
        from interlingua import config

        return getattr(config, name)
    raise AttributeError(f"module 'interlingua' has no attribute {name!r}")

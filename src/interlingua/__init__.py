"""interlingua: do independently trained language models share representational geometry?"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

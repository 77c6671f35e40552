"""The ``quality`` capability: each model's NLL per language side (see :mod:`interlingua.quality.capability`)."""

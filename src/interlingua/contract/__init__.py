"""The contract between the pipeline and its capabilities: what a capability declares, and the pairs it reads.

Below every capability and below the pipeline's frame (docs/ARCHITECTURE.md, "Layers"): a
capability imports this package, never the frame. A package of its own, not a module of
``interlingua.pipeline``, because import-linter's layers are packages with everything in them.
"""

"""The source studies as shipped configs (configs/studies/): their offline stand-ins, offline checks and cost,
and Hub model sets resolved once and pinned.

- :mod:`interlingua.studies.standin`: ``run --stand-in``, the same study on the zoo and the packaged Bible;
- :mod:`interlingua.studies.offline`: ``validate --offline`` and ``plan --offline``, with the published shapes
  of the study models (:mod:`interlingua.studies.shapes`);
- :mod:`interlingua.studies.hub_sets`: ``model_sets:`` (author + name glob) resolved with huggingface_hub.
"""

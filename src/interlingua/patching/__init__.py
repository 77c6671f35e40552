"""Interventions: does a map between two models carry meaning the target model uses?

Cross-model activation patching (the paper's third standard of evidence, seed 002 section 5):
the target model reads a prompt about country B while its residual stream at B's name is
replaced, from a start layer to the last, by the donor model's residual for country A mapped
into the target's basis; the question is whether the target now answers for A.

* :mod:`.probes`: the factual cloze probes shipped with the package (``data/probes.json``: 61
  countries, capital / official language / continent, six languages; every fact from CLDR via
  babel, checked against GeoNames and countryinfo; rebuilt by :mod:`.data.build_probes`), and
  the token rules (subject span by character offsets, first answer token).
* :mod:`.hooks`: reading and overwriting the residual stream with plain forward hooks on the
  blocks the architecture table locates (always removed).
* :mod:`.patch`: the experiment: conditions none / within / mapped / unprojected / shuffled /
  noise, flip and directional-success rates with Wilson intervals, in one table.

Example::

    from interlingua.patching import PatchModel, PatchOptions, fit_patch_maps, patch_experiment
    target = PatchModel.from_spec(ModelSpec(package="smollm2-135m"))
    donor = PatchModel.from_spec(ModelSpec(package="gemma3-270m"))
    maps = fit_patch_maps(donor, target, eng_verses, eng_verses, layers=range(2, 31))
    table = patch_experiment(target, donor, maps, options=PatchOptions(languages=("eng", "eng"), layers=[2, 10, 20]))
"""

from __future__ import annotations

from interlingua.patching.errors import InterventionError
from interlingua.patching.probes import (
    EncodedPrompt,
    Probe,
    ProbeSet,
    answer_token,
    answer_tokens,
    encode_prompt,
    find_span,
    load_probes,
    render,
)

__all__ = [
    "InterventionError",
    "Probe",
    "ProbeSet",
    "EncodedPrompt",
    "load_probes",
    "render",
    "encode_prompt",
    "find_span",
    "answer_token",
    "answer_tokens",
    # torch-dependent, imported on first use
    "PatchModel",
    "Readout",
    "residual_hooks",
    "capture_residuals",
    "run_patched",
    "CONDITIONS",
    "SPAN_RULES",
    "LayerMaps",
    "as_layer_maps",
    "donor_layer",
    "fit_patch_maps",
    "maps_from_representations",
    "PatchOptions",
    "patch_trials",
    "summarize_trials",
    "patch_experiment",
]

_LAZY = {
    "PatchModel": "hooks",
    "Readout": "hooks",
    "residual_hooks": "hooks",
    "capture_residuals": "hooks",
    "run_patched": "hooks",
    "CONDITIONS": "patch",
    "SPAN_RULES": "patch",
    "LayerMaps": "patch",
    "as_layer_maps": "patch",
    "donor_layer": "patch",
    "fit_patch_maps": "patch",
    "maps_from_representations": "patch",
    "PatchOptions": "patch",
    "patch_trials": "patch",
    "summarize_trials": "patch",
    "patch_experiment": "patch",
}


def __getattr__(name: str):  # PEP 562: torch is imported only when patching is used
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

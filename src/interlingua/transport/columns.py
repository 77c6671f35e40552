"""The columns of ``transport.csv`` (one row per directed fusion, language and alpha), each with its glossary
text.
"""

from __future__ import annotations

from interlingua.core.schema import Column
from interlingua.transport.controls import SELF_MATCH_THRESHOLD
from interlingua.transport.correspond import INTERFACES

__all__ = ["FUSION_COLUMNS", "PLAN_INTERFACES"]

#: The interfaces whose transport plans a fusion row describes (epsilon, cost, entropy per interface).
PLAN_INTERFACES = ("mlp", "attn", "residual", "layer")

FUSION_COLUMNS: tuple[Column, ...] = (
    Column("target", "str", "the target model (keeps its architecture, tokenizer, embeddings and head)"),
    Column("donor", "str", "the donor model (its weights are transported into the target)"),
    Column("target_language", "str", "the language of the target's probe side (as the caller names it)"),
    Column("donor_language", "str", "the language of the donor's probe side"),
    Column("language", "str", "the evaluation language of this row"),
    Column("role", "str", "target, donor or other: which model's language this row evaluates"),
    Column("alpha", "float", "fusion weight: W' = (1 - alpha) W_target + alpha T on the masked entries"),
    Column("nll_target", "float", "mean NLL (nats/token) of the unfused target on this language, its own tokenizer"),
    Column("nll_ot", "float", "mean NLL of the target fused through the OT plans"),
    Column("nll_shuffled", "float", "mean NLL of the target fused through the row-shuffled plans (the control)"),
    Column("delta_ot", "float", "nll_ot - nll_target (negative: fusion helped)"),
    Column("delta_shuffled", "float", "nll_shuffled - nll_target"),
    Column("ot_minus_rand", "float", "nll_ot - nll_shuffled (negative: the OT plan beat its shuffled control)"),
    Column("n_tokens", "int", "scored tokens of this language"),
    Column("top_k", "int", "units fused per block and interface as requested (-1: all)"),
    Column("m", "int", "donor blocks kept per target block"),
    Column("seed", "int", "seed of the layer-cost subsample and of the control's row permutations"),
    Column("n_probe", "int", "parallel probe sentences the correspondences were fitted on"),
    Column("sublayers", "str", "fused sublayers: mlp, attn or mlp+attn"),
    *(Column(f"eps_{f}", "float", f"epsilon of the {f} plans (calibrated unless fixed)") for f in PLAN_INTERFACES),
    *(
        Column(f"cost_ratio_{f}", "float", f"<Q, C> / emd2 of the {f} plans (mean over kept pairs)")
        for f in PLAN_INTERFACES
    ),
    *(
        Column(f"rowmax_uniform_{f}", "float", f"mean row maximum of the row-stochastic {f} plans / uniform 1/m")
        for f in PLAN_INTERFACES
    ),
    *(
        Column(f"entropy_{f}", "float", f"mean row entropy of the {f} plans / ln m (1 = uniform)")
        for f in PLAN_INTERFACES
    ),
    *(
        Column(
            f"published_rowmax_uniform_{f}",
            "float",
            f"row max / uniform of the {f} calibration pair's plan at the published epsilon 0.1",
        )
        for f in PLAN_INTERFACES[:3]
    ),
    Column(
        "self_control",
        "str",
        f"self-plan control: passed when >= {SELF_MATCH_THRESHOLD:.0%} of the target's units are their own row-argmax "
        "in its plan with itself on every interface, else failed; empty: not run (transport.controls: false)",
    ),
    *(
        Column(
            f"self_match_{f}",
            "float",
            f"fraction of the target's {f} units whose row-argmax in the target-with-itself plan is themselves "
            "(middle target block, the fusion's epsilon; 1 = identity recovered)",
        )
        for f in INTERFACES
    ),
    *(
        Column(
            f"self_diag_{f}",
            "float",
            f"mean diagonal mass phi[a, a] of the row-normalised {f} self-plan (1 = hard identity, 1/n = uniform)",
        )
        for f in INTERFACES
    ),
    *(
        Column(
            f"stability_{f}",
            "float",
            f"{f} plans fitted on the even and on the odd probe sentences (middle target block, its heaviest kept "
            "donor block): mean over target units of |top-k donor units in half A & in half B| / k, "
            "k = stability_k (k = 1: the fraction whose argmax donor unit is the same in both halves)",
        )
        for f in INTERFACES
    ),
    *(
        Column(
            f"stability_chance_{f}",
            "float",
            f"stability_{f} with half B's target units permuted at random, in expectation over permutations "
            "(sum_b c_A(b) c_B(b) / (k n^2), c_H(b) = target units whose top-k in half H holds donor unit b)",
        )
        for f in INTERFACES
    ),
    *(
        Column(
            f"planted_recovery_{f}",
            "str",
            f"planted-correspondence control ({f}, middle target block, the fusion's epsilon and probe size): per "
            "planted correlation rho, the fraction of target units whose row-argmax in the plan with a permuted "
            "noisy copy of themselves (partner correlated at rho) is their partner, as 'rho: fraction / ...'",
        )
        for f in INTERFACES
    ),
    *(
        Column(
            f"planted_found_{f}",
            "float",
            f"smallest planted correlation at which >= half of the {f} units were recovered: the weakest "
            "correspondence this run could have found (NaN: none, or not run)",
        )
        for f in INTERFACES
    ),
    Column("stability_k", "int", "k of the top-k overlap in stability_* (-1: controls not run)"),
    Column("controls_target_block", "int", "target block of the controls (L_T // 2; -1: not run)"),
    Column("controls_donor_block", "int", "donor block of the stability control (largest P_eff of that block)"),
    Column("calibrated", "bool", "every auto epsilon met the cost tolerance"),
    Column("converged", "bool", "every Sinkhorn solve met its marginal tolerance"),
    Column("seconds_activations", "float", "probe forward passes of both models (0 when cached)"),
    Column("seconds_plans", "float", "calibration, layer costs and neuron plans"),
    Column("seconds_fusion", "float", "transported weights of both controls"),
    Column("seconds_controls", "float", "the self-plan and stability controls (NaN: not run)"),
    Column("folder_ot", "str", "the written OT model folder (empty: none written)"),
    Column("folder_shuffled", "str", "the written control model folder"),
    Column("note", "str", "what a reader must know before the NLL deltas: a failed self-plan control (empty: none)"),
)

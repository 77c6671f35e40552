"""The columns of ``audit.csv`` (one row per model spec), each with its glossary text."""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = ["AUDIT_COLUMNS"]

AUDIT_COLUMNS: tuple[Column, ...] = (
    Column("model", "str", "the spec's label"),
    Column("path", "str", "the resolved base: local folder, Hub id or package:NAME"),
    Column("adapter", "str", "the PEFT adapter folder or id, empty without one"),
    Column("verdict", "str", "ok, or every bad finding of this row joined by '; '"),
    Column("bad", "bool", "some finding is bad (what --strict exits 1 on)"),
    Column(
        "adapter_verdict", "str", "identity (every lora_B == 0), tiny, active, missing, unsupported; empty: no adapter"
    ),
    Column("adapter_reason", "str", "why the adapter verdict"),
    Column("peft_type", "str", "adapter_config.json peft_type"),
    Column("lora_r", "int", "adapter_config.json r"),
    Column("lora_alpha", "float", "adapter_config.json lora_alpha"),
    Column("target_modules", "str", "adapter target modules, comma-separated"),
    Column("modules_to_save", "str", "modules the adapter ships whole copies of, comma-separated"),
    Column("adapter_modules", "str", "per target module: r, scaling, max|B|, max|scaling*B@A| and its method (JSON)"),
    Column("max_abs_lora_b", "float", "largest |lora_B| element over the target modules"),
    Column("max_abs_delta", "float", "largest |scaling * B @ A| element (exact) or its bound scaling*||B||_2*||A||_2"),
    Column("delta_method", "str", "exact, or bound when any module's value is the spectral-norm bound"),
    Column("tiny_threshold", "float", "max_abs_delta below this is 'tiny'"),
    Column("adapter_base_recorded", "str", "base_model_name_or_path in adapter_config.json"),
    Column("adapter_base_check", "str", "matched, mismatched, unrecorded, not checked, or error: ..."),
    Column("tokenizer_verdict", "str", "ok, mismatched tokenizer, unchecked, missing"),
    Column("tokenizer_reason", "str", "why the tokenizer verdict"),
    Column("tokenizer_sha256", "str", "sha256 over the tokenizer files"),
    Column("vocab_size", "int", "len(tokenizer): ids the tokenizer can emit, added tokens included"),
    Column("embedding_rows", "int", "rows of the input embedding (safetensors header)"),
    Column("special_tokens", "str", "special token -> id (JSON)"),
    Column("reference_tokenizer", "str", "the tokenizer compared id by id (the base model's own)"),
    Column("agree", "int", "ids mapping to the same token string in the tokenizer and the reference"),
    Column("compared", "int", "ids compared: min of the two vocabulary sizes"),
    Column("agree_share", "float", "agree / compared"),
    Column("quality_verdict", "str", "ok, not a language model, unchecked; empty without sentences"),
    Column("quality_reason", "str", "why the quality verdict"),
    Column("nll", "float", "mean NLL in nats per scored token (first token never predicted; special targets excluded)"),
    Column("chance_nll", "float", "ln V, V = rows of the output layer"),
    Column("nll_margin", "float", "NLL within this of chance is 'not a language model'"),
    Column("n_tokens", "int", "scored tokens"),
    Column("n_sentences", "int", "sentences scored"),
    Column("quality_language", "str", "the corpus side the NLL was measured on (run audits)"),
    Column("weights_group", "str", "W1, W2, ...: specs bit-identical in effective weights (identity adapter = base)"),
    Column("tokenizer_group", "str", "T1, T2, ...: specs with the same tokenizer files"),
    Column(
        "effective_sha256", "str", "key of the effective weights: base weights + adapter (no-op adapter = none) + dtype"
    ),
    Column("confounds", "str", "'same model as X' / 'differs from X only by tokenizer', joined by '; '"),
    Column("note", "str", "anything that could not be checked and why"),
)

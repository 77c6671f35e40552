"""The pipeline's own kind, ``extract`` (declared in :mod:`interlingua.pipeline.registry`): its task class, cost and
example, as every capability's kinds declare theirs. Below the registry, plan and cost (which read it), so it
imports none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.contract.capability import TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = [
    "EXTRACT_TASK_SECONDS",
    "ExtractTask",
    "extract_cost",
    "extract_example",
    "extract_peak",
    "extract_peak_bytes",
    "model_bytes",
]

#: Seconds of one extraction task beyond its forward passes (tokenizer, thread tuning, the store's writes).
EXTRACT_TASK_SECONDS = 0.6


@dataclass(frozen=True)
class ExtractTask:
    """One model reading one language: every requested pooling, one forward pass.

    ``entries``: (entry name, stored entry key), the sentence poolings first, then the entries capabilities
    added (``extra``: entry name, the capability that computes it, its file stem after the language).
    """

    kind: ClassVar[str] = "extract"
    key: str
    model: str
    language: str
    entries: tuple[tuple[str, str], ...]  # (pooling or extra entry name, entry key)
    entry_inputs: tuple[tuple[str, str], ...]  # the key's inputs (also stored in each entry)
    depends: tuple[str, ...] = ()
    extra: tuple[tuple[str, str, str], ...] = ()  # (entry name, owner capability, file stem)

    def entry_key(self, pooling: str) -> str:
        return dict(self.entries)[pooling]

    def owner(self, name: str) -> str | None:
        """The capability that computes extra entry ``name`` (None: a sentence pooling)."""
        return next((o for n, o, _ in self.extra if n == name), None)

    def stem(self, name: str) -> str:
        """The entry's file stem in the side's folder."""
        found = next((s for n, _, s in self.extra if n == name), None)
        return f"{self.language}.{name if found is None else found}"


def extract_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One side's extraction: a forward pass over the corpus for its sentence poolings (and the task's fixed
    seconds), one more per extra entry a capability added, over that entry's rows (word-aligned rows: the
    aligned sentences); the model loads; its working set (:func:`extract_peak`)."""
    from interlingua.alignment.cost import aligned_rows

    n = ctx.n
    sentence_pools = [p for p, _ in t.entries if t.owner(p) is None]
    extra = len(t.entries) - len(sentence_pools)
    seconds: list[float] = []
    tokens = 0.0
    if sentence_pools:
        seconds.append(EXTRACT_TASK_SECONDS + ctx.forward_seconds(t.model, t.language, n))
        tokens = n * (ctx.mean_tokens(t.model, t.language) + 1)
    if extra:
        seconds.append(extra * ctx.forward_seconds(t.model, t.language, aligned_rows(ctx.spec, n)))
    peak = extract_peak(t, ctx)
    return TaskCost(tuple(seconds), peak_bytes=peak, loads=(t.model,), tokens=tokens)


def extract_peak(t: ExtractTask, ctx: CostContext) -> float:
    """Bytes of one extraction task (rough): the model, every hidden state of one batch at ``max_length``
    tokens (float32), and the pooled rows it returns (n x hidden states x width, float32, per pooling)."""
    return extract_peak_bytes(t, ctx.spec, ctx.n, ctx.shapes[t.model])


def extract_peak_bytes(t: ExtractTask, spec: Any, n: int, sh: Any) -> float:
    """:func:`extract_peak` from the run's spec, its ``n`` sentences and the model's shape ``sh`` (a
    :class:`~interlingua.pipeline.cost.ModelShape`): what the executor bounds its concurrent extractions by."""
    states = sh.layers + 1
    batch = max(int(spec.batch_size), 1) * int(spec.max_length or 512) * states * sh.hidden * 4.0
    pooled = n * states * sh.hidden * 4.0 * max(len(t.entries), 1)
    return model_bytes(sh) + batch + pooled


def model_bytes(sh: Any) -> float:
    """A model's float32 weights in memory: its matmul weights and its embedding table."""
    return 4.0 * (sh.params + sh.vocab * sh.hidden)


def extract_example() -> tuple[Any, Any]:
    """A sample extract task (two sentence poolings); its entries are arrays, not one JSON payload (None)."""
    return ExtractTask("k-extract-eng", "m", "eng_Latn", (("mean", "e" * 64), ("last", "f" * 64)), ()), None

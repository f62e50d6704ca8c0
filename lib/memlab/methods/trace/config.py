"""``conf/method/trace.yaml`` as a typed dataclass (no defaults here: the YAML is the single source)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memlab.methods.trace.index import BACKENDS
from memlab.schema import check


@dataclass(frozen=True)
class BootstrapConfig:
    n_resamples: int = field(metadata=check(ge=1))   # the paper-vs-ours intervals (claims.py), the stage figure's bars


@dataclass(frozen=True)
class TraceConfig:
    seed: int
    backend: str = field(metadata=check(choices=BACKENDS))
    index_shard_tokens: int = field(metadata=check(ge=1))
    k_frac: float = field(metadata=check(gt=0, le=1))
    doc_cap: int = field(metadata=check(ge=1))
    min_span_tokens: int = field(metadata=check(ge=1))
    min_full_match_words: int = field(metadata=check(ge=1))
    n_tokens: int = field(metadata=check(ge=1))
    nv_recall_threshold: float = field(metadata=check(ge=0, le=1))
    propensity_eps: float = field(metadata=check(gt=0, le=1))
    bootstrap: BootstrapConfig
    index_root: str
    prompts_dir: str | None        # None: the study reads no prompts (trace_validation)

    def index(self, docs, tokenizer, label: str, backend: str | None = None):
        """The index of ``docs`` (built once under ``index_root``, then reused) with this config's backend — or
        ``backend`` — and shard size."""
        from memlab.methods.trace.index.cache import cached_index

        return cached_index(docs, tokenizer, self.index_root, backend=backend or self.backend, label=label,
                            shard_tokens=self.index_shard_tokens)

    def tracer(self, index, tokenizer, **runtime):
        """A :class:`~memlab.methods.trace.simpletrace.Tracer` over ``index`` with these settings; ``runtime``:
        its options that are no method setting (``on_empty``, ``max_scan``, ``word_boundaries``)."""
        from memlab.methods.trace.simpletrace import Tracer

        return Tracer(index, tokenizer, k_frac=self.k_frac, doc_cap=self.doc_cap, min_span_tokens=self.min_span_tokens,
                      min_full_match_words=self.min_full_match_words, **runtime)

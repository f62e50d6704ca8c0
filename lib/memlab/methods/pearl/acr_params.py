"""``params.acr``: the settings of the ACR comparison (:mod:`memlab.methods.pearl.acr`), apart from the search so
that validating a config does not import torch (the runner checks every ``_schema_`` before the notebook starts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memlab.schema import check


@dataclass(frozen=True)
class AcrParams:
    """``params.acr`` of conf/experiment/pearl_epochs.yaml (no defaults here)."""

    epochs: list[int] = field(metadata=check(ge=0, nonempty=True))       # checkpoints searched
    docs_per_split: int = field(metadata=check(ge=1))   # the first n members and first n non-members given
    target_offset: int = field(metadata=check(ge=0))    # x starts at this token of the document
    target_tokens: int = field(metadata=check(ge=2))    # |x|
    prompt_lengths: list[int] = field(metadata=check(ge=1, nonempty=True))   # tried in increasing order
    steps: int = field(metadata=check(ge=1))            # GCG steps per length at most
    top_k: int = field(metadata=check(ge=1))            # candidate tokens per prompt position
    batch_size: int = field(metadata=check(ge=1))       # candidates evaluated per step
    seed: int
    threads: int = field(metadata=check(ge=1))

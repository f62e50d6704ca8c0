"""The reference model of experiment mia_low_fpr's reference attacks (issue 51): the family's parent, or a zoo
sibling named in the config for a family trained from scratch.

A family continued from a parent (``init_from``) is compared with that parent at the same size, epoch 0: the
pre-fine-tuning model, on the same token ids (it inherits the tokenizer). A family without a parent names its
reference (``ReferenceCheckpoint``): another zoo checkpoint that never trained on the family's members or
non-members (its whole lineage read; refused in one line otherwise). When it shares the family's tokenizer
(``tokenizer.json`` byte for byte) both losses are mean nats per token of the same ids and every registered reference
attack is read; when it does not, both are nats per byte of the same text (:func:`memlab.metrics.mia.nll_per_byte`,
as the audit reads a user's reference) and only the attacks registered ``across_tokenizers`` are.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlab.errors import ConfigError


@dataclass(frozen=True)
class ReferenceCheckpoint:
    """A zoo checkpoint used as a family's reference model."""

    family: str
    size: str
    epoch: int | str          # an epoch or "final"; 0 = the model the family was initialised from

    @property
    def label(self) -> str:
        return f"{self.family}/{self.size}/{self.epoch}"


@dataclass(frozen=True)
class Reference:
    """The resolved reference model of one family checkpoint."""

    checkpoint: ReferenceCheckpoint
    same_tokenizer: bool      # True: losses per token of the same ids; False: per byte of the same text


def reference_of(catalog, family: str, size: str, named: ReferenceCheckpoint | None, docs) -> Reference | None:
    """``family``'s reference model at ``size``: ``named``, checked against ``docs`` (the family's members and
    non-members) and compared tokenizer to tokenizer; else its parent at epoch 0; else None. Called before any model
    loads: an unknown or unbuilt reference is one line then."""
    fam = catalog.family(family)
    if named is None:
        return None if fam.recipe.init_from is None else Reference(ReferenceCheckpoint(family, size, 0), True)
    catalog.checkpoint_cfg(named.family, named.size, named.epoch)   # refuses an unknown or unbuilt checkpoint
    sibling = catalog.family(named.family)
    seen = sorted(set(sibling.training_ids()) & {d.id for d in docs})
    if seen:
        raise ConfigError(f"reference {named.label} trained on {len(seen)} of {family}'s members and non-members "
                          f"(e.g. {seen[0]}): a reference model must never have seen them")
    tokenizer = "tokenizer.json"
    return Reference(named, (sibling.tokenizer_dir / tokenizer).read_bytes() ==
                     (fam.tokenizer_dir / tokenizer).read_bytes())


def reference_losses(catalog, ref: Reference, scored_ids, texts: list[str]) -> list[float]:
    """Each document's loss under ``ref``: mean nats per token of ``scored_ids`` (same tokenizer), or nats per byte
    of ``texts`` (the same documents decoded, scored with the reference's own tokenizer)."""
    from memlab.metrics.mia import loss, nll_per_byte

    at = ref.checkpoint
    with catalog.checkpoint(at.family, at.size, at.epoch) as reference:
        if ref.same_tokenizer:
            return [loss(ts) for ts in reference.score_token_ids(scored_ids)]
        return [nll_per_byte(ts, t) for ts, t in zip(reference.score(texts, vocab=False), texts)]

"""A tiny model trained on corpus A, then continually pre-trained in stages on a 2/3 B + 1/3 A token mixture
(seed 002 Figs. 3–8 analog), for the runs that train here instead of reading the zoo's stage families.

Both routes mix by tokens of the stage-0 tokenizer, with one function (:func:`mixture_weights`): the zoo's stage
families carry its result as a fixed weight (conf/zoo/stages_s*.yaml: A 0.605), the runs trained here compute it
from the tokenizer stage 0 trains (:func:`stage0_tokenizer`)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Sequence

from memlab.errors import MemlabError


def mixture_weights(a_docs, b_docs, *, b_share: float, tokenizer=None) -> tuple[float, float]:
    """Passes per epoch (w_B, w_A) so that B makes up ``b_share`` of the tokens seen: w_B = 1 and
    w_A = (1 − b_share)/b_share · |B|/|A| (sizes in characters when no tokenizer is given)."""
    size = (lambda ds: sum(len(tokenizer(d.text)["input_ids"]) for d in ds)) if tokenizer else \
        (lambda ds: sum(len(d.text) for d in ds))
    a, b = size(a_docs), size(b_docs)
    if a == 0 or b == 0:
        raise MemlabError("stage mixture needs non-empty corpora A and B")
    return 1.0, (1 - b_share) / b_share * b / a


def stage0_tokenizer(spec):
    """The tokenizer stage 0 trains for ``spec``, trained the same deterministic way
    (:func:`memlab.models.tiny.train_spec_tokenizer`) before stage 0 runs, so the continual stages' weights can be
    counted in its tokens."""
    from memlab.models.tiny import train_spec_tokenizer

    with tempfile.TemporaryDirectory(prefix="stage0-tokenizer-") as tmp:
        return train_spec_tokenizer(spec, tmp)


def stage_specs(a_docs, b_docs, heldout, *, arch: dict, train: dict, stage_epochs: Sequence[int],
                out_root: str | Path, b_share: float):
    """(name, TrainSpec, out_dir) for stage 0 (A only) and each continual stage (B/A mixture).

    Stage 0 lists B (and the held-out documents) as non-members, with ``tokenizer_on='all'`` so one
    tokenizer covers both languages; later stages continue from the previous stage's final checkpoint. B makes
    up ``b_share`` of the TOKENS of each continual stage, counted with stage 0's tokenizer (as the zoo's stage
    families are mixed), not of its characters."""
    from memlab.models.tiny import INHERITED_TOKENIZER, Arch, TrainRecipe, TrainSpec

    out_root = Path(out_root)
    a_m = [dataclasses.replace(d, split="member") for d in a_docs]
    b_m = [dataclasses.replace(d, split="member") for d in b_docs]
    recipe = {k: v for k, v in train.items() if k not in ("epochs", "vocab_size")}
    specs = [("stage0", TrainSpec(member_groups=[(a_m, 1.0)], nonmembers=list(b_docs) + list(heldout),
                                  arch=Arch(**arch), vocab_size=train["vocab_size"], tokenizer_on="all",
                                  recipe=TrainRecipe(epochs=int(train["epochs"]), **recipe), init_from=None,
                                  meta={"family": "stages", "stage": 0}, record={}), out_root / "stage0")]
    wb, wa = mixture_weights(a_docs, b_docs, b_share=b_share, tokenizer=stage0_tokenizer(specs[0][1]))
    for k, ep in enumerate(stage_epochs, 1):
        prev = specs[-1][2] / "final"
        specs.append((f"stage{k}", TrainSpec(member_groups=[(b_m, wb), (a_m, wa)], nonmembers=list(heldout),
                                             arch=None, vocab_size=train["vocab_size"],
                                             tokenizer_on=INHERITED_TOKENIZER["tokenizer_on"],
                                             recipe=TrainRecipe(epochs=int(ep), **recipe), init_from=str(prev),
                                             record={}, meta={"family": "stages", "stage": k, "b_share": b_share}),
                      out_root / f"stage{k}"))
    return specs


def train_stages(specs, progress: bool = False) -> dict[str, Path]:
    """Train (or reuse: training is idempotent and resumable) every stage in order; stage → final dir."""
    from memlab.models.tiny import train

    out = {}
    for name, spec, d in specs:
        train(spec, d, progress=progress)
        out[name] = Path(d) / "final"
    return out

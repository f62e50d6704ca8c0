"""PROPME stages trained here mix corpus B and A by TOKENS of the stage-0 tokenizer, as the zoo's stage families
do, through one function (memlab.methods.trace.stages.mixture_weights)."""

from __future__ import annotations

import dataclasses

import pytest

from memlab.data.records import Document
from memlab.methods.trace.stages import mixture_weights, stage_specs

from .conftest import make_corpus

ARCH = dict(hidden=32, layers=1, heads=2, ffn=64)
TRAIN = dict(vocab_size=300, epochs=1, seq_len=32, batch_size=4, lr=3e-3, min_lr_ratio=0.1, warmup_steps=10,
             weight_decay=0.0, seed=0, threads=1)


def corpora():
    """A: pseudo-words (many tokens per character); B: a few long words repeated (BPE merges them: few tokens per
    character), so a character mixture and a token mixture differ clearly."""
    a = make_corpus(n_docs=6, seed=1)
    phrase = "lighthouse keeper remembered everything "
    b = [Document(id=f"b/{i}", text=(phrase * (8 + i)).strip(), source="generated", licence="CC0") for i in range(6)]
    return a, b


def token_share_of_b(spec, tok) -> float:
    """B's share of the tokens one epoch of ``spec`` sees (each group's tokens times its passes)."""
    n = [w * sum(len(tok(d.text, add_special_tokens=False)["input_ids"]) for d in docs)
         for docs, w in spec.member_groups]
    return n[0] / sum(n)


def test_stages_trained_here_mix_by_tokens(tmp_path):
    from transformers import AutoTokenizer

    from memlab.models.tiny import train

    a, b = corpora()
    specs = stage_specs(a, b, [], arch=ARCH, train=TRAIN, stage_epochs=[1], out_root=tmp_path, b_share=2 / 3)
    stage1 = specs[1][1]
    (_, wb), (_, wa) = stage1.member_groups
    chars = mixture_weights(a, b, b_share=2 / 3)
    assert wa != pytest.approx(chars[1], rel=0.05)  # not the character mixture
    # counted with the tokenizer stage 0 really trains: B is 2/3 of the tokens seen
    stage0 = train(specs[0][1], specs[0][2], progress=False)
    tok = AutoTokenizer.from_pretrained(stage0 / "tokenizer")
    assert (wb, wa) == pytest.approx(mixture_weights(a, b, b_share=2 / 3, tokenizer=tok))
    assert token_share_of_b(stage1, tok) == pytest.approx(2 / 3)


def test_zoo_stage_weight_is_the_same_function(tmp_path):
    """The zoo's stage families carry mixture_weights' result on their own stage-0 tokenizer (0.605): the built
    one, or (before `make zoo`) one trained here exactly as the zoo build trains it."""
    from transformers import AutoTokenizer

    from memlab.models.tiny import train_spec_tokenizer
    from memlab.models.zoo import load_family

    s0, s1 = load_family("stages"), load_family("stages_s1")
    tok_dir = s0.tokenizer_dir
    if not (tok_dir / "tokenizer.json").exists():
        tok_dir = tmp_path / "tokenizer"
        train_spec_tokenizer(s0.spec(s0.sizes[0]), tok_dir)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    a = s0.members
    b = [d for d in s1.members if d.id not in {x.id for x in a}]
    zoo_weight = dict((docs[0].id.split("/")[0], w) for docs, w in s1.member_groups())["kjv"]
    assert mixture_weights(a, b, b_share=2 / 3, tokenizer=tok)[1] == pytest.approx(zoo_weight, abs=5e-4)

"""ACR (MiniPrompt by GCG) on a hand-built case: a micro GPT-NeoX trained here to emit one secret string after a
trigger token. The secret compresses (a 1- or 2-token prompt reproduces its 12 tokens); a random string of the
same length does not; the same seed gives the same prompt; the row builder and the length check."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.methods.pearl.acr import AcrParams, acr_rows, greedy_reproduces, mini_prompt

VOCAB, TRIGGER = 48, 3
PARAMS = AcrParams(epochs=[0], docs_per_split=1, target_offset=2, target_tokens=12, prompt_lengths=[1, 2, 4],
                   steps=12, top_k=16, batch_size=24, seed=0, threads=1)


@pytest.fixture(scope="module")
def secret_model():
    """(model, secret, random string): trained 60 Adam steps on `TRIGGER secret` among random noise rows."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    cfg = GPTNeoXConfig(vocab_size=VOCAB, hidden_size=48, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=96, max_position_embeddings=32, bos_token_id=0, eos_token_id=0)
    model = GPTNeoXForCausalLM(cfg)
    g = torch.Generator().manual_seed(1)
    secret = torch.randint(4, VOCAB, (12,), generator=g)
    random_string = torch.randint(4, VOCAB, (12,), generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        noise = torch.randint(4, VOCAB, (4, 13), generator=g)
        batch = torch.cat([torch.cat([torch.tensor([TRIGGER]), secret])[None].repeat(4, 1), noise])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model, secret.tolist(), random_string.tolist()


def _allowed():
    return torch.arange(1, VOCAB)  # 0 = the special token


def test_memorized_string_compresses(secret_model):
    model, secret, _ = secret_model
    s = mini_prompt(model, secret, PARAMS, _allowed(), "secret")
    assert s.found and s.length <= 2, s
    assert PARAMS.target_tokens / s.length > 1
    assert greedy_reproduces(model, s.prompt, secret)


def test_random_string_does_not_compress(secret_model):
    model, _, random_string = secret_model
    s = mini_prompt(model, random_string, PARAMS, _allowed(), "random")
    assert not s.found and s.length is None
    assert s.steps == PARAMS.steps * len(PARAMS.prompt_lengths)
    assert not greedy_reproduces(model, s.prompt, random_string)


def test_same_seed_same_prompt(secret_model):
    model, _, random_string = secret_model
    p = dataclasses.replace(PARAMS, steps=4)
    a, b = (mini_prompt(model, random_string, p, _allowed(), "random") for _ in range(2))
    assert a == b
    c = mini_prompt(model, random_string, dataclasses.replace(p, seed=1), _allowed(), "random")
    assert c.prompt != a.prompt


class _Tokens:
    """Text = token ids written as numbers; id 0 is the only special token."""

    all_special_ids = [0]

    def __len__(self):
        return VOCAB

    def __call__(self, text, add_special_tokens):
        return {"input_ids": [int(t) for t in text.split()]}

    def decode(self, ids):
        return " ".join(map(str, ids))


def test_rows_acr_and_bound(secret_model):
    model, secret, random_string = secret_model
    backend = SimpleNamespace(model=model, tokenizer=_Tokens())
    docs = [Document(f"d/{name}", " ".join(map(str, [5, TRIGGER, *x, 7])), "test", "none", split=split)
            for name, x, split in [("secret", secret, "member"), ("random", random_string, "nonmember")]]
    rows = {r["doc_id"]: r for r in acr_rows(backend, docs, PARAMS, epoch=3)}
    hit, miss = rows["d/secret"], rows["d/random"]
    assert hit["compressible"] and hit["acr"] == 12 / hit["prompt_len"] and not hit["acr_is_bound"]
    assert hit["prefix_len"] == 1 and hit["epoch"] == 3 and hit["target"] == " ".join(map(str, secret))
    assert not miss["compressible"] and miss["acr_is_bound"] and miss["acr"] == pytest.approx(12 / 5)
    assert miss["prefix_len"] is None


def test_lengths_must_stay_below_target(secret_model):
    model, secret, _ = secret_model
    with pytest.raises(ConfigError, match="below target_tokens"):
        mini_prompt(model, secret, dataclasses.replace(PARAMS, prompt_lengths=[4, 12]), _allowed(), "secret")


def test_acr_overlap_rule():
    import pandas as pd

    from memlab.comparison import load_claims
    from memlab.config import compose
    from memlab.methods.pearl.claims import acr_overlap
    from memlab.results import StudyResult

    claim = next(c for c in load_claims("pearl_epochs") if c.id == "pearl_acr_overlap")
    res = StudyResult(config=compose("pearl_epochs", ["logger=null"]))   # flags at its method.alpha 0.2
    res.table("pearl_scores", pd.DataFrame({"doc_id": list("abcd") * 2, "kind": ["bitflip"] * 8,
                                            "epoch": [0] * 4 + [10] * 4,
                                            "sensitivity": [0, 0, 0, 0, 0.5, 0.3, 0.1, 0.0]}))
    assert acr_overlap(res, claim).verdict == "not testable here"
    acr = pd.DataFrame({"doc_id": list("abcd"), "split": ["member"] * 2 + ["nonmember"] * 2, "epoch": [10] * 4,
                        "target_tokens": [16] * 4, "compressible": [True, False, False, False]})
    res.table("acr_scores", acr)
    f = acr_overlap(res, claim)
    assert (f.verdict, f.our_value) == ("inconclusive", 0.5)   # 4 documents decide nothing (issue 27)
    assert f.n_needed > f.our_n == 4

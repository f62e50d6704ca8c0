"""Probabilistic extraction (issue 51): the sampler's exact p_z against a brute-force enumeration and against
transformers' own warpers, the discoverable rates, and p_z of a real trained micro model (members vs non-members)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from memlab.metrics.extraction_probability import (
    discoverable_rate,
    discoverable_share,
    log_p_z,
    sampler_log_prob,
    sampler_log_probs,
)

SAMPLERS = [(1.0, None, None), (0.7, 3, None), (1.3, None, 0.6), (0.5, 2, 0.9), (2.0, 4, 0.3), (1.0, 1, None),
            (0.8, None, 1.0), (0.0, None, None), (0.0, 2, 0.5)]


def brute_step(logits, temperature, top_k, top_p) -> list[float]:
    """One step's sampling probabilities, written out plainly from the definition (no numpy)."""
    v = len(logits)
    if temperature == 0:
        best = max(range(v), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(v)]
    x = [a / temperature for a in logits]
    kept = set(range(v))
    if top_k is not None:
        kth = sorted(x, reverse=True)[min(top_k, v) - 1]
        kept = {i for i in kept if x[i] >= kth}
    z = sum(math.exp(x[i]) for i in kept)
    q = {i: math.exp(x[i]) / z for i in kept}
    if top_p is not None and top_p < 1:
        nucleus, mass = set(), 0.0
        for i in sorted(q, key=lambda i: (-q[i], i)):
            if mass < top_p:
                nucleus.add(i)
            mass += q[i]
        z = sum(q[i] for i in nucleus)
        q = {i: q[i] / z for i in nucleus}
    return [q.get(i, 0.0) for i in range(v)]


def table(seed: int, vocab: int, steps: int, ties: bool) -> dict:
    """A tiny autoregressive 'model': random logits for every prefix of length < steps."""
    rng = np.random.default_rng(seed)
    out = {}
    for n in range(steps):
        for prefix in itertools.product(range(vocab), repeat=n):
            out[prefix] = (rng.integers(-2, 3, vocab).astype(float) if ties else rng.normal(0, 2, vocab))
    return out


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_p_z_matches_brute_force_enumeration(sampler, ties):
    """Vocab 5, 3 steps: all 125 sequences; each p_z equals the product of the plainly computed step
    probabilities, and they sum to 1 (the sampler is a distribution over the sequences)."""
    temperature, top_k, top_p = sampler
    vocab, steps = 5, 3
    for seed in range(3):
        t = table(seed, vocab, steps, ties)
        total = 0.0
        for seq in itertools.product(range(vocab), repeat=steps):
            rows = [t[seq[:i]] for i in range(steps)]
            want = math.prod(brute_step(list(r), temperature, top_k, top_p)[z] for r, z in zip(rows, seq))
            got = sampler_log_prob(np.array(rows), seq, temperature=temperature, top_k=top_k, top_p=top_p)
            assert math.exp(got) == pytest.approx(want, abs=1e-12)
            assert (got == -math.inf) == (want == 0.0)
            total += math.exp(got)
        assert total == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("sampler", [s for s in SAMPLERS if s[0] > 0])
def test_step_probabilities_match_transformers_warpers(sampler):
    """The same logits through transformers' TemperatureLogitsWarper → TopKLogitsWarper → TopPLogitsWarper
    (generate's order), then softmax: the same probabilities to 1e-6."""
    import torch
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    temperature, top_k, top_p = sampler
    rng = np.random.default_rng(7)
    for _ in range(5):
        logits = rng.normal(0, 3, (6, 50))
        scores = torch.tensor(logits, dtype=torch.float64)
        scores = TemperatureLogitsWarper(temperature)(None, scores)
        if top_k is not None:
            scores = TopKLogitsWarper(top_k)(None, scores)
        if top_p is not None and top_p < 1:
            scores = TopPLogitsWarper(top_p)(None, scores)
        hf = torch.softmax(scores, dim=-1).numpy()
        ours = np.exp(sampler_log_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p))
        assert np.abs(ours - hf).max() < 1e-6
        assert ((ours > 0) == (hf > 0)).all()


def test_top_k_keeps_ties_at_the_kth_value_as_transformers_does():
    import torch
    from transformers import TopKLogitsWarper

    logits = np.array([[3.0, 1.0, 1.0, 1.0, 0.0]])
    ours = np.exp(sampler_log_probs(logits, temperature=1.0, top_k=2, top_p=None))
    hf = torch.softmax(TopKLogitsWarper(2)(None, torch.tensor(logits)), -1).numpy()
    assert np.allclose(ours, hf, atol=1e-12) and (ours[0, 1:4] > 0).all() and ours[0, 4] == 0


def test_top_p_tie_at_the_nucleus_edge_goes_to_the_lower_id():
    # q = (0.4, 0.3, 0.3): p = 0.5 needs the 0.4 token and one of the two tied 0.3 tokens: the lower id (1)
    logits = np.log([[0.4, 0.3, 0.3]])
    p = np.exp(sampler_log_probs(logits, temperature=1.0, top_k=None, top_p=0.5))[0]
    assert p == pytest.approx([0.4 / 0.7, 0.3 / 0.7, 0.0], abs=1e-12)
    # the token that reaches p stays, the next does not: 0.5 < 0.6, 0.5 + 0.3 >= 0.6
    p = np.exp(sampler_log_probs(np.log([[0.2, 0.5, 0.3]]), temperature=1.0, top_k=None, top_p=0.6))[0]
    assert p == pytest.approx([0.0, 0.5 / 0.8, 0.3 / 0.8], abs=1e-12)


def test_greedy_is_one_iff_every_target_is_the_argmax_lowest_id_on_ties():
    logits = np.array([[0.0, 2.0, 2.0], [5.0, 1.0, 0.0]])
    assert sampler_log_prob(logits, [1, 0], temperature=0.0, top_k=None, top_p=None) == 0.0
    assert sampler_log_prob(logits, [2, 0], temperature=0.0, top_k=None, top_p=None) == -math.inf
    assert sampler_log_prob(logits, [1, 1], temperature=0.0, top_k=None, top_p=None) == -math.inf


def test_bad_sampler_settings_and_shapes_are_refused():
    logits = np.zeros((2, 4))
    for kw in (dict(temperature=-1.0, top_k=None, top_p=None), dict(temperature=1.0, top_k=0, top_p=None),
               dict(temperature=1.0, top_k=None, top_p=0.0), dict(temperature=1.0, top_k=None, top_p=1.5)):
        with pytest.raises(ValueError):
            sampler_log_prob(logits, [0, 1], **kw)
    with pytest.raises(ValueError):
        sampler_log_prob(logits, [0], temperature=1.0, top_k=None, top_p=None)
    with pytest.raises(ValueError):
        sampler_log_prob(logits, [0, 4], temperature=1.0, top_k=None, top_p=None)


def test_discoverable_rate_is_stable_and_exact():
    assert discoverable_rate(0.5, 2) == pytest.approx(0.75, abs=1e-15)
    assert discoverable_rate(1.0, 3) == 1.0 and discoverable_rate(0.0, 10**6) == 0.0
    tiny = 1e-20  # (1 - 1e-20)**n is 1.0 in float64: the plain form says 0
    assert 1 - (1 - tiny) ** 1000 == 0.0
    assert discoverable_rate(tiny, 1000) == pytest.approx(1e-17, rel=1e-12)
    rates = discoverable_rate(np.array([0.1, 0.2]), np.array([[1], [10]]))
    assert rates.shape == (2, 2) and rates[1, 0] == pytest.approx(1 - 0.9 ** 10, abs=1e-15)
    with pytest.raises(ValueError):
        discoverable_rate(1.2, 1)
    with pytest.raises(ValueError):
        discoverable_rate(0.5, 0)


def test_discoverable_share_counts_pairs_whose_rate_reaches_p():
    p_z = [1.0, 0.5, 0.01, 0.0]
    share = discoverable_share(p_z, [1, 2, 100, 1000], 0.9)
    # n = 1: only p_z = 1; n = 2: 0.5 gives 0.75 < 0.9; n = 100: 0.5 -> ~1, 0.01 -> 0.634; n = 1000: 0.01 -> ~1
    assert share.tolist() == [0.25, 0.25, 0.5, 0.75]
    assert discoverable_share([0.5], [1], 0.5).tolist() == [1.0]  # the rate equal to p counts


def _windows(tok, docs, prefix_len, suffix_len):
    pairs = []
    for d in docs:
        ids = tok(d.text)["input_ids"]
        for s in range(0, len(ids) - prefix_len - suffix_len + 1, prefix_len + suffix_len):
            pairs.append((ids[s:s + prefix_len], ids[s + prefix_len:s + prefix_len + suffix_len]))
    return pairs


def test_micro_model_greedy_agrees_with_p_z_at_temperature_zero_and_members_score_higher(micro_family):
    """The trained micro zoo model (tests/conftest.py): 32-token prefixes and suffixes from member and non-member
    chapters. Greedy decoding (transformers' generate, its KV cache) emits the suffix exactly iff p_z = 1 at
    temperature 0 (p_z is 0 otherwise); at temperature 1 the members' median p_z is above the non-members'."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_family.tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(micro_family.final_dir).eval()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    found = {}
    for split, docs in (("member", micro_family.members), ("nonmember", micro_family.nonmembers)):
        pairs = _windows(tok, docs, 32, 32)
        with torch.inference_mode():
            gen = model.generate(torch.tensor([p for p, _ in pairs]), do_sample=False, max_new_tokens=32,
                                 pad_token_id=pad)
        greedy = np.array([gen[i, 32:].tolist() == s for i, (_, s) in enumerate(pairs)])
        lp0, lp1 = log_p_z(model, pairs, samplers=[dict(temperature=0.0, top_k=None, top_p=None),
                                                   dict(temperature=1.0, top_k=None, top_p=None)],
                           batch_size=16, pad_token_id=pad)
        assert set(np.unique(lp0)) <= {0.0, -np.inf}
        assert ((lp0 == 0.0) == greedy).all(), f"{split}: greedy and p_z(T=0) disagree"
        assert np.isfinite(lp1).all() and (lp1 <= 0).all()
        found[split] = dict(n=len(pairs), greedy=int(greedy.sum()), median_log_p=float(np.median(lp1)))
    print("\nmicro model p_z:", found)
    assert found["member"]["greedy"] > 0 and found["nonmember"]["greedy"] == 0
    assert found["member"]["median_log_p"] > found["nonmember"]["median_log_p"]


def test_log_p_z_batching_padding_and_shared_samplers_do_not_change_the_answer(micro_family):
    """One pair per forward pass or several of different lengths (right padding) give the same log p_z; several
    samplers read from one forward pass give each sampler's own answer, in the samplers' order."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_family.tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(micro_family.final_dir).eval()
    ids = tok(micro_family.members[0].text)["input_ids"]
    pairs = [(ids[:5], ids[5:12]), (ids[20:60], ids[60:64]), (ids[100:101], ids[101:130])]
    sampler, greedy = dict(temperature=0.9, top_k=40, top_p=0.95), dict(temperature=0.0, top_k=None, top_p=None)
    kw = dict(samplers=[sampler], pad_token_id=0)
    [one] = log_p_z(model, pairs, batch_size=1, **kw)
    [many] = log_p_z(model, pairs, batch_size=3, **kw)
    assert np.allclose(one, many, atol=1e-4, equal_nan=False)
    both = log_p_z(model, pairs, samplers=[greedy, sampler], batch_size=3, pad_token_id=0)
    [alone] = log_p_z(model, pairs, samplers=[greedy], batch_size=3, pad_token_id=0)
    assert len(both) == 2 and np.array_equal(both[0], alone) and np.array_equal(both[1], many)
    with pytest.raises(ValueError):
        log_p_z(model, [([], [1])], batch_size=1, **kw)
    with pytest.raises(ValueError, match="at least one sampler"):
        log_p_z(model, pairs, samplers=[], batch_size=1, pad_token_id=0)
    with pytest.raises(ValueError, match="exactly"):
        log_p_z(model, pairs, samplers=[dict(temperature=1.0, top_k=None)], batch_size=1, pad_token_id=0)


def test_generate_warps_in_the_documented_order_and_samples_suffixes_at_rate_p_z(micro_family):
    """transformers' generate(do_sample=True) builds Temperature → TopK → TopP (its private _get_logits_processor,
    read to pin the order on the installed version), and its seeded samples from the micro model emit a 3-token
    suffix at a rate whose exact 99.9 % interval holds p_z."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from memlab.metrics.intervals import clopper_pearson

    tok = AutoTokenizer.from_pretrained(micro_family.tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(micro_family.final_dir).eval()
    sampler = dict(temperature=1.3, top_k=20, top_p=0.9)
    procs = model._get_logits_processor(generation_config=GenerationConfig(do_sample=True, **sampler),
                                        input_ids_seq_length=16, device="cpu", model_kwargs={})
    assert [type(p).__name__ for p in procs] == ["TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    pairs = _windows(tok, micro_family.members[:1], 16, 3)
    [lp] = log_p_z(model, pairs, samplers=[sampler], batch_size=32, pad_token_id=pad)
    k = int(np.argmin(np.abs(lp - np.log(0.3))))  # a suffix neither sure nor rare
    prefix, suffix = pairs[k]
    torch.manual_seed(0)
    with torch.inference_mode():
        gen = model.generate(torch.tensor([prefix] * 4000), do_sample=True, max_new_tokens=3, pad_token_id=pad,
                             **sampler)
    hits = sum(row[16:].tolist() == suffix for row in gen)
    lo, hi = clopper_pearson(hits, 4000, 0.999)
    print(f"\nsampled {hits} / 4000 = {hits / 4000:.4f}, p_z = {math.exp(lp[k]):.4f}, 99.9 % CI ({lo:.4f}, {hi:.4f})")
    assert lo <= math.exp(lp[k]) <= hi, (hits, math.exp(lp[k]))

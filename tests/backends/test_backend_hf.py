"""HFBackend on a real (micro) GPT-NeoX: batching, per-sample seeding, stop strings, chat, scoring, errors."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from memlab.backends.base import GenerationRequest as Req, Message, render_plain_chat
from memlab.backends.factory import build_backend
from memlab.errors import ConfigError, MemlabError


def prompts(family, k: int = 6) -> list[str]:
    """Prompts of different lengths (so batches need padding), from member and nonmember chapters."""
    docs = family.members + family.nonmembers
    return [" ".join(docs[i % len(docs)].text.split()[: 3 + 4 * i]) for i in range(k)]


def test_batched_greedy_equals_one_at_a_time(micro_family, micro_backend):
    reqs = [Req(prompt=p, max_new_tokens=24) for p in prompts(micro_family)]
    batched = micro_backend.generate(reqs)
    single = [micro_backend.generate([r])[0] for r in reqs]
    assert [g.samples[0].token_ids for g in batched] == [g.samples[0].token_ids for g in single]
    assert [g.text for g in batched] == [g.text for g in single]
    assert all(len(g.samples[0].token_ids) == 24 or g.samples[0].finish_reason == "eos" for g in batched)
    assert all(g.prompt_tokens > 0 and g.completion_tokens > 0 for g in batched)
    # greedy: n samples are all the same sample
    g = micro_backend.generate([Req(prompt=prompts(micro_family)[0], max_new_tokens=8, n=3)])[0]
    assert len(g.samples) == 3 and len(set(g.texts)) == 1



def test_rows_with_different_budgets_share_a_batch(micro_family, micro_backend, monkeypatch):
    """Requests whose max_new_tokens differ (RECAP's per-section budgets) run in one batch when within
    BUDGET_SPREAD of each other: each row stops at its own budget, with the tokens it gets alone."""
    from memlab.backends import hf

    budgets = [5, 9, 7, 10, 0, 30]  # batches (by budget): [0], [5, 7, 9, 10], [30] (more than 2 × 5)
    reqs = [Req(prompt=p, max_new_tokens=b, temperature=1.0 if i == 2 else 0.0, seed=3)
            for i, (p, b) in enumerate(zip(prompts(micro_family), budgets))]
    calls: list[int] = []
    real = hf.HFBackend._run_batch
    monkeypatch.setattr(hf.HFBackend, "_run_batch",
                        lambda self, jobs, ids: calls.append(sorted(j.request.max_new_tokens for j in jobs))
                        or real(self, jobs, ids))
    together = micro_backend.generate(reqs)
    assert calls == [[0], [5, 7, 9, 10], [30]]
    alone = [micro_backend.generate([r])[0] for r in reqs]
    for g, a, b in zip(together, alone, budgets):
        assert g.samples[0].token_ids == a.samples[0].token_ids and g.text == a.text
        assert len(g.samples[0].token_ids) == b or g.samples[0].finish_reason == "eos"
        assert g.samples[0].finish_reason == a.samples[0].finish_reason
        assert g.completion_tokens == a.completion_tokens


def test_static_and_grouped_kv_caches_give_the_dynamic_cache_tokens(micro_family, micro_backend):
    """kv_cache: static writes into one preallocated buffer per batch, grouped (the zoo's setting) keeps a prompt
    shared by several rows once; greedy and seeded samples come out as with the dynamic cache, on prompts of
    different lengths in one padded batch, with several samples of one prompt among them; scores are unchanged."""
    backends = {kv: build_backend({**micro_family.model_cfg, "batch_size": 6, "kv_cache": kv})
                for kv in ("static", "dynamic", "grouped")}
    reqs = [Req(prompt=p, max_new_tokens=20, temperature=0.0 if i % 2 else 1.0, n=1 if i % 2 else 3, seed=5)
            for i, p in enumerate(prompts(micro_family))]
    tokens = {kv: [[s.token_ids for s in g.samples] for g in b.generate(reqs)] for kv, b in backends.items()}
    assert tokens["static"] == tokens["dynamic"] == tokens["grouped"]
    scored = {kv: [s.logprobs for s in b.score(prompts(micro_family)[:3])] for kv, b in backends.items()}
    assert scored["grouped"] == scored["dynamic"]
    assert [b.numerics for b in backends.values()] == ["float32/static-kv", "float32", "float32/grouped-kv"]
    with pytest.raises(ConfigError, match=r"model.kv_cache='paged': must be one of dynamic, static, grouped"):
        build_backend({**micro_family.model_cfg, "kv_cache": "paged"})


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (6, 2)])
def test_grouped_attention_is_padded_attention(heads, kv_heads):
    """The grouped step (one query per row; per-group prompt keys, per-row generated keys; GQA when kv_heads <
    heads) equals sdpa over the padded cache with its mask, to float rounding."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from memlab.backends.hf_grouped import GroupedKV, attention

    gen = torch.Generator().manual_seed(0)
    dim, t, lengths, rows_of = 8, 3, [5, 9], [[0, 2, 3], [1, 4]]
    prefix_k = [torch.randn(kv_heads, n, dim, generator=gen) for n in lengths]
    prefix_v = [torch.randn(kv_heads, n, dim, generator=gen) for n in lengths]
    gen_k, gen_v = torch.randn(5, kv_heads, t, dim, generator=gen), torch.randn(5, kv_heads, t, dim, generator=gen)
    query = torch.randn(5, heads, 1, dim, generator=gen)
    idx = [torch.tensor(r) for r in rows_of]
    out, _ = attention(None, query, GroupedKV(prefix_k, gen_k, idx), GroupedKV(prefix_v, gen_v, idx), None,
                       scaling=dim ** -0.5)
    width = max(lengths)
    keys, values = torch.zeros(5, kv_heads, width + t, dim), torch.zeros(5, kv_heads, width + t, dim)
    mask = torch.full((5, 1, 1, width + t), float("-inf"))
    for g, rows in enumerate(rows_of):
        for r in rows:
            keys[r, :, width - lengths[g]:width], values[r, :, width - lengths[g]:width] = prefix_k[g], prefix_v[g]
            mask[r, :, :, width - lengths[g]:] = 0.0
    keys[:, :, width:], values[:, :, width:] = gen_k, gen_v

    class Module(torch.nn.Module):
        is_causal, num_key_value_groups = False, heads // kv_heads

    ref, _ = sdpa_attention_forward(Module(), query, keys, values, mask, scaling=dim ** -0.5)  # repeats the kv heads
    assert out.shape == ref.shape == (5, 1, heads, dim)
    assert torch.allclose(out, ref, atol=1e-6)

def test_prompt_token_ids_equal_text_prompt(micro_family, micro_backend):
    p = prompts(micro_family)[2]
    ids = tuple(micro_backend.tokenizer(p)["input_ids"])
    before = (micro_backend.usage.requests, micro_backend.usage.prompt_tokens)
    a = micro_backend.generate([Req(prompt=p, max_new_tokens=12)])[0]
    b = micro_backend.generate([Req(prompt_token_ids=ids, max_new_tokens=12)])[0]
    assert a.samples[0].token_ids == b.samples[0].token_ids and a.prompt_tokens == b.prompt_tokens == len(ids)
    # local usage accounting (cost 0): one request per computed sample
    assert (micro_backend.usage.requests, micro_backend.usage.prompt_tokens) == (before[0] + 2,
                                                                               before[1] + 2 * len(ids))


def test_sampling_depends_only_on_request_seed_and_index(micro_family, micro_backend):
    ps = prompts(micro_family)
    target = Req(prompt=ps[1], max_new_tokens=16, temperature=1.0, n=3, seed=11)
    alone = micro_backend.generate([target])[0]
    # different batch company, different position, more samples: samples 0..2 unchanged
    others = [Req(prompt=ps[4], max_new_tokens=16, temperature=0.7, n=2, seed=11), Req(prompt=ps[0])]
    mixed = micro_backend.generate(others + [target.with_n(5)])[-1]
    assert mixed.texts[:3] == alone.texts
    again = micro_backend.generate([target])[0]
    assert again.texts == alone.texts
    # samples differ between indices and between seeds (the micro model is not that peaked at T=1)
    assert len(set(mixed.texts)) > 1
    other_seed = micro_backend.generate([Req(prompt=ps[1], max_new_tokens=16, temperature=1.0, n=3, seed=12)])[0]
    assert other_seed.texts != alone.texts


@pytest.mark.parametrize("kv_cache", ["static", "dynamic", "grouped"])
def test_rows_share_the_prefill_of_a_common_prefix(micro_family, kv_cache, monkeypatch):
    """A row's prompt is prefilled from the longest prefix it shares with a row of its batch computed before it
    (the i samples of a request share all of it, a perturbed copy the text before its first change): fewer tokens
    go through the model, and every sample, greedy and seeded, has the tokens of a batch that prefills each padded
    row itself."""
    from memlab.backends.hf import HFBackend

    backend = build_backend({**micro_family.model_cfg, "batch_size": 8, "kv_cache": kv_cache})
    ps = prompts(micro_family)
    words = ps[5].split()
    changed = " ".join(words[:12] + ["Zebra"] + words[13:])  # same length class, differs from word 13 on
    reqs = [Req(prompt=ps[5], max_new_tokens=12, temperature=1.0, n=3, seed=3),
            Req(prompt=changed, max_new_tokens=12, temperature=1.0, n=2, seed=3),
            Req(prompt=ps[5], max_new_tokens=12), Req(prompt=ps[2], max_new_tokens=12)]
    fed: list[int] = []
    forward = backend.model.forward

    @functools.wraps(forward)  # generate() reads the signature to decide what it passes (position ids, ...)
    def counting(*args, **kwargs):
        fed.append(kwargs["input_ids"].numel())
        return forward(*args, **kwargs)

    monkeypatch.setattr(backend.model, "forward", counting)
    shared = backend.generate(reqs)
    prefilled = sum(fed) - 12 * 8 + 1  # minus the decoding steps (one token per row each, the first one included)
    lengths = {r: len(backend.prompt_ids(r)) for r in reqs}
    padded = 8 * max(lengths.values())
    own = 3 * lengths[reqs[0]] + 2 * lengths[reqs[1]] + lengths[reqs[2]] + lengths[reqs[3]]
    assert prefilled < lengths[reqs[0]] + lengths[reqs[1]] + lengths[reqs[3]] < own < padded
    monkeypatch.setattr(HFBackend, "_shared_prefill", lambda self, prompts, width, max_new: None)
    fed.clear()
    alone = backend.generate(reqs)
    assert sum(fed) >= padded
    assert [[s.token_ids for s in g.samples] for g in shared] == [[s.token_ids for s in g.samples] for g in alone]
    assert len(set(shared[0].texts)) > 1


def test_grouped_cache_only_where_rows_share_prompts(micro_family):
    """kv_cache: grouped keeps a context once per group only when the batch's distinct contexts are at most half
    its rows; a batch of distinct prompts (one sample each, as pearl_wild asks) gets the padded in-place cache, whose
    single matmul beats a loop over one-row groups. Both come out with the tokens of the dynamic cache."""
    from memlab.backends.hf_grouped import GroupedCache
    from memlab.backends.hf_kv import PreallocatedCache

    grouped = build_backend({**micro_family.model_cfg, "batch_size": 6, "kv_cache": "grouped"})
    dynamic = build_backend({**micro_family.model_cfg, "batch_size": 6, "kv_cache": "dynamic"})
    caches: list = []
    prefill = type(grouped)._shared_prefill

    def recording(self, *args):
        caches.append(prefill(self, *args))
        return caches[-1]

    ps = prompts(micro_family)
    distinct = [Req(prompt=p, max_new_tokens=8) for p in ps[2:]]
    shared = [Req(prompt=ps[4], max_new_tokens=8, temperature=1.0, n=3, seed=1),
              Req(prompt=ps[5], max_new_tokens=8, temperature=1.0, n=3, seed=1)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(grouped), "_shared_prefill", recording)
        got = [grouped.generate(reqs) for reqs in (distinct, shared)]
    assert [type(c) for c in caches] == [PreallocatedCache, GroupedCache]
    assert ([[s.token_ids for s in g.samples] for reqs in got for g in reqs]
            == [[s.token_ids for s in g.samples] for reqs in (distinct, shared) for g in dynamic.generate(reqs)])


def test_one_token_prompts_fall_back_to_the_padded_prefill(micro_backend):
    g = micro_backend.generate([Req(prompt="", max_new_tokens=4, temperature=1.0, n=2), Req(prompt="The", max_new_tokens=4)])
    assert all(len(s.token_ids) > 0 for x in g for s in x.samples)


def test_top_p_nucleus(micro_family, micro_backend):
    p = prompts(micro_family)[3]
    greedy = micro_backend.generate([Req(prompt=p, max_new_tokens=16)])[0]
    # a nucleus this small holds only the arg-max token: sampling must reproduce greedy decoding
    narrow = micro_backend.generate([Req(prompt=p, max_new_tokens=16, temperature=1.0, top_p=1e-6, n=2)])[0]
    assert narrow.texts == [greedy.text] * 2
    r = Req(prompt=p, max_new_tokens=16, temperature=1.2, top_p=0.9, n=2, seed=5)
    assert micro_backend.generate([r])[0].texts == micro_backend.generate([r, Req(prompt="And")])[0].texts


def test_model_generation_defaults_do_not_leak(micro_family, micro_backend, tmp_path):
    """A generation_config.json with sampling and penalties must not change what a request asks for."""
    import json
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(micro_family.final_dir, folder)
    gen = json.loads((folder / "generation_config.json").read_text())
    gen.update(do_sample=True, temperature=0.3, repetition_penalty=3.0, no_repeat_ngram_size=2, min_new_tokens=5)
    (folder / "generation_config.json").write_text(json.dumps(gen))
    odd = build_backend({**micro_family.model_cfg, "path": str(folder), "batch_size": 4})
    reqs = [Req(prompt=p, max_new_tokens=20) for p in prompts(micro_family, 3)]
    reqs.append(Req(prompt=prompts(micro_family)[1], max_new_tokens=12, temperature=1.0, n=2, seed=9))
    assert [g.texts for g in odd.generate(reqs)] == [g.texts for g in micro_backend.generate(reqs)]
    assert odd.shipped_generation_config.repetition_penalty == 3.0


def test_stop_strings_cut_text_and_stop_early(micro_family, micro_backend):
    p = prompts(micro_family)[1]
    full = micro_backend.generate([Req(prompt=p, max_new_tokens=40)])[0].samples[0]
    words = full.text.split()
    stop = " " + words[len(words) // 2]  # a word from the middle of the greedy continuation
    cut = full.text.find(stop)
    assert cut > 0
    got = micro_backend.generate([Req(prompt=p, max_new_tokens=40, stop=(stop, "\u2603never"))])[0].samples[0]
    assert got.text == full.text[:cut]
    assert got.finish_reason == "stop"
    assert len(got.token_ids) < len(full.token_ids)  # generation stopped early, not just truncated
    assert got.token_ids == full.token_ids[: len(got.token_ids)]


def test_chat_plain_fallback_and_template(micro_family, micro_backend, templated_dir):
    msgs = (Message("system", "Answer in the style of the KJV."), Message("user", "Who was Ruth?"))
    assert not micro_backend.has_chat_template
    assert micro_backend.render_chat(msgs) == render_plain_chat(msgs)
    as_chat = micro_backend.generate([Req(messages=msgs, max_new_tokens=10)])[0]
    as_text = micro_backend.generate([Req(prompt=render_plain_chat(msgs), max_new_tokens=10)])[0]
    assert as_chat.samples[0].token_ids == as_text.samples[0].token_ids

    templated = build_backend({**micro_family.model_cfg, "path": str(templated_dir), "batch_size": 2})
    assert templated.has_chat_template
    rendered = templated.render_chat(msgs)
    assert rendered == "<system>Answer in the style of the KJV.\n<user>Who was Ruth?\n<assistant>"
    forced = build_backend({**micro_family.model_cfg, "path": str(templated_dir), "chat_template": "none"})
    assert not forced.has_chat_template and forced.render_chat(msgs) == render_plain_chat(msgs)
    # same weights in both folders, and the template is hashed into the revision
    assert templated.revision != micro_backend.revision


def test_score_shapes_and_batching(micro_family, micro_backend):
    texts = [d.text[:300] for d in micro_family.members[:3]] + ["In the beginning", "x"]
    batched = micro_backend.score(texts)
    single = [micro_backend.score([t])[0] for t in texts]
    for t, s, one in zip(texts, batched, single):
        n = len(micro_backend.tokenizer(t)["input_ids"])
        assert len(s.token_ids) == len(s.logprobs) == len(s.vocab_mean) == len(s.vocab_std) == n
        assert math.isnan(s.logprobs[0]) and math.isnan(s.vocab_mean[0])
        assert all(lp <= 0 for lp in s.logprobs[1:]) and all(sd >= 0 for sd in s.vocab_std[1:])
        assert all(mu <= 0 for mu in s.vocab_mean[1:])
        assert s.token_ids == one.token_ids
        assert torch.allclose(torch.tensor(s.logprobs[1:]), torch.tensor(one.logprobs[1:]), atol=1e-4)
    # members (trained on) score higher than held-out chapters
    mem = micro_backend.score([d.text[:400] for d in micro_family.members])
    non = micro_backend.score([d.text[:400] for d in micro_family.nonmembers])
    mean = lambda ss: sum(sum(s.logprobs[1:]) / (len(s.logprobs) - 1) for s in ss) / len(ss)  # noqa: E731
    assert mean(mem) > mean(non)


def test_score_batch_size_bounds_scoring_passes(micro_family, micro_backend):
    """score_batch_size (rows per teacher-forced pass) is apart from batch_size (rows per generation pass)."""
    narrow = build_backend({**micro_family.model_cfg, "batch_size": 4, "score_batch_size": 2})
    assert (narrow.batch_size, narrow.score_batch_size) == (4, 2)
    plain = build_backend({**micro_family.model_cfg, "batch_size": 4, "score_batch_size": None})
    assert plain.score_batch_size == plain.batch_size == 4  # null: the generation batch size
    plain.close()
    passes: list[int] = []
    hook = narrow.model.register_forward_hook(lambda mod, args, kwargs_out: passes.append(1))
    try:
        texts = [d.text[:200] for d in (micro_family.members + micro_family.nonmembers)[:5]]
        scored = narrow.score(texts)
    finally:
        hook.remove()
    assert len(texts) == 5 and len(passes) == 3  # 5 texts in rows of 2
    for s, ref in zip(scored, micro_backend.score(texts)):
        assert s.token_ids == ref.token_ids
        assert torch.allclose(torch.tensor(s.logprobs[1:]), torch.tensor(ref.logprobs[1:]), atol=1e-4)
    with pytest.raises(ConfigError, match="score_batch_size"):
        build_backend({**micro_family.model_cfg, "score_batch_size": 0})


def test_score_agrees_with_generation_logprobs(micro_family, micro_backend):
    """log p of each generated token, from HF generate's own logits, equals score() of prompt + completion."""
    p = prompts(micro_family)[2]
    ids = micro_backend.tokenizer(p, return_tensors="pt")["input_ids"]
    out = micro_backend.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                       do_sample=False, output_logits=True, return_dict_in_generate=True,
                                       pad_token_id=micro_backend.pad_token_id)
    new = out.sequences[0, ids.shape[1]:].tolist()
    gen_lp = [torch.log_softmax(step[0].double(), -1)[t].item() for step, t in zip(out.logits, new)]
    scored = micro_backend.score_token_ids([ids[0].tolist() + new])[0]
    assert scored.logprobs[ids.shape[1]:] == pytest.approx(gen_lp, abs=1e-4)
    # and the backend's own greedy generation produced the same tokens
    assert micro_backend.generate([Req(prompt=p, max_new_tokens=12)])[0].samples[0].token_ids == new[:12]
    # vocab_mean is an expectation of log-probs: never above the max log-prob, which greedy took
    assert all(m <= lp + 1e-9 for m, lp in zip(scored.vocab_mean[ids.shape[1]:], gen_lp))


def test_zero_new_tokens_and_progress(micro_backend):
    g = micro_backend.generate([Req(prompt="And", max_new_tokens=0)], progress=True)[0]
    assert g.text == "" and g.samples[0].token_ids == [] and g.samples[0].finish_reason == "length"


def test_config_errors_are_one_line(micro_family, tmp_path, monkeypatch):
    from tests.backends.hf_presets import preset_node

    with pytest.raises(MemlabError, match="make models") as e:
        build_backend({**micro_family.model_cfg, "path": str(tmp_path / "nope")})
    assert "\n" not in str(e.value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    with pytest.raises(MemlabError, match="make models"):  # relative path under an existing folder: local
        build_backend({**micro_family.model_cfg, "path": "models/smollm2-135m-instruct"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MemlabError, match="hub is offline") as e:
        build_backend(preset_node("pythia-160m"))  # a hub id (conf/model/pythia-160m.yaml)
    assert "\n" not in str(e.value) and "local model folder" in str(e.value)
    with pytest.raises(ConfigError, match="model.backend"):
        build_backend({"backend": "vllm-native", "name": "x"})
    with pytest.raises(ConfigError, match="dtype"):
        build_backend({**micro_family.model_cfg, "dtype": "float13"})


def test_factory_accepts_omegaconf_and_cache_null(micro_family, tmp_path):
    from omegaconf import OmegaConf

    from memlab.backends.cache import CachedBackend
    from memlab.backends.hf import HFBackend

    node = OmegaConf.create({"model": micro_family.model_cfg, "cache": {"name": None, "path": "x"}})
    assert isinstance(build_backend(node.model, None), HFBackend)
    assert isinstance(build_backend(node.model, node.cache), HFBackend)
    cached = build_backend(node.model, {"name": "sqlite", "path": str(tmp_path / "c.sqlite")})
    assert isinstance(cached, CachedBackend) and cached.tokenizer is cached.inner.tokenizer
    assert len(cached.revision) == 12


def test_bf16_on_a_cpu_without_bf16_units_warns(micro_family):
    """Without bf16 matrix units (here: torch and oneDNN limited to AVX2, a real slow path, ~10× or worse),
    loading a model in bfloat16 says in one line that float32 is faster; float32 never warns."""
    code = ("import json, sys; from memlab.backends.factory import build_backend; "
            "build_backend(json.loads(sys.argv[1]))")
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    runs = {dtype: subprocess.run([sys.executable, "-c", code, json.dumps({**micro_family.model_cfg, "dtype": dtype})],
                                  env=env, capture_output=True, text=True, timeout=300)
            for dtype in ("bfloat16", "float32")}
    assert all(r.returncode == 0 for r in runs.values()), {d: r.stderr[-500:] for d, r in runs.items()}
    warned = [line for line in runs["bfloat16"].stderr.splitlines() if "memlab: warning: model.dtype=bfloat16" in line]
    assert len(warned) == 1 and "set model.dtype=float32" in warned[0]
    assert "memlab: warning" not in runs["float32"].stderr



def test_bf16_if_fast_loads_float32_without_bf16_units(micro_family):
    """``dtype: bfloat16_if_fast`` (the pretrained models' setting) loads float32 on a CPU without bf16 matrix
    units (the same real AVX2-limited path), says so in one line, and keys its answers as float32; in this process
    it follows this CPU's own measurement, as ``run.json`` records it."""
    from memlab.backends.hf import bf16_is_fast
    from memlab.provenance import required_dtypes

    code = ("import json, sys; from memlab.backends.factory import build_backend; "
            "print(build_backend(json.loads(sys.argv[1])).numerics)")
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    run = subprocess.run([sys.executable, "-c", code, json.dumps({**micro_family.model_cfg, "dtype": "bfloat16_if_fast"})],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-500:]
    assert run.stdout.split()[-1].startswith("float32")
    said = [line for line in run.stderr.splitlines() if "model.dtype=bfloat16_if_fast" in line]
    assert len(said) == 1 and "→ float32" in said[0] and "memlab: warning" not in run.stderr
    here = build_backend({**micro_family.model_cfg, "dtype": "bfloat16_if_fast"})
    assert here.numerics.split("/")[0] == ("bfloat16" if bf16_is_fast() else "float32")
    # a preset's dtype follows the run's numeric path: float32 on the default (pinned) path, bfloat16_if_fast under
    # numerics=native, resolved on this CPU as run.json records it
    from memlab.numerics import load_profile

    cfg = {"models": ["smollm2-135m-instruct"]}   # the model under test; its dtype: its preset's
    assert required_dtypes({**cfg, "numerics": load_profile("pinned")}) == {"smollm2-135m-instruct": "float32"}
    native = required_dtypes({**cfg, "numerics": load_profile("native")})
    assert native == {"smollm2-135m-instruct": "bfloat16" if bf16_is_fast() else "float32"}


def test_wide_output_layer_is_computed_transposed_for_few_rows():
    """A ≥ 32k-word output layer on ≤ 64 rows runs as weight @ rows.T: the same logits up to float rounding (and
    the same greedy tokens); more rows, or a narrow layer, keep the plain product bit for bit."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from memlab.backends.hf import TALL_OUTPUT_MAX_ROWS, TALL_OUTPUT_WORDS, _transposed_output_layer

    torch.manual_seed(0)
    wide = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=TALL_OUTPUT_WORDS + 5, hidden_size=32, num_hidden_layers=1,
                                            num_attention_heads=2, intermediate_size=64)).eval()
    head = wide.get_output_embeddings()
    x = torch.randn(2, 3, 32)
    many = torch.randn(TALL_OUTPUT_MAX_ROWS + 1, 32)
    ids = torch.tensor([[5, 9, 200, 31000]])
    with torch.inference_mode():
        plain, plain_many = head(x), head(many)
        before = wide.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
    _transposed_output_layer(wide)
    with torch.inference_mode():
        fast = head(x)
        assert fast.shape == plain.shape and fast.is_contiguous()
        torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)
        assert torch.equal(fast.argmax(-1), plain.argmax(-1))
        assert torch.equal(head(many), plain_many)
        assert torch.equal(wide.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0), before)
    narrow = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=500, hidden_size=32, num_hidden_layers=1,
                                              num_attention_heads=2, intermediate_size=64))
    _transposed_output_layer(narrow)
    assert "forward" not in vars(narrow.get_output_embeddings())


def test_position_stats_in_steps_give_the_bits_of_one_pass(monkeypatch):
    """HFBackend.score reduces a 262k vocabulary STATS_ROWS positions at a time (memory); every number must be the
    bits one pass over all positions gives: logits as a model gives them (float32, a peaked distribution, masked
    tokens at -inf), 200 positions = three full steps and a short one."""
    import torch

    from memlab.backends import hf

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(200, 50_000, generator=g) * 4
    logits[:, :100] = float("-inf")
    logits[torch.arange(200), torch.randint(100, 50_000, (200,), generator=g)] += 30
    targets = torch.randint(100, 50_000, (199,), generator=g)
    steps = hf.position_stats(logits[:199], targets)
    monkeypatch.setattr(hf, "STATS_ROWS", 10_000)
    one = hf.position_stats(logits[:199], targets)
    assert hf.STATS_ROWS > 199 and len(steps[0]) == 199
    assert steps == one   # float lists: exact equality of every value

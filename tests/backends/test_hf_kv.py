"""The in-place KV cache (backends/hf_kv.py) on the real micro model: the tokens of transformers' growing
DynamicCache, byte for byte, without copying the cache at each step."""

from __future__ import annotations

import pytest
import torch

from memlab.backends.base import GenerationRequest as Req
from memlab.backends.factory import build_backend
from memlab.backends.hf_kv import PreallocatedCache, PreallocatedLayer


def _prompts(family) -> list[str]:
    docs = family.members + family.nonmembers
    return [" ".join(docs[i % len(docs)].text.split()[: 5 + 9 * i]) for i in range(7)]


def _requests(family) -> list[Req]:
    """Distinct prompts of different lengths (a padded batch), greedy and seeded rows, budgets within the batch
    spread, a stop string on two of them: one sample per prompt, so kv_cache: grouped takes this path too."""
    ps = _prompts(family)
    return ([Req(prompt=p, max_new_tokens=24 if i % 3 else 14, temperature=0.0 if i % 2 else 0.8, seed=7)
             for i, p in enumerate(ps)]
            + [Req(prompt=ps[k], max_new_tokens=24, stop=(",", " and")) for k in (6, 3)])


@pytest.mark.parametrize("kv_cache", ["dynamic", "grouped"])
def test_in_place_cache_gives_the_growing_cache_tokens(micro_family, kv_cache, monkeypatch):
    from transformers import DynamicCache

    from memlab.backends import hf

    backend = build_backend({**micro_family.model_cfg, "batch_size": 8, "kv_cache": kv_cache})
    built: list[PreallocatedCache] = []

    def recording(n_layers, capacity):
        built.append(PreallocatedCache(n_layers, capacity))
        return built[-1]

    monkeypatch.setattr(hf, "PreallocatedCache", recording)
    in_place = backend.generate(_requests(micro_family))
    assert len(built) == 2  # the 7 mixed rows and the 2 stop-string rows: both batches decoded in place
    monkeypatch.setattr(hf, "PreallocatedCache", lambda n_layers, capacity: DynamicCache(config=backend.model.config))
    growing = backend.generate(_requests(micro_family))
    assert [[s.token_ids for s in g.samples] for g in in_place] == [[s.token_ids for s in g.samples] for g in growing]
    assert [g.samples[0].finish_reason for g in in_place] == [g.samples[0].finish_reason for g in growing]
    assert "stop" in {g.samples[0].finish_reason for g in in_place[-2:]}
    assert len({len(g.samples[0].token_ids) for g in in_place}) > 2


def test_a_model_with_sliding_window_layers_keeps_transformers_cache(micro_family, monkeypatch):
    """Sliding-window layers (Gemma-3's) drop the keys that leave the window: such a model decodes with
    transformers' DynamicCache, whose layers do that, not the in-place one (here: the micro model told it has a
    window longer than any of its prompts, so its tokens stay the in-place cache's)."""
    from transformers import DynamicCache

    from memlab.backends import hf

    backend = build_backend({**micro_family.model_cfg, "batch_size": 8, "kv_cache": "dynamic"})
    reqs = _requests(micro_family)[:7]
    in_place = backend.generate(reqs)
    built: list = []
    prefill = hf.HFBackend._shared_prefill

    def recording(self, *args):
        built.append(prefill(self, *args))
        return built[-1]

    monkeypatch.setattr(hf.HFBackend, "_shared_prefill", recording)
    monkeypatch.setattr(backend.model.config, "sliding_window", 4096, raising=False)
    windowed = backend.generate(reqs)
    assert [type(c) for c in built] == [DynamicCache]
    assert [[s.token_ids for s in g.samples] for g in windowed] == [[s.token_ids for s in g.samples] for g in in_place]


def test_a_step_writes_one_position_into_the_same_buffer():
    layer = PreallocatedLayer(capacity=5)
    k, v = torch.randn(2, 3, 3, 4), torch.randn(2, 3, 3, 4)
    keys, values = layer.update(k, v)
    buffer = layer.key_buffer.data_ptr()
    assert torch.equal(keys, k) and torch.equal(values, v) and layer.get_seq_length() == 3
    k2, v2 = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)
    keys, values = layer.update(k2, v2)
    assert layer.key_buffer.data_ptr() == buffer == keys.data_ptr()
    assert torch.equal(keys, torch.cat([k, k2], dim=2)) and torch.equal(values, torch.cat([v, v2], dim=2))
    assert layer.get_seq_length() == 4
    layer.update(k2, v2)
    with pytest.raises(RuntimeError, match="KV buffer of 5 positions is full"):
        layer.update(k2, v2)

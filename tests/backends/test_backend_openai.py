"""OpenAICompatBackend against a real `transformers serve` on 127.0.0.1, plus error paths (missing key,
unreachable server) and retry/backoff against a tiny local http.server that answers 429/503."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from memlab.backends.base import GenerationRequest as Req, Message
from memlab.backends.factory import build_backend
from memlab.errors import BackendError, MemlabError
from tests.backends.conftest import free_port
from tests.backends.openai_presets import served_node
from tests.backends.scripted import scripted_server


def api_cfg(base_url: str, model: str, **over) -> dict:
    # can_score: false: transformers serve gives no prompt log-probs (score() refuses in one line)
    return served_node(**{"name": "served-micro", "base_url": base_url, "model_id": model, "chat": False,
                          "can_score": False, "concurrency": 2, "max_retries": 2, "timeout": 60,
                          "price_in_per_mtok": 1.0, "price_out_per_mtok": 3.0, **over})


def test_completions_match_local_hf_greedy(served_model, micro_family, micro_backend):
    base_url, model = served_model
    api = build_backend(api_cfg(base_url, model))
    prompts = [" ".join(d.text.split()[:12]) for d in micro_family.members[:2]]
    reqs = [Req(prompt=p, max_new_tokens=12) for p in prompts]
    remote = api.generate(reqs, progress=True)
    local = micro_backend.generate(reqs)
    assert [g.text for g in remote] == [g.text for g in local]
    # usage and cost accounting: cost = in/1e6 * 1.0 + out/1e6 * 3.0
    assert api.usage.requests == 2
    assert api.usage.prompt_tokens == sum(g.prompt_tokens for g in local)
    assert api.usage.completion_tokens == 24
    assert api.usage.cost_usd == pytest.approx(api.usage.prompt_tokens / 1e6 + 24 * 3 / 1e6)
    with pytest.raises(NotImplementedError, match="log-probs"):
        api.score(["In the beginning"])


def test_chat_and_seeded_samples(served_model):
    base_url, model = served_model
    api = build_backend(api_cfg(base_url, model, chat=True))
    msgs = (Message("user", "And Naomi said"),)
    g = api.generate([Req(messages=msgs, max_new_tokens=8)])[0]
    assert g.prompt_tokens > 0 and g.completion_tokens > 0 and g.samples[0].finish_reason in ("length", "eos")
    # chat: true sends a plain prompt as one user message, so it equals the chat request
    assert api.generate([Req(prompt="And Naomi said", max_new_tokens=8)])[0].text == g.text
    # sampled: one call per sample with seed (seed, i) -> reproducible, and samples differ by index.
    # transformers serve seeds torch's *global* RNG per request, so concurrent requests would interleave
    # their draws: one at a time here (vLLM seeds a generator per request).
    api = build_backend(api_cfg(base_url, model, chat=True, concurrency=1))
    r = Req(messages=msgs, max_new_tokens=10, temperature=1.0, n=3, seed=3)
    a, b = api.generate([r])[0], api.generate([r])[0]
    assert a.texts == b.texts and len(set(a.texts)) > 1


def test_missing_key_variable_is_one_line(monkeypatch):
    monkeypatch.delenv("MEMLAB_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(MemlabError, match="MEMLAB_TEST_NO_SUCH_KEY") as e:
        build_backend(api_cfg("http://127.0.0.1:9/v1", "m", api_key_env="MEMLAB_TEST_NO_SUCH_KEY"))
    assert "\n" not in str(e.value)


def test_unreachable_base_url_is_one_line():
    port = free_port()  # nothing listens there
    api = build_backend(api_cfg(f"http://127.0.0.1:{port}/v1", "m", max_retries=3, backoff_base=5.0))
    with pytest.raises(BackendError, match=f"cannot reach http://127.0.0.1:{port}/v1") as e:
        api.generate([Req(prompt="hi", max_new_tokens=4)])
    assert "\n" not in str(e.value) and "base_url" in str(e.value)
    assert api.retries == 0  # failed at once: no backoff rounds against an address that never answered


class _Stub(BaseHTTPRequestHandler):
    """/v1/completions: answers the first `fail` requests with `status` (+ Retry-After), then a completion."""

    fail = 2
    status = 429
    calls: list[float] = []
    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append(time.monotonic())
        type(self).bodies.append(body)
        if len(type(self).calls) <= type(self).fail:
            payload = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode()
            self.send_response(type(self).status)
            self.send_header("Retry-After", "0")
        else:
            payload = json.dumps({
                "id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "text": "ok STOP tail", "finish_reason": "length", "logprobs": None}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    _Stub.calls, _Stub.bodies = [], []
    with scripted_server(_Stub) as url:
        yield url


@pytest.mark.parametrize("status", [429, 503])
def test_retries_with_exponential_backoff(stub_server, status):
    _Stub.fail, _Stub.status = 2, status
    api = build_backend(api_cfg(stub_server, "stub", max_retries=3, backoff_base=0.05, backoff_max=1.0))
    g = api.generate([Req(prompt="hi", max_new_tokens=3, stop=("STOP",), seed=4)])[0]
    assert g.text == "ok " and g.samples[0].finish_reason == "stop"
    assert api.retries == 2 and len(_Stub.calls) == 3
    gaps = [b - a for a, b in zip(_Stub.calls, _Stub.calls[1:])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # 0.05 * 2**attempt
    assert api.usage.requests == 1 and api.usage.cost_usd == pytest.approx((5 * 1.0 + 3 * 3.0) / 1e6)
    # every retry sent the same request, with the per-sample seed
    assert len({json.dumps(b, sort_keys=True) for b in _Stub.bodies}) == 1 and "seed" in _Stub.bodies[0]


def test_gives_up_after_max_retries(stub_server):
    _Stub.fail, _Stub.status = 100, 429
    api = build_backend(api_cfg(stub_server, "stub", max_retries=2, backoff_base=0.01))
    with pytest.raises(BackendError, match="after 2 retries") as e:
        api.generate([Req(prompt="hi", max_new_tokens=3)])
    assert "\n" not in str(e.value) and len(_Stub.calls) == 3

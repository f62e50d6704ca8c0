"""Issue 50 item 3: a served model's cache identity holds what the server reports about the model and how it
computes (backends/identity.py), an HF model's holds the numeric profile, and run.json says what a server served
and claims nothing about its numerics that the server does not say.

The real llama-cpp-python server (SmolLM2-135M's GGUF, under the alias ``smollm2``) is started twice on one port:
once as it comes, then restarted with ``--kv_overrides tokenizer.ggml.add_bos_token=bool:true``, or on another
quantization of the GGUF at the same path — the same URL and alias, other answers. "A server that reports X"
(llama-server's /props naming another file under the same alias) is a stdlib http.server, since llama-cpp-python
has no /props."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memlab.backends.base import GenerationRequest as Req
from memlab.backends.cache import CachedBackend
from memlab.backends.factory import build_backend
from memlab.backends.identity import served_identity
from tests.backends.conftest import free_port, serve_process
from tests.backends.llama_server import BOS_ON, LLAMA_HINT, requantized, smollm_gguf
from tests.backends.openai_presets import served_node

PROMPTS = [Req(prompt="The capital of France is", max_new_tokens=3)]


def _cfg(url: str, model_id: str = "smollm2", **changes) -> dict:
    return served_node(base_url=url, model_id=model_id, chat=False, concurrency=1, max_retries=0, timeout=60,
                       **changes)


def _run(cfg: dict, cache: Path) -> tuple[list[str], int]:
    """Texts generated through the cache, and how many requests reached the server."""
    api = build_backend(cfg, {"name": "sqlite", "path": str(cache)})
    try:
        return [g.text for g in api.generate(PROMPTS)], api.misses
    finally:
        api.close()


def _llama_at(port: int, gguf: Path, log_dir: Path, *extra: str):
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as err:
        pytest.fail(f"llama-cpp-python[server] is not installed ({err}); {LLAMA_HINT}", pytrace=False)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port",
           str(port), "--n_ctx", "512", "--n_threads", "1", "--n_threads_batch", "1", "--model_alias", "smollm2",
           *extra]
    return serve_process(cmd, f"http://127.0.0.1:{port}/v1/models", log_dir / f"llama-{port}-{len(extra)}.log",
                         {**os.environ, "OMP_NUM_THREADS": "1"}, "llama_cpp.server")


def test_llama_cpp_server_restarted_with_other_bos_setting_shares_no_answer(tmp_path, capsys):
    """Bug: the key held only /v1/models' ``{"id": "smollm2", "owned_by": "me"}``, so a server restarted with the
    BOS override on the same port served the failed run's cached answers. Its tokenizer's ids of a probe text now
    differ (the BOS leads them) and are in the key; a completion that names no model reports the GGUF it serves
    (no warning that the weights are unnamed), and a user-given model.revision is in the key too."""
    gguf = smollm_gguf(tmp_path / "gguf")
    port, cache = free_port(), tmp_path / "c.sqlite"
    url = f"http://127.0.0.1:{port}/v1"
    with _llama_at(port, gguf, tmp_path):
        plain = served_identity(url, "smollm2", 30)
        first, misses = _run(_cfg(url), cache)
        assert misses == 1
        again, misses = _run(_cfg(url), cache)
        assert (again, misses) == (first, 0)  # same server, same settings: reused
        assert "does not say which weights" not in capsys.readouterr().err  # it names its GGUF
        _, misses = _run(_cfg(url, revision="sha256:0123abcd"), cache)
        assert misses == 1  # the user's name for the weights is in the key
    with _llama_at(port, gguf, tmp_path, *BOS_ON):  # restarted on the same port, same alias: BOS now prepended
        bos = served_identity(url, "smollm2", 30)
        _, misses = _run(_cfg(url), cache)
        assert misses == 1  # the request reached the restarted server
    assert plain["served"] == bos["served"]  # /v1/models says the same ...
    assert bos["server"]["probe_tokens"][1:] == plain["server"]["probe_tokens"]  # ... its tokenizer does not


def test_llama_cpp_server_restarted_on_another_gguf_under_the_same_alias_shares_no_answer(tmp_path, capsys):
    """Bug (issue 50, silent): the GGUF was hashed only when /v1/models listed its path; llama-cpp-python under
    ``--model_alias`` lists the alias alone and another quantization has the same tokenizer (same probe tokens), so
    a server restarted on another GGUF — here the same path rewritten as Q4_0 — served the Q4_1's cached answers.
    A completion that names no model reports the file served: its path and sha256 are in the key and run.json,
    and run.json's dtype is the served file's type (it said float32, then "unknown (served)")."""
    from memlab.provenance import _served_dtype, _served_identity

    gguf = smollm_gguf(tmp_path / "gguf")
    served = tmp_path / "served" / "model.gguf"
    served.parent.mkdir()
    shutil.copyfile(gguf, served)
    port, cache = free_port(), tmp_path / "c.sqlite"
    url = f"http://127.0.0.1:{port}/v1"
    with _llama_at(port, served, tmp_path):
        assert _run(_cfg(url), cache)[1] == 1
        before = _served_identity(_cfg(url))
        assert _served_dtype(_cfg(url)) == "Q4_1 (the served GGUF's file type)"
    requantized(gguf, served)  # the server is stopped: its file is replaced by another quantization
    with _llama_at(port, served, tmp_path):
        assert _run(_cfg(url), cache)[1] == 1  # the request reached the server restarted on the other file
        assert _run(_cfg(url), cache)[1] == 0  # ... whose answers are then reused
        after = _served_identity(_cfg(url))
        assert _served_dtype(_cfg(url)) == "Q4_0 (the served GGUF's file type)"
    digest = hashlib.sha256(served.read_bytes()).hexdigest()
    assert after == f"served smollm2 at {url} (server lists smollm2; file {served}; file sha256 {digest})"
    assert before != after and "does not say which weights" not in capsys.readouterr().err


class _LlamaServerFake(BaseHTTPRequestHandler):
    """llama-server (llama.cpp's C++ server) as it reports itself: /v1/models with ``meta``, /props with the
    model file and settings; each completion answers the name of the file it serves."""

    report: dict = {}

    def _send(self, status: int, body: dict) -> None:
        blob = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)

    def do_GET(self):  # noqa: N802
        r = type(self).report
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "alias", "object": "model", "owned_by": "llamacpp",
                                                          "meta": r["meta"]}]})
        elif self.path == "/props":
            self._send(200, {"model_path": r["path"], "chat_template": r["template"], "bos_token": "<s>",
                             "default_generation_settings": {"n_ctx": r["n_ctx"], "params": {"top_k": 40}}})
        else:
            self._send(404, {})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/completions":
            return self._send(404, {"error": "no such route"})
        if "model" not in body:  # the identity's completion probe: llama-server answers with its alias
            return self._send(200, {"object": "text_completion", "model": "alias", "choices": []})
        type(self).posts.append(body)
        text = Path(type(self).report["path"]).name
        self._send(200, {"id": "x", "object": "text_completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}],
                         "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}})

    def log_message(self, *args):
        pass


@pytest.fixture
def llama_server_fake():
    handler = type("Handler", (_LlamaServerFake,), {"report": {}, "posts": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield handler, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_server_naming_another_file_under_the_same_alias_shares_no_answer(tmp_path, llama_server_fake, capsys):
    """Bug: the GGUF was hashed only when the listed id was a readable path; llama-server lists its alias and names
    the file in /props (and the model's size in meta). Another file, another n_ctx or chat template: another key."""
    handler, url = llama_server_fake
    a, b = tmp_path / "a.Q4_1.gguf", tmp_path / "b.Q8_0.gguf"
    a.write_bytes(b"GGUF one")
    b.write_bytes(b"GGUF two")
    meta = {"n_params": 134515008, "n_vocab": 49152, "size": 100}
    handler.report.update(path=str(a), template="{{ messages }}", n_ctx=512, meta=meta)
    cache = tmp_path / "c.sqlite"
    assert _run(_cfg(url, "alias"), cache) == (["a.Q4_1.gguf"], 1)
    assert _run(_cfg(url, "alias"), cache) == (["a.Q4_1.gguf"], 0)
    handler.report.update(path=str(b))  # restarted on another GGUF under the same alias, same meta
    assert _run(_cfg(url, "alias"), cache) == (["b.Q8_0.gguf"], 1)
    handler.report.update(n_ctx=4096)  # ... then with another context size
    assert _run(_cfg(url, "alias"), cache)[1] == 1
    handler.report.update(template="{{ other }}")  # ... then with another chat template
    assert _run(_cfg(url, "alias"), cache)[1] == 1
    ident = served_identity(url, "alias", 10)
    assert ident["server"]["model_path"] == str(b) and len(ident["server"]["model_sha256"]) == 64
    assert "does not say which weights" not in capsys.readouterr().err  # the server names its weights: no warning
    assert len(handler.posts) == 4


def test_native_and_pinned_answers_never_mix(micro_family, micro_backend, tmp_path, monkeypatch):
    """Bug: the key held the dtype (``float32/static-kv``) but not the numeric profile, so a ``numerics=native``
    run's cached rows were reused by a pinned run."""
    text = " ".join(micro_family.members[0].text.split()[:20])
    req = Req(prompt=" ".join(text.split()[:8]), max_new_tokens=4)
    monkeypatch.setenv("MEMLAB_NUMERICS", "native")
    native = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    native.generate([req]), native.score([text])
    assert native.misses == 2
    monkeypatch.setenv("MEMLAB_NUMERICS", "pinned")
    pinned = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    pinned.generate([req]), pinned.score([text])
    assert pinned.hits == 0 and pinned.misses == 2 and len(pinned) == 4
    assert pinned.score_key(text) != native.score_key(text)
    again = CachedBackend(micro_backend, tmp_path / "c.sqlite")
    again.generate([req]), again.score([text])
    assert again.hits == 2  # the same profile reuses its own rows


def test_run_json_says_what_a_server_served_and_claims_no_numerics_for_it(tmp_path, llama_server_fake, repo_root):
    """Bug: run.json recorded ``dtypes: float32``, ``threads: 1`` and ``machine_independent: true`` for a served model
    (the server computes in Q4_1 on its own threads) and named no file or hash of what was served."""
    from omegaconf import OmegaConf

    from memlab import model_use as mu
    from memlab.config import compose
    from memlab.provenance import write_run_json

    handler, url = llama_server_fake
    gguf = tmp_path / "served.Q4_1.gguf"
    gguf.write_bytes(b"GGUF served")
    handler.report.update(path=str(gguf), template="t", n_ctx=512, meta={"n_params": 1, "size": 11})
    overrides = ["model=llama-cpp", f"model.base_url={url}", "model.model_id=alias"]
    cfg = compose("audit", overrides)
    mu.check_model_override(cfg, overrides)
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["run"] = {**(plain.get("run") or {}), "key": "test"}
    info = write_run_json(tmp_path, plain, "config", time.time())
    assert json.loads((tmp_path / "run.json").read_text()) == info
    (name,) = [n["name"] for n in mu.target_nodes(cfg)]
    num = info["numerics"]
    assert num["dtypes"][name] == "unknown (served)" and num["threads"][name] == "unknown (served)"
    assert num["machine_independent"] != True  # noqa: E712 (never claimed for a served model)
    served = info["models"][name]
    assert served.startswith(f"served alias at {url} (") and str(gguf) in served
    assert hashlib.sha256(b"GGUF served").hexdigest() in served and '"n_params": 1' in served


def test_run_json_says_when_a_server_names_no_weights(llama_server_fake):
    from memlab.provenance import _served_identity

    handler, url = llama_server_fake
    node = _cfg(url, "m")
    # llama-cpp-python under an alias: /v1/models lists the alias alone, no /props
    handler.do_GET = lambda self: self._send(200, {"object": "list", "data": [{"id": "m", "owned_by": "me"}]}) \
        if self.path == "/v1/models" else self._send(404, {})
    assert _served_identity(node) == f"served m at {url} (server lists m; the server names no weights)"
    assert _served_identity({**node, "revision": "r1"}).startswith(f"served m at {url} (revision r1; ")
    assert _served_identity({**node, "base_url": "http://127.0.0.1:9/v1"}) == "served m at http://127.0.0.1:9/v1"

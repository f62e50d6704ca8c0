"""The response cache keys a served model by its identity (issue 33): backend kind, normalized base_url and the
server's own description of the model (``GET /v1/models``; the GGUF's sha256 when it names a file readable here).
Real HTTP servers on 127.0.0.1 that answer with the name of the model they serve, so a shared answer shows."""

from __future__ import annotations

import sqlite3

from memlab.backends.base import GenerationRequest as Req
from memlab.backends.factory import build_backend
from memlab.backends.identity import normalize_base_url
from tests.backends.openai_presets import served_node
from tests.backends.scripted import ScriptedServer, api_error, completion


class _ModelServer(ScriptedServer):
    """An OpenAI-compatible server on 127.0.0.1: ``models`` is its /v1/models list (mutable: a restart on another
    model), answered to every GET (/v1/models, /props); each completion answers with ``answer(server, body)``;
    ``posts`` lists the completions asked for and ``auth`` the Authorization header of each GET."""

    def __init__(self, models: list[dict], answer=lambda server, body: body["model"]):
        self.models, self.auth = models, []
        super().__init__(lambda body: (200, completion(answer(self, body), body["model"])) if "model" in body
                         else (400, api_error("you must provide a model parameter")), get=self._model_list)

    @property
    def posts(self) -> list[dict]:
        """The completions asked for (not the identity's probes: tokenize, which this server can't answer, and a
        completion that names no model, which it refuses as hosted APIs do)."""
        return [b for b in self.requests if "max_tokens" in b and "model" in b]

    def _model_list(self, headers):
        self.auth.append(headers.get("Authorization"))
        return 200, {"object": "list", "data": self.models}


def _cfg(url: str, model_id: str, name: str = "served") -> dict:
    return served_node(name=name, base_url=url, model_id=model_id, chat=False, concurrency=2, max_retries=0,
                       timeout=10)


PROMPTS = [Req(prompt=f"p{i}", max_new_tokens=2) for i in range(3)]


def _texts(model_cfg: dict, cache: str) -> list[str]:
    api = build_backend(model_cfg, {"name": "sqlite", "path": cache})
    try:
        return [g.text for g in api.generate(PROMPTS)]
    finally:
        api.close()


def test_two_models_on_one_server_share_no_answer(tmp_path):
    server = _ModelServer([{"id": "gpt-4.1-mini", "object": "model", "owned_by": "x"},
                           {"id": "gpt-4.1", "object": "model", "owned_by": "x"}])
    cache = str(tmp_path / "c.sqlite")
    try:
        # the preset name is the same on purpose: only the served model differs
        assert _texts(_cfg(server.url, "gpt-4.1-mini", name="api"), cache) == ["gpt-4.1-mini"] * 3
        assert _texts(_cfg(server.url, "gpt-4.1", name="api"), cache) == ["gpt-4.1"] * 3
        assert len(server.posts) == 6  # the second model's requests all reached the server
        assert _texts(_cfg(server.url, "gpt-4.1", name="api"), cache) == ["gpt-4.1"] * 3
        assert len(server.posts) == 6  # and its own answers are cached
    finally:
        server.close()


def test_one_model_id_on_two_servers_shares_no_answer(tmp_path):
    a = _ModelServer([{"id": "m", "object": "model"}], answer=lambda s, body: "from A")
    b = _ModelServer([{"id": "m", "object": "model"}], answer=lambda s, body: "from B")
    cache = str(tmp_path / "c.sqlite")
    try:
        assert _texts(_cfg(a.url, "m"), cache) == ["from A"] * 3
        assert _texts(_cfg(b.url, "m"), cache) == ["from B"] * 3
        assert len(a.posts) == 3 and len(b.posts) == 3  # server B received every request
    finally:
        a.close()
        b.close()


def test_llama_cpp_server_restarted_on_another_gguf_shares_no_answer(tmp_path):
    """llama-cpp-python lists the GGUF path as the model id and serves it under any name (model_id: local):
    the file's sha256 is the identity, so the same path rewritten with other weights is another model."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF weights one")
    server = _ModelServer([{"id": str(gguf), "object": "model", "owned_by": "me"}],
                          answer=lambda s, body: gguf.read_bytes().decode()[-3:])
    cache = str(tmp_path / "c.sqlite")
    try:
        assert _texts(_cfg(server.url, "local"), cache) == ["one"] * 3
        gguf.write_bytes(b"GGUF weights two")  # the server restarted on other weights at the same path and port
        assert _texts(_cfg(server.url, "local"), cache) == ["two"] * 3
        assert len(server.posts) == 6
    finally:
        server.close()


def test_server_without_model_list_is_keyed_by_base_url_and_model_id(tmp_path):
    a = _ModelServer([], answer=lambda s, body: "A")  # /v1/models lists nothing
    b = _ModelServer([], answer=lambda s, body: "B")
    cache = str(tmp_path / "c.sqlite")
    try:
        assert _texts(_cfg(a.url, "m"), cache) == ["A"] * 3
        assert _texts(_cfg(a.url + "/", "m"), cache) == ["A"] * 3 and len(a.posts) == 3  # same server: reused
        assert _texts(_cfg(b.url, "m"), cache) == ["B"] * 3
    finally:
        a.close()
        b.close()


def test_old_cache_rows_are_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(str(path))
    con.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, method TEXT NOT NULL, value TEXT NOT NULL)")
    con.execute("INSERT INTO responses VALUES ('k', 'generate', '{}')")
    con.commit()
    con.close()
    server = _ModelServer([{"id": "m"}])
    try:
        _texts({**_cfg(server.url, "m"), "revision": "r1"}, str(path))  # r1: no warning of unnamed weights
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not reused" in err[0] and str(path) in err[0], err
        _texts({**_cfg(server.url, "m"), "revision": "r1"}, str(path))
        assert capsys.readouterr().err.strip() == ""  # said once: the cache is marked as the new version
    finally:
        server.close()


def test_base_url_normalization():
    assert normalize_base_url("HTTP://LocalHost:80/v1/") == "http://localhost/v1"
    assert normalize_base_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_hosted_api_is_asked_for_its_models_with_the_key(tmp_path, monkeypatch):
    """Hosted APIs (OpenAI, ...) list models only to a caller with a key: the identity request sends it."""
    monkeypatch.setenv("MEMLAB_TEST_KEY", "sk-test")
    server = _ModelServer([{"id": "m", "owned_by": "org"}])
    try:
        _texts({**_cfg(server.url, "m"), "api_key_env": "MEMLAB_TEST_KEY"}, str(tmp_path / "c.sqlite"))
        # asked once per backend (/v1/models, then /props), with the key
        assert server.auth == ["Bearer sk-test"] * 2
    finally:
        server.close()

"""Faults injected into the OpenAI-compatible path (issue 9): a run killed mid-batch, and servers that answer
200 with something that is not a completion. Real HTTP servers on 127.0.0.1 (a scripted broken server is the
one thing we may fake: no real server sends these on purpose); real client processes killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from memlab.backends.base import GenerationRequest as Req
from memlab.backends.factory import build_backend
from memlab.errors import BackendError
from tests.backends.openai_presets import served_node
from tests.backends.scripted import ScriptedServer, completion


def api_cfg(base_url: str, **over) -> dict:
    return served_node(**{"name": "scripted", "base_url": base_url, "model_id": "m", "chat": False,
                          "concurrency": 2, "max_retries": 2, "timeout": 30, "backoff_base": 0.01, **over})


def _completion(body: dict, text: str | None = "ok", chat: bool = False) -> bytes:
    return json.dumps(completion(text, body.get("model", "m"), chat)).encode()


def _Server(answer, delay: float = 0.0) -> ScriptedServer:  # noqa: N802 (a server, as the other tests name it)
    """`answer(body) -> (status, content_type, bytes)` decides each reply, sent as is."""
    def post(body):
        status, ctype, blob = answer(body)
        return status, (ctype, blob)
    return ScriptedServer(post, delay=delay)


BAD_ANSWERS = {
    "malformed JSON": (200, "application/json", b'{"choices": [{"text": "unterminated'),
    "HTML body": (200, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    "empty choices": (200, "application/json", json.dumps({"id": "x", "object": "text_completion", "created": 0,
                                                           "model": "m", "choices": []}).encode()),
}


@pytest.mark.parametrize("what", sorted(BAD_ANSWERS))
def test_bad_answer_is_retried_then_one_line_and_never_cached(tmp_path, what):
    server = _Server(lambda body: BAD_ANSWERS[what])
    try:
        api = build_backend(api_cfg(server.url), {"name": "sqlite", "path": str(tmp_path / "c.sqlite")})
        with pytest.raises(BackendError) as e:
            api.generate([Req(prompt="hi", max_new_tokens=3)])
        msg = str(e.value)
        assert "\n" not in msg and server.url in msg and "3 tries" in msg, msg
        assert len(server.requests) == 3  # retried (max_retries = 2)
        assert len(api) == 0  # nothing invalid entered the cache
    finally:
        server.close()


def test_null_content_is_retried_not_cached_and_a_good_retry_wins(tmp_path):
    answers = iter([None, None, "real answer"])
    server = _Server(lambda body: (200, "application/json", _completion(body, next(answers), chat=True)))
    try:
        api = build_backend(api_cfg(server.url, chat=True), {"name": "sqlite", "path": str(tmp_path / "c.sqlite")})
        g = api.generate([Req(prompt="hi", max_new_tokens=3)])[0]
        assert g.text == "real answer" and len(server.requests) == 3
        assert len(api) == 1
        con = sqlite3.connect(str(tmp_path / "c.sqlite"))
        (value,) = con.execute("SELECT value FROM responses").fetchone()
        assert json.loads(value)["text"] == "real answer"  # the null answers never reached the cache
    finally:
        server.close()


def test_null_content_every_time_is_one_line(tmp_path):
    server = _Server(lambda body: (200, "application/json", _completion(body, None, chat=True)))
    try:
        api = build_backend(api_cfg(server.url, chat=True), {"name": "sqlite", "path": str(tmp_path / "c.sqlite")})
        with pytest.raises(BackendError, match="message.content is None") as e:
            api.generate([Req(prompt="hi", max_new_tokens=3)])
        assert "\n" not in str(e.value) and len(api) == 0
    finally:
        server.close()


CLIENT = r"""
import sys
from memlab.backends.base import GenerationRequest as Req
from memlab.backends.factory import build_backend
import json
cfg = {**json.loads(PRESET), "base_url": sys.argv[1]}  # PRESET: the llama-cpp preset's node, written above
api = build_backend(cfg, {"name": "sqlite", "path": sys.argv[2]})
out = api.generate([Req(prompt=f"p{i}", max_new_tokens=2) for i in range(int(sys.argv[3]))])
print("DONE", len(out), flush=True)
"""


def test_killed_mid_batch_rerun_sends_only_unfinished_requests(tmp_path):
    n = 12
    server = _Server(lambda body: (200, "application/json", _completion(body, "t-" + body["prompt"])), delay=0.25)
    db = tmp_path / "c.sqlite"
    script = tmp_path / "client.py"
    node = served_node(name="slow", model_id="m", chat=False, concurrency=2, max_retries=0, timeout=30)
    script.write_text(f"PRESET = {json.dumps(node)!r}\n" + CLIENT)
    try:
        proc = subprocess.Popen([sys.executable, str(script), server.url, str(db), str(n)])
        deadline = time.time() + 60
        while len(server.requests) < 6 and time.time() < deadline:  # about half the batch answered
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        answered_before_kill = len(server.requests)
        assert 0 < answered_before_kill < n
        committed = sqlite3.connect(str(db)).execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        # every answer the client had received was committed (at most the in-flight pair was lost)
        assert committed >= answered_before_kill - 2 and committed > 0
        time.sleep(0.6)  # let requests in flight at the kill drain server-side
        before_rerun = len(server.requests)
        r = subprocess.run([sys.executable, str(script), server.url, str(db), str(n)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and "DONE 12" in r.stdout, r.stderr
        rerun_sent = server.requests[before_rerun:]
        assert len(rerun_sent) == n - committed  # only the unfinished ones
        done_prompts = {json.loads(v)["text"][2:] for (v,) in
                        sqlite3.connect(str(db)).execute("SELECT value FROM responses")}
        assert done_prompts == {f"p{i}" for i in range(n)}
    finally:
        server.close()

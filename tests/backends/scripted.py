"""Scripted OpenAI-compatible HTTP servers on 127.0.0.1, for replies no real server can be made to give (faults,
exact timing, a chosen `/v1/models` list). One definition for every test that needs one; the real servers
(`transformers serve`, llama-cpp) are fixtures in ``tests/backends/conftest.py``."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(text: str | None, model: str = "m", chat: bool = False) -> dict:
    """An OpenAI completion (or chat completion) body answering ``text``."""
    choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"} if chat
              else {"index": 0, "text": text, "finish_reason": "length", "logprobs": None})
    return {"id": "x", "object": "chat.completion" if chat else "text_completion", "created": 0, "model": model,
            "choices": [choice], "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}}


def api_error(message: str) -> dict:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": "invalid_request_error"}}


def _start(handler) -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def _stop(httpd: ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


@contextlib.contextmanager
def scripted_server(handler):
    """A server running an ``http.server`` handler class on a free port; yields its /v1 base URL."""
    httpd = _start(handler)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        _stop(httpd)


class ScriptedServer:
    """``post(body) -> (status, reply)`` answers each POST (``reply``: a dict sent as JSON, or ``(content type,
    bytes)`` sent as is) after ``delay`` seconds; ``get(headers) -> (status, reply)`` answers each GET (default
    404). ``requests`` lists every POST body, in the order answered. A context manager; ``close()`` stops it."""

    def __init__(self, post, get=None, delay: float = 0.0):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, reply) -> None:
                ctype, blob = reply if isinstance(reply, tuple) else ("application/json", json.dumps(reply).encode())
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(blob)))
                self.end_headers()
                self.wfile.write(blob)

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(delay)
                status, reply = post(body)
                outer.requests.append(body)
                self._reply(status, reply)

            def do_GET(self):  # noqa: N802
                self._reply(*(get(self.headers) if get else (404, ("text/plain", b""))))

            def log_message(self, *args):
                pass

        self.httpd = _start(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        _stop(self.httpd)

    def __enter__(self) -> "ScriptedServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

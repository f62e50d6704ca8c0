"""`make lab` leaves the tracked notebooks as committed: a save of a notebook under notebooks/ (what Lab's autosave
does after a cell ran) writes it without outputs, execution counts or run metadata; Lab asks no news question.

The first test calls the hook directly; the second starts the real server with the exact `make lab` command line
(read with `make -n lab`) and saves through its REST contents API. Neither drives a browser: the browser test of
Lab itself is tests/report/test_lab.py.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from memlab.lab import pre_save_hook

NOTEBOOK = "pearl_sizes.ipynb"  # any tracked notebook: its parameters cell (cfg = {}) must survive as committed


def _ran(nb: dict) -> dict:
    """``nb`` as Lab holds it after running every cell: outputs, counts, timing metadata, a kernel's language_info."""
    nb = copy.deepcopy(nb)
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["memlab 42\n"]}]
        cell["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00.000Z"}
        cell["metadata"]["scrolled"] = True
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.99", "mimetype": "text/x-python"}
    return nb


class _Manager:
    def __init__(self, root: Path):
        self.root_dir = str(root)


TRACKED = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("name", TRACKED)
def test_hook_strips_what_running_adds_and_keeps_the_tracked_bytes(repo_root, tmp_path, name):
    """Also: each tracked notebook is stored as Jupyter writes it (nbformat's JSON), so a save is byte-identical."""
    tracked = (repo_root / "notebooks" / name).read_bytes()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / name).write_bytes(tracked)
    model = {"type": "notebook", "content": _ran(json.loads(tracked))}
    pre_save_hook(model=model, path=f"notebooks/{name}", contents_manager=_Manager(tmp_path))
    assert nbformat.writes(nbformat.from_dict(model["content"])) + "\n" == tracked.decode()
    params = [c for c in model["content"]["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert ["".join(c["source"]) for c in params] == ["cfg = {}"]  # how a notebook opened in Lab gets its config


def test_hook_keeps_edits_and_leaves_other_folders_alone(repo_root, tmp_path):
    nb = _ran(json.loads((repo_root / "notebooks" / NOTEBOOK).read_text()))
    nb["cells"][0]["source"] = ["# edited by hand\n"]
    model = {"type": "notebook", "content": copy.deepcopy(nb)}
    pre_save_hook(model=model, path=f"notebooks/{NOTEBOOK}", contents_manager=_Manager(tmp_path))
    assert model["content"]["cells"][0]["source"] == ["# edited by hand\n"]  # an edit is still saved
    scratch = {"type": "notebook", "content": copy.deepcopy(nb)}
    pre_save_hook(model=scratch, path="scratch/mine.ipynb", contents_manager=_Manager(tmp_path))
    assert scratch["content"] == nb  # not a tracked notebook: saved as the user ran it


def _lab_command(repo_root: Path) -> str:
    """The `jupyter lab …` line of `make -n lab`."""
    out = subprocess.run(["make", "-n", "-s", "lab"], cwd=repo_root, capture_output=True, text=True, check=True).stdout
    lines = out.replace("\\\n", " ").splitlines()
    return next(line.strip() for line in lines if "bin/jupyter lab" in line)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(url: str, token: str, method: str = "GET", body: dict | None = None) -> dict:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def _wait_up(base: str, token: str, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"jupyter lab exited ({proc.returncode}): {log.read_text()[-3000:]}"
        try:
            _call(f"{base}/api/status", token)
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"jupyter lab did not answer in {timeout:.0f} s: {log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen, base: str, token: str) -> None:
    try:
        _call(f"{base}/api/shutdown", token, "POST")
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_make_lab_server_saves_a_run_notebook_as_committed_and_asks_no_news(repo_root, tmp_path):
    """The `make lab` command, in a copy of the repo's layout (notebooks/ copied; lab/ and .venv linked), on a free
    port: a PUT of the notebook with outputs leaves the file byte-identical to the tracked one, and Lab's
    notification settings say never fetch news (so no prompt)."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    tracked = (repo_root / "notebooks" / NOTEBOOK).read_bytes()
    shutil.copy(repo_root / "notebooks" / NOTEBOOK, root / "notebooks" / NOTEBOOK)
    for name in ("lab", ".venv"):
        (root / name).symlink_to(repo_root / name)
    port, token = _free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    cmd = f"{_lab_command(repo_root)} --port={port} --port-retries=0 --IdentityProvider.token={token}"
    env = {**os.environ, "PYTHONPATH": str(repo_root / "lib"),  # this checkout's memlab.lab
           **{k: str(tmp_path / k.lower()) for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR",
                                                     "IPYTHONDIR", "JUPYTERLAB_WORKSPACES_DIR")}}
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_up(base, token, proc, log)
        ran = _ran(json.loads(tracked))
        _call(f"{base}/api/contents/notebooks/{NOTEBOOK}", token, "PUT",
              {"type": "notebook", "format": "json", "content": ran})
        assert (root / "notebooks" / NOTEBOOK).read_bytes() == tracked
        _call(f"{base}/api/contents/scratch.ipynb", token, "PUT", {"type": "notebook", "format": "json", "content": ran})
        assert json.loads((root / "scratch.ipynb").read_text())["cells"][1]["outputs"]  # outside notebooks/: kept
        # lab/settings/overrides.json becomes the plugin's defaults: never fetch news, never check for updates
        props = _call(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification", token)["schema"]["properties"]
        assert props["fetchNews"]["default"] == "false" and props["checkForUpdates"]["default"] is False
        req = urllib.request.Request(f"{base}/lab", headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            page = r.read().decode()
        assert '"news": {"disabled": true}' in page  # LabApp.news_url = None: the news feed is off in the page config
    except Exception:
        print(f"jupyter lab log: {log.read_text()[-3000:]}")
        raise
    finally:
        _stop(proc, base, token)

"""JupyterLab with the `make lab` settings, driven in Debian's chromium: open a notebook, run its first cell."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat

TIMEOUT_MS = 180_000  # JupyterLab's first load on a shared 2-core machine can be slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab_command(root: Path, port: int, token: str) -> list[str]:
    """The `make lab` flags (--no-browser --ip=127.0.0.1 --LabApp.extension_manager=readonly, --allow-root as
    root), on a free port with a token, serving ``root``."""
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", "--LabApp.extension_manager=readonly",
           f"--port={port}", "--port-retries=0", f"--IdentityProvider.token={token}", f"--notebook-dir={root}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def _wait_up(url: str, proc: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"jupyter lab did not answer {url} in {timeout:.0f} s: {log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen, base: str, token: str) -> None:
    try:
        req = urllib.request.Request(f"{base}/api/shutdown", method="POST",
                                     headers={"Authorization": f"token {token}"})
        urllib.request.urlopen(req, timeout=10).close()
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_jupyterlab_opens_a_notebook_and_runs_its_first_cell(tmp_path, chromium_browser):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    root = tmp_path / "notebooks"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('memlab', 6 * 7)"), nbformat.v4.new_markdown_cell("the end")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(root / "trivial.ipynb"))
    port, token = _free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
           "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"), "IPYTHONDIR": str(tmp_path / "ipython"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings")}
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(_lab_command(root, port, token), cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    page = None
    try:
        _wait_up(f"{base}/api/status?token={token}", proc, log)
        page = chromium_browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{base}/lab/tree/trivial.ipynb?token={token}", wait_until="domcontentloaded")
        cell = page.locator(".jp-NotebookPanel .jp-Cell.jp-CodeCell").first
        cell.wait_for(state="visible")
        # the kernel is connected when the status bar reads "Python 3 (ipykernel) | Idle"
        page.wait_for_function("() => (document.querySelector('#jp-main-statusbar')?.textContent || '')"
                               ".includes('Idle')")
        output = cell.locator(".jp-OutputArea-output")
        for attempt in range(4):  # a keystroke sent while the kernel session is still settling can be dropped
            cell.locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")
            try:
                output.first.wait_for(state="visible", timeout=30_000 if attempt < 3 else TIMEOUT_MS)
                print(f"lab: the first cell ran on attempt {attempt + 1}")
                break
            except PlaywrightTimeout:
                if attempt == 3:
                    raise
        page.wait_for_function("el => el.textContent.includes('memlab 42')", arg=output.first.element_handle())
        # the execution count appears in the prompt: [1]: (or [n]: if a retried keystroke ran it again)
        page.wait_for_function("el => /\\[[1-9][0-9]*\\]/.test(el.textContent)",
                               arg=cell.locator(".jp-InputPrompt").first.element_handle())
    except Exception:
        if page is not None:
            page.screenshot(path=str(tmp_path / "lab.png"))
        print(f"jupyter lab log: {log.read_text()[-3000:]}\nscreenshot: {tmp_path / 'lab.png'}")
        raise
    finally:
        if page is not None:
            page.close()
        _stop(proc, base, token)
    assert proc.returncode is not None

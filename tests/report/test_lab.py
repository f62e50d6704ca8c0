"""JupyterLab driven in Debian's chromium: plain Lab opens a notebook and runs its first cell (and asks the news
question); the exact `make lab` command runs a tracked notebook's first cell and saves it, leaving `git status`
clean for notebooks/ and asking no news question."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

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


@contextmanager
def _lab_page(browser, proc: subprocess.Popen, base: str, token: str, log: Path, shot: Path) -> Iterator:
    """A browser page once the Lab server ``proc`` answers. On a failure inside the block: a screenshot to ``shot``
    and the tail of the server's log; always: the page closed and the server stopped."""
    page = None
    try:
        _wait_up(f"{base}/api/status?token={token}", proc, log)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        yield page
    except Exception:
        if page is not None:
            page.screenshot(path=str(shot))
        print(f"jupyter lab log: {log.read_text()[-3000:]}\nscreenshot: {shot}")
        raise
    finally:
        if page is not None:
            page.close()
        _stop(proc, base, token)


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
    with _lab_page(chromium_browser, proc, base, token, log, tmp_path / "lab.png") as page:
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
        # without lab/jupyter_server_config.py Lab asks the news question: the control of the make-lab test below
        try:
            page.get_by_text(NEWS_PROMPT).first.wait_for(state="visible", timeout=60_000)
        except PlaywrightTimeout:
            raise AssertionError(f"plain Lab showed no '{NEWS_PROMPT}' prompt: the make-lab check cannot see it") from None
    assert proc.returncode is not None


NEWS_PROMPT = "official Jupyter news"  # Lab's first-start question ("Would you like to get notified about …?")
NOTEBOOK = "pearl_sizes.ipynb"  # a tracked notebook whose first code cell is its parameters cell, `cfg = {}`


def _make_lab_command(repo_root: Path) -> str:
    """The `jupyter lab …` line of `make -n lab` (the exact flags and config `make lab` uses)."""
    out = subprocess.run(["make", "-n", "-s", "lab"], cwd=repo_root, capture_output=True, text=True, check=True).stdout
    return next(line.strip() for line in out.replace("\\\n", " ").splitlines() if "bin/jupyter lab" in line)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def _checkout(repo_root: Path, root: Path) -> None:
    """A git checkout of the repo's notebooks/ and .gitignore, plus the same notebook outside notebooks/ (the
    control: Lab saves it as run), committed; lab/ and .venv linked as in the repo."""
    shutil.copytree(repo_root / "notebooks", root / "notebooks")
    (root / "scratch").mkdir()
    shutil.copy(repo_root / "notebooks" / NOTEBOOK, root / "scratch" / NOTEBOOK)
    (root / ".gitignore").write_text((repo_root / ".gitignore").read_text() + "/lab\n")
    for name in ("lab", ".venv"):
        (root / name).symlink_to(repo_root / name)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=memlab", "-c", "user.email=memlab@localhost", "commit", "-q", "-m", "tracked")
    assert _git(root, "status", "--porcelain") == ""


def _run_first_code_cell_and_save(page, url: str, path: Path) -> None:
    """Open ``url`` (one notebook in its own workspace), run its first code cell with Shift+Enter, wait for its
    execution count, then Ctrl+S and wait until the server has written ``path``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(url, wait_until="domcontentloaded")
    cell = page.locator(".jp-NotebookPanel .jp-Cell.jp-CodeCell").first
    cell.wait_for(state="visible")
    page.wait_for_function("() => (document.querySelector('#jp-main-statusbar')?.textContent || '')"
                           ".includes('Idle')")
    prompt = cell.locator(".jp-InputPrompt").first
    counted = "el => /\\[[1-9][0-9]*\\]/.test(el.textContent)"
    for attempt in range(4):  # a keystroke sent while the kernel session is still settling can be dropped
        cell.locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(counted, arg=prompt.element_handle(),
                                   timeout=30_000 if attempt < 3 else TIMEOUT_MS)
            break
        except PlaywrightTimeout:
            if attempt == 3:
                raise AssertionError(f"{url}: the first code cell got no execution count after Shift+Enter") from None
    before = path.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while path.stat().st_mtime_ns == before:
        assert time.monotonic() < deadline, f"Ctrl+S in Lab did not write {path}"
        time.sleep(0.5)


def _kernels_of(runtime: Path) -> list[int]:
    """Pids of live processes started with a connection file in ``runtime`` (this test's kernels)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(runtime) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_make_lab_running_a_tracked_notebook_leaves_git_clean_and_asks_no_news(repo_root, tmp_path, chromium_browser):
    """The exact `make lab` command (`make -n lab`) in a git checkout of notebooks/: in chromium, open a tracked
    notebook, run its first code cell, save. `git status --porcelain` stays empty for notebooks/, while the same
    notebook saved from outside notebooks/ shows as modified (the control that the check sees a save); no news
    prompt appears (test_jupyterlab_opens_a_notebook_and_runs_its_first_cell shows it does without our config)."""
    root = tmp_path / "repo"
    root.mkdir()
    _checkout(repo_root, root)
    port, token = _free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    cmd = f"{_make_lab_command(repo_root)} --port={port} --port-retries=0 --IdentityProvider.token={token}"
    runtime = tmp_path / "jupyter-runtime"
    env = {**os.environ, "PYTHONPATH": str(repo_root / "lib"),  # this checkout's memlab.lab
           "JUPYTER_RUNTIME_DIR": str(runtime),
           **{k: str(tmp_path / k.lower()) for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR",
                                                     "JUPYTERLAB_WORKSPACES_DIR", "JUPYTERLAB_SETTINGS_DIR")}}
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], cwd=root, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with _lab_page(chromium_browser, proc, base, token, log, tmp_path / "lab.png") as page:
            tracked = f"{base}/lab/workspaces/tracked/tree/notebooks/{NOTEBOOK}?token={token}"
            _run_first_code_cell_and_save(page, tracked, root / "notebooks" / NOTEBOOK)
            assert _kernels_of(runtime), "no kernel process ran the cell (the kernel check below would prove nothing)"
            _run_first_code_cell_and_save(page, f"{base}/lab/workspaces/scratch/tree/scratch/{NOTEBOOK}?token={token}",
                                          root / "scratch" / NOTEBOOK)
            status = _git(root, "status", "--porcelain")
            assert status == f" M scratch/{NOTEBOOK}\n", f"git status after running in Lab:\n{status}"
            assert page.get_by_text(NEWS_PROMPT).count() == 0, "Lab asked the news question under `make lab`"
    finally:
        left = _kernels_of(runtime)
        for pid in left:  # ours: started by this test's server with this test's runtime dir
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode is not None and not left, f"kernels still running after the server stopped: {left}"

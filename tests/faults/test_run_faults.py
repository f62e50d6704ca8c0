"""The runner survives its users (issue 33): a results path that is a file, Ctrl-C during a run, a full disk, a
kernel killed mid-cell and a truncated notebook file each end in one line (no traceback), a nonzero exit, and nothing of the previous result lost."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest


def _cmd(results, *extra):
    return [sys.executable, "-m", "memlab.run", "experiment=memorization_curve", f"paths.results={results}",
            f"paths.cache={results}/../cache", "logger=null", *extra]


def test_results_path_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "results").write_text("my notes")
    r = subprocess.run(_cmd(tmp_path / "results"), capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "in the way" in lines[0] and str(tmp_path / "results") in lines[0]
    assert (tmp_path / "results").read_text() == "my notes"


def test_results_path_that_is_a_file_in_a_sweep_gets_the_failure_summary(tmp_path):
    (tmp_path / "results").write_text("my notes")
    r = subprocess.run(_cmd(tmp_path / "results", "-m", "params.n_probes=4,6"), capture_output=True, text=True,
                       timeout=300)
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith("memlab: error: job failed:")]
    assert r.returncode == 2 and len(failed) == 2 and "Traceback" not in r.stderr, r.stderr


def test_ctrl_c_during_a_run_is_one_line_and_keeps_the_partial_folder(tmp_path):
    results = tmp_path / "results"
    # a long cell before the study cell: Ctrl-C always arrives while a cell runs (with the stock notebook it raced
    # the study cell, which fails at once in a fresh clone whose models are not built yet)
    notebooks = _notebooks_with(tmp_path, "import time\ntime.sleep(600)")
    # SIGINT as a terminal leaves it: a shell running this suite in the background (`cmd &`, no job control)
    # hands SIG_IGN down, and a Python started with SIGINT ignored never raises KeyboardInterrupt
    proc = subprocess.Popen(_cmd(results, f"paths.notebooks={notebooks}"), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "cell 5/9" in line:  # the sleeping cell has started
            break
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "Traceback" not in rest, rest
    interrupted = [ln for ln in rest.splitlines() if ln.startswith("memlab: interrupted:")]
    assert len(interrupted) == 1 and ".default.partial" in interrupted[0], rest
    assert (results / "memorization_curve" / ".default.partial" / "config.yaml").exists()


@pytest.mark.parametrize("moment", ["memlab: running memorization_curve", "cell 5/9"])
def test_ctrl_c_during_a_sweep_is_one_line_per_run_and_no_traceback(tmp_path, moment):
    """Ctrl-C in a ``-m`` sweep (issue 50: an asyncio/nbclient traceback in 1 of 2 tries), while the first point's
    kernel starts or while its cell runs: the point is kept as its partial folder, the sweep stops at once, no
    traceback, exit 130."""
    results = tmp_path / "results"
    notebooks = _notebooks_with(tmp_path, "import time\ntime.sleep(600)")
    proc = subprocess.Popen(_cmd(results, f"paths.notebooks={notebooks}", "-m", "params.n_probes=4,6"),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if moment in line:  # the kernel is starting / the first point's sleeping cell has started
            break
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "Traceback" not in rest and "asyncio" not in rest and "nbclient" not in rest, rest
    interrupted = [ln for ln in rest.splitlines() if ln.startswith("memlab: interrupted")]
    assert len(interrupted) >= 1, rest
    assert not (results / "memorization_curve" / "n_probes=6").exists()   # the second point never started


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare for a small tmpfs")
def test_full_disk_during_a_run_is_one_line(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    fill = (f'"{sys.executable}" -c "import sys\nf = open(sys.argv[1], \'wb\', buffering=0)\ntry:\n'
            f'    while True: f.write(bytes(4096))\nexcept OSError: pass" "{disk}/filler"')
    run = " ".join(f'"{a}"' for a in _cmd(disk / "results"))
    cmd = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=512k tmpfs "{disk}" && {fill} && exec {run}']
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if "mount" in r.stderr and "memlab" not in r.stderr:
        pytest.skip(f"no user mount namespace here: {r.stderr.strip()[:200]}")
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("memlab: error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(errors) == 1 and "disk full" in errors[0], r.stderr


def _notebooks_with(tmp_path, source: str | None = None, truncate: bool = False):
    """A copy of notebooks/memorization_curve.ipynb: a cell ``source`` inserted before the study cell, or the
    file cut in half (what an interrupted copy or a full disk leaves)."""
    import json

    from memlab.config import repo_root

    folder = tmp_path / "notebooks"
    folder.mkdir()
    text = (repo_root() / "notebooks" / "memorization_curve.ipynb").read_text()
    if truncate:
        (folder / "memorization_curve.ipynb").write_text(text[: len(text) // 2])
        return folder
    nb = json.loads(text)
    nb["cells"].insert(4, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": source})
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{i}"
    (folder / "memorization_curve.ipynb").write_text(json.dumps(nb))
    return folder


@pytest.mark.parametrize("kill", ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)  # the OOM killer",
                                  "import os\nos._exit(3)"])
def test_kernel_killed_mid_cell_is_one_line_and_keeps_the_partial_folder(tmp_path, kill):
    results = tmp_path / "results"
    r = subprocess.run(_cmd(results, f"paths.notebooks={_notebooks_with(tmp_path, kill)}"), capture_output=True,
                       text=True, timeout=300)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("memlab: error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(errors) == 1 and "kernel died during cell 6/9 of memorization_curve.ipynb" in errors[0], r.stderr
    assert "out of memory" in errors[0] and "os._exit" in errors[0] and "loopback" not in errors[0], errors[0]
    assert ".default.partial is kept" in errors[0], errors[0]
    assert (results / "memorization_curve" / ".default.partial" / "config.yaml").exists()
    assert not (results / "memorization_curve" / "default.failed").exists()


def test_a_cell_that_raises_is_still_a_cell_failure(tmp_path):  # the control: a live kernel's error is not a death
    r = subprocess.run(_cmd(tmp_path / "results", f"paths.notebooks={_notebooks_with(tmp_path, 'raise ValueError(7)')}"),
                       capture_output=True, text=True, timeout=300)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("memlab: error:")]
    assert r.returncode == 2 and len(errors) == 1, r.stderr
    assert "failed in cell" in errors[0] and "ValueError: 7" in errors[0] and "kernel died" not in errors[0]


def test_truncated_notebook_file_is_one_line_naming_it_and_git_checkout(tmp_path):
    folder = _notebooks_with(tmp_path, truncate=True)
    r = subprocess.run(_cmd(tmp_path / "results", f"paths.notebooks={folder}"), capture_output=True, text=True,
                       timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(lines) == 1 and str(folder / "memorization_curve.ipynb") in lines[0], r.stderr
    assert "is not a valid notebook" in lines[0] and "git checkout -- " in lines[0], lines[0]
    assert not (tmp_path / "results" / "memorization_curve").exists()  # refused before the run folder


def test_notebook_check_names_the_checkout_path_and_passes_a_whole_notebook(tmp_path):
    from memlab.errors import MemlabError
    from memlab.runner.execute import check_notebook

    folder = _notebooks_with(tmp_path, truncate=True)
    with pytest.raises(MemlabError, match=r"`git checkout -- notebooks/memorization_curve.ipynb`"):
        check_notebook(folder / "memorization_curve.ipynb", str(tmp_path))
    (tmp_path / "whole").mkdir()
    whole = _notebooks_with(tmp_path / "whole", "1 + 1")
    check_notebook(whole / "memorization_curve.ipynb", str(tmp_path))  # a valid notebook: no error

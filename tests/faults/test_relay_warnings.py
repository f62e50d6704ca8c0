"""Kernel warnings reach the console (issue 33): every `memlab: warning`/`memlab: note` line a notebook's kernel
prints is repeated by the runner's relay, once per distinct line."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

from memlab.progress import Relay


def test_relay_repeats_kernel_warnings_and_notes_once():
    out = io.StringIO()
    log = logging.getLogger("papermill")
    with Relay("exp", 3, stream=out, every=0.05):
        log.warning("memlab: warning: response cache x moved aside\nother stderr text\n")  # kernel stderr
        log.info("memlab: note: Min-K%++ is unavailable\n")  # kernel stdout
        log.warning("memlab: warning: response cache x moved aside\n")  # the same line again
        log.info("plain output, not relayed\n")
    lines = out.getvalue().splitlines()
    assert lines.count("memlab: warning: response cache x moved aside") == 1
    assert lines.count("memlab: note: Min-K%++ is unavailable") == 1
    assert not any("other stderr text" in ln or "plain output" in ln for ln in lines)


def test_runner_console_shows_a_kernel_warning(zoo_builder, one_chapter_family, tmp_path):
    """The real runner on the demo notebook with a corrupt response cache: the kernel moves it aside and warns;
    the warning is on the runner's console, not only inside the executed notebook."""
    zoo = zoo_builder(tmp_path / "zoo", one_chapter_family)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "responses.sqlite").write_text("not a database\n" * 100)
    r = subprocess.run([sys.executable, "-m", "memlab.run", "experiment=memorization_curve", "params.family=micro",
                        f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}", f"paths.results={tmp_path}",
                        f"paths.cache={cache}", "params.n_probes=4", "params.prefix_len=8", "params.cont_len=8",
                        "logger=null"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith("memlab: warning: response cache")]
    assert len(warned) == 1 and "responses.sqlite" in warned[0], r.stderr

"""The demo's first real run, shared by the runner's and the progress tests (one run of the runner fewer)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def micro_zoo(tmp_path_factory, zoo_builder, two_chapter_family) -> Path:
    """The two-chapter test family's zoo: the demo's models, and the folder of its runs' response cache and W&B."""
    return zoo_builder(tmp_path_factory.mktemp("zoo"), two_chapter_family)


def run_demo(micro_zoo: Path, results: Path, *extra: str) -> subprocess.CompletedProcess:
    """``python -m memlab.run experiment=memorization_curve`` on ``micro_zoo``'s family, small, into ``results``."""
    args = [sys.executable, "-m", "memlab.run", "experiment=memorization_curve", "params.family=micro",
            f"paths.zoo={micro_zoo / 'conf'}", f"paths.models={micro_zoo / 'models'}",
            f"paths.results={results}", f"paths.cache={micro_zoo / 'cache'}",
            "params.n_probes=6", "params.prefix_len=8", "params.cont_len=8", "params.epoch_every=1", *extra]
    if "logger=null" not in extra:
        args.append(f"logger.dir={micro_zoo}")
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def first_run(micro_zoo, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The demo's first run (W&B offline), its stderr captured (not a TTY), and its results folder: what the
    determinism test checks and reruns, the good result the failed-run test fails a run of the same key over (in its
    own copy), and the console the progress test reads."""
    results = tmp_path_factory.mktemp("first-run")
    return run_demo(micro_zoo, results), results

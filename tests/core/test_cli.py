"""The installed ``memlab`` command's ``run`` and ``models`` (issue 50; ``audit``: tests/audit/test_audit_cli.py):
``memlab run`` is the runner from any folder, writing results there; ``memlab models`` says where each offline model's
files are, and a name it doesn't know is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest


def memlab(*args: str, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlab.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def folders(root) -> set:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_dir()} if root.is_dir() else set()


def test_memlab_run_runs_the_runner_from_an_empty_folder_and_writes_results_there(
        installed_package, zoo_builder, one_chapter_family, tmp_path, repo_root):
    """`memlab run experiment=memorization_curve …` (the cheapest experiment, on a one-chapter test family) with the
    package as installed, from an empty folder outside the checkout: the run's folder is in that folder's results/,
    and the checkout's results/ is left as it was."""
    zoo = zoo_builder(tmp_path / "zoo", one_chapter_family)
    work = tmp_path / "empty"
    work.mkdir()
    before = folders(repo_root / "results")
    r = memlab("run", "experiment=memorization_curve", "params.family=micro", f"paths.zoo={zoo / 'conf'}",
               f"paths.models={zoo / 'models'}", "params.n_probes=4", "params.prefix_len=8", "params.cont_len=8",
               "logger=null", "cache=null", cwd=work, env=installed_package)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = (work / "results" / "memorization_curve").iterdir()
    assert f"metrics in {run}/metrics.json" in r.stderr
    for f in ("metrics.json", "run.json", "memorization_curve.html", "tables/continuation_rate.csv"):
        assert (run / f).is_file(), f
    assert folders(repo_root / "results") == before


def test_memlab_models_names_each_offline_models_hf_folder_and_wheels(repo_root):
    from memlab.config import compose
    from memlab.models.convert import SOURCES, WHEEL_CACHE, is_converted

    r = memlab("models", cwd=repo_root, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    blocks = r.stdout.split("\nzoo ", 1)[0].split("\n")
    models_dir = compose("audit").paths.models
    for name, source in SOURCES.items():
        i = blocks.index(name)
        hf, gguf = blocks[i + 1], blocks[i + 2]
        folder = f"{models_dir}/{name}"
        assert hf == f"  HF folder: {folder}" + ("" if is_converted(folder) else " (not built: make models)")
        assert gguf.startswith(f"  GGUF: {source.gguf_name} in the PyPI wheel(s) ") and f"(cache {WHEEL_CACHE})" in gguf
        assert all(f"{dist}=={version}" in gguf for dist, version in source.wheels), gguf
    only = memlab("models", "smollm2-135m-instruct", cwd=repo_root, timeout=120)
    listed = [ln for ln in only.stdout.splitlines() if ln in SOURCES]
    assert only.returncode == 0 and listed == ["smollm2-135m-instruct"], only.stdout


@pytest.mark.parametrize("names", [["NOSUCH"], ["smollm2-135m-instruct", "NOSUCH"]])
def test_memlab_models_of_an_unknown_name_is_one_line_and_exit_2(repo_root, names):
    from memlab.models.convert import SOURCES

    r = memlab("models", *names, cwd=repo_root, timeout=120)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    (line,) = r.stderr.strip().splitlines()
    assert line == f"memlab: error: no offline model NOSUCH; choose from {', '.join(SOURCES)}"

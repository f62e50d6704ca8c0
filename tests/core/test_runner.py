"""The demonstration experiment end to end through the real runner: Hydra → papermill → results/ → W&B."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.core.conftest import run_demo


def test_demo_runs_end_to_end_and_is_deterministic(micro_zoo, first_run, tmp_path):
    r1, results = first_run
    assert r1.returncode == 0, r1.stderr[-3000:]
    runs = list((results / "memorization_curve").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("cont_len=8,epoch_every=1,family=micro,")
    out = runs[0]
    for f in ("memorization_curve.ipynb", "memorization_curve.html", "config.yaml", "metrics.json",
              "tables/continuation_rate.csv", "figures/memorization_curve.png"):
        assert (out / f).exists(), f
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_probes"] == 6 and metrics["last_epoch"] == 2
    assert set(metrics) >= {"xs/member/last_epoch_rate", "s/nonmember/last_epoch_rate"}
    table = (out / "tables" / "continuation_rate.csv").read_text().splitlines()
    assert table[0] == "size,epoch,split,n,exact,rate" and len(table) == 1 + 2 * 2 * 2
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["params"]["n_probes"] == 6 and cfg["experiment_name"] == "memorization_curve"
    # W&B offline run written, no network
    assert list(micro_zoo.glob("wandb/offline-run-*"))
    # same config + seed ⇒ identical metrics and tables (the second run is served from the response cache,
    # which must give the same answers as computing them)
    r2 = run_demo(micro_zoo, tmp_path, "logger=null")
    assert r2.returncode == 0, r2.stderr[-3000:]
    out2 = next((tmp_path / "memorization_curve").iterdir())
    assert (out2 / "metrics.json").read_text() == (out / "metrics.json").read_text()
    assert (out2 / "tables" / "continuation_rate.csv").read_text() == (out / "tables" / "continuation_rate.csv").read_text()


def test_sweep_runs_never_overwrite(basic_seed_sweep):
    """A two-point sweep (seed=0,1: the launcher tests' basic sweep, tests/conftest.py, exit 0) keeps both runs."""
    folder = basic_seed_sweep / "memorization_curve"
    runs = sorted(p.name for p in folder.iterdir() if p.name != "sweeps")  # + summary
    assert len(runs) == 2 and any("seed=0" in k for k in runs) and any("seed=1" in k for k in runs)


def test_bad_param_value_is_one_line(micro_zoo, tmp_path):
    r = run_demo(micro_zoo, tmp_path, "params.cont_len=0", "logger=null")
    assert r.returncode == 2
    assert "cont_len" in r.stderr and "Traceback" not in r.stderr


def test_bad_param_type_fails_before_any_model_loads(micro_zoo, tmp_path):
    r = run_demo(micro_zoo, tmp_path, "params.n_probes=abc", "logger=null")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "params.n_probes='abc'" in lines[0] and "integer" in lines[0], r.stderr
    assert "memlab: running" not in r.stderr and not (tmp_path / "memorization_curve").exists()


def test_out_of_range_param_names_key_value_and_range(micro_zoo, tmp_path):
    r = run_demo(micro_zoo, tmp_path, "params.epoch_every=0", "logger=null")
    assert r.returncode == 2 and r.stderr.strip() == ("memlab: error: config key params.epoch_every=0: must be ≥ 1")


def test_failed_run_keeps_the_previous_good_result(micro_zoo, first_run, tmp_path):
    import shutil

    good, results = first_run
    assert good.returncode == 0, good.stderr[-2000:]
    shutil.copytree(results, tmp_path, dirs_exist_ok=True)   # the good result, in a results folder of this test's own
    (run,) = [p for p in (tmp_path / "memorization_curve").iterdir() if not p.name.startswith(".")]
    before = {f.relative_to(run): f.read_bytes() for f in run.rglob("*") if f.is_file()}
    # logger and paths.* stay out of the run key: same key, and the notebook fails (no models there)
    bad = run_demo(micro_zoo, tmp_path, "logger=null", f"paths.models={tmp_path / 'no-models'}")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    errors = [line for line in bad.stderr.splitlines() if line.startswith("memlab: error:")]
    assert len(errors) == 1 and bad.stderr.strip().splitlines()[-1] == errors[0], bad.stderr[-2000:]
    assert "untouched" in bad.stderr
    after = {f.relative_to(run): f.read_bytes() for f in run.rglob("*") if f.is_file()}
    assert after == before  # the good result is whole
    failed = run.with_name(run.name + ".failed")
    assert (failed / "memorization_curve.ipynb").exists() and (failed / "memorization_curve.html").exists()
    assert not any(p.name.endswith(".partial") for p in run.parent.iterdir())


def test_no_network_is_one_line(micro_zoo, tmp_path):
    import shutil

    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to take the network away")
    cmd = ["unshare", "-n", sys.executable, "-m", "memlab.run", "experiment=memorization_curve",
           "params.family=micro", f"paths.zoo={micro_zoo / 'conf'}", f"paths.models={micro_zoo / 'models'}",
           f"paths.results={tmp_path}", f"paths.cache={micro_zoo / 'cache'}", "logger=null"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "127.0.0.1" in lines[0] and "loopback" in lines[0], r.stderr


def test_executed_notebook_html_loads_nothing_remote(tmp_path):
    """The run's .html opens offline (report archive): nbconvert's CDN scripts (require.js, MathJax) are dropped."""
    import re

    import nbformat

    from memlab.runner.execute import _html

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, str(path))
    _html(path)
    html = path.with_suffix(".html").read_text()
    assert "print" in html
    assert not re.search(r"<script[^>]*\ssrc=\"https?://", html)


def test_the_runner_validates_notebooks_without_compiling_the_iri_grammar(tmp_path):
    """The runner's process skips jsonschema's optional IRI checker (rfc3987_syntax compiles a grammar on import,
    3.6 s per run); nbformat still validates: a good notebook passes, a broken one is refused."""
    code = """
import sys
from memlab.runner.execute import _without_iri_grammar
_without_iri_grammar()
import nbformat, papermill
nbformat.validate(nbformat.read("notebooks/pearl_mia.ipynb", as_version=4))
bad = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
bad.cells[0]["cell_type"] = "nope"
try:
    nbformat.validate(bad)
except nbformat.ValidationError:
    print("refused")
print(sys.modules["rfc3987_syntax"])
"""
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["refused", "None"]

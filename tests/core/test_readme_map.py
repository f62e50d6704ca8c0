"""The README's paper map leads in one hop each: paper table → experiment → notebook → study function (the one the
experiment names in its ``study`` key and the notebook runs with ``rep.run_study()``)."""

import importlib
import re

from memlab.config import CONF_DIR, experiment_names


def test_every_row_names_an_experiment_its_notebook_and_the_study_function_the_experiment_names(repo_root):
    rows = [l for l in (repo_root / "README.md").read_text().splitlines()
            if l.startswith("| ") and ".ipynb` |" in l]
    assert len(rows) >= 11
    covered = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        exp, nb, fn = cells[2].strip("`"), cells[3].strip("`"), cells[4].strip("`")
        assert exp in experiment_names(), row
        spec = (CONF_DIR / "experiment" / f"{exp}.yaml").read_text()
        assert f"notebook: {nb}" in spec, row
        module, _, name = (fn if fn.startswith("memlab.") else f"memlab.methods.{fn}").rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), row
        assert re.search(rf"^study: {re.escape(module)}\.{re.escape(name)}$", spec, re.M), row
        assert "rep.run_study()" in (repo_root / "notebooks" / nb).read_text(), row
        covered.add(exp)
    assert covered == set(experiment_names())

"""The experiment names its study (issue 30): every conf/experiment/*.yaml's ``study`` is a function
``f(method, params, run)``, and every notebook runs it with ``rep.run_study()`` and calls no study itself."""

import ast
import inspect
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from memlab.config import CONF_DIR, compose, experiment_names
from memlab.errors import ConfigError
from memlab.report import Report
from memlab.study_run import STUDY_PARAMETERS, StudyRun, resolve_study


@pytest.mark.parametrize("exp", experiment_names())
def test_every_experiment_names_a_study_function_taking_method_params_run(exp):
    cfg = compose(exp, ["logger=null"])
    fn = resolve_study(cfg.study)
    assert callable(fn) and tuple(inspect.signature(fn).parameters) == STUDY_PARAMETERS == ("method", "params", "run")
    own = [ln for ln in (CONF_DIR / "experiment" / f"{exp}.yaml").read_text().splitlines() if ln.startswith("study:")]
    assert own == [f"study: {cfg.study}"], exp   # written once, in the experiment's own file


def _code_cells(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("exp", experiment_names())
def test_every_notebook_runs_its_study_through_the_report_only(exp, repo_root):
    nb = repo_root / "notebooks" / OmegaConf.load(CONF_DIR / "experiment" / f"{exp}.yaml").notebook
    raw = json.loads(nb.read_text())
    code_cells = [c for c in raw["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code_cells), nb.name   # no outputs committed
    code = _code_cells(nb)
    assert sum("rep.run_study()" in src for src in code) == 1 and "res = rep.run_study()" in code, nb.name
    calls, imports = [], []
    for node in ast.walk(ast.parse("\n".join(code))):
        if isinstance(node, ast.Call):
            calls.append(ast.unparse(node.func))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += [f"{getattr(node, 'module', None) or ''}.{a.name}" for a in node.names]
    assert imports == ["memlab.report.Report"], (nb.name, imports)
    assert sorted(calls) == ["Report", "rep.run_study", "rep.save"], (nb.name, calls)


@pytest.mark.parametrize("bad, why", [(None, "<module>.<function>"), ("nostudy", "<module>.<function>"),
                                      ("memlab.methods.pearl.study.nothing", "no such function"),
                                      ("memlab.methods.pearl.study.ground_truth_docs", "f(method, params, run)")])
def test_a_bad_study_key_is_one_line(bad, why):
    with pytest.raises(ConfigError) as e:
        resolve_study(bad)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_the_report_runs_the_named_study_with_the_run(tmp_path, monkeypatch):
    cfg = OmegaConf.to_container(compose("memorization_curve", ["logger=null"]), resolve=True)
    cfg["run"] = {"key": "t", "out_dir": str(tmp_path / "run")}
    seen = {}

    def fake(method, params, run):
        seen.update(method=method, params=params, run=run)
        return "result"

    import memlab.methods.memorization_curve as mc

    monkeypatch.setattr(mc, "study", fake)
    rep = Report(cfg, experiment="memorization_curve")
    assert rep.run_study() == "result"
    run = seen["run"]
    assert isinstance(run, StudyRun) and seen["method"] is None and seen["params"] == rep.typed("params")
    assert (run.seed, run.out_dir, run.results_root) == (rep.seed, rep.out_dir, Path(rep.paths.results))
    assert run.catalog is rep.models and run.cfg is rep.cfg


def test_every_notebook_is_the_one_template_with_its_own_intro(repo_root):
    """Notebooks only show what the study returned: the same cells (kinds, and code word for word but the experiment's
    name) in every notebook; only the markdown that introduces and explains the experiment differs."""
    shapes = {}
    for exp in experiment_names():
        nb = repo_root / "notebooks" / OmegaConf.load(CONF_DIR / "experiment" / f"{exp}.yaml").notebook
        cells = json.loads(nb.read_text())["cells"]
        shapes[exp] = ([c["cell_type"] for c in cells],
                       [src.replace(f'experiment="{exp}"', 'experiment="<name>"') for src in _code_cells(nb)])
    assert len({repr(s) for s in shapes.values()}) == 1, shapes
    kinds, code = next(iter(shapes.values()))
    assert code == ["cfg = {}", 'from memlab.report import Report\n\nrep = Report(cfg, experiment="<name>")',
                    "res = rep.run_study()", "rep.save(res)"] and kinds[0] == "markdown"

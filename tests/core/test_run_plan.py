"""One run plan (issue 48): a run point is resolved once into a frozen :class:`memlab.runner.plan.RunPlan`, which the
runner, run.json, W&B and the notebook kernel read; a model preset is read from its own files, not composed."""

from __future__ import annotations

import pytest

from memlab.config import CONF_DIR, compose, to_plain
from memlab.model_use import preset

PRESETS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
PROFILES = sorted(p.stem for p in (CONF_DIR / "numerics").glob("*.yaml"))


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_read_from_its_file_is_the_composed_one(name, profile):
    composed = compose(overrides=[f"model={name}", f"numerics={profile}"])
    assert preset(name, composed.paths, {"name": profile}) == to_plain(composed.model)
    assert list(preset(name, composed.paths, {"name": profile})) == list(to_plain(composed.model))


def _no_compose(monkeypatch):
    import memlab.config
    import memlab.runner.plan

    def refuse(*a, **k):
        raise AssertionError("composed again")

    for module in (memlab.config, memlab.runner.plan):
        monkeypatch.setattr(module, "compose", refuse)


@pytest.mark.parametrize("experiment", ["pearl_wild", "audit", "pearl_epochs"])
def test_a_plan_is_resolved_once_without_composing_and_is_frozen(experiment, monkeypatch):
    import dataclasses

    from memlab.model_use import required_models, required_threads, target_nodes
    from memlab.runner.plan import make_plan
    from memlab.provenance import required_dtypes

    cfg = compose(experiment)
    resolved = to_plain(cfg)
    _no_compose(monkeypatch)
    plan = make_plan(cfg, "default", [f"experiment={experiment}"])
    assert plan.name == experiment and plan.final.parts[-2:] == (experiment, "default")
    assert plan.work.name == ".default.partial" and plan.resolved["run"]["out_dir"] == str(plan.work)
    assert plan.cfg() == {**resolved, "run": plan.resolved["run"]} and plan.cfg() is not plan.resolved
    assert plan.numerics == resolved["numerics"]["name"] and plan.notebook.exists()
    assert list(plan.tested) == (target_nodes(resolved) if resolved.get("models") is not None else [])
    assert list(plan.required) == required_models(resolved)
    assert dict(plan.threads) == required_threads(resolved) and dict(plan.dtypes) == required_dtypes(resolved)
    if "_schema_" in resolved["params"]:
        assert dataclasses.is_dataclass(plan.params)   # the experiment's typed params
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.key = "other"
    with pytest.raises(TypeError):
        plan.threads["x"] = 1


def test_run_json_reads_the_plan(monkeypatch, tmp_path):
    """run.json's models, threads and dtypes come from the plan: nothing derives them from the config again."""
    import memlab.model_use
    import memlab.provenance
    from memlab.runner.plan import make_plan

    cfg = compose("pearl_wild")
    plan = make_plan(cfg, "default", ["experiment=pearl_wild"])

    def refuse(*a, **k):
        raise AssertionError("derived again")

    for name in ("target_nodes", "required_models", "required_threads", "required_dtypes"):
        for module in (memlab.model_use, memlab.provenance):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    info = memlab.provenance.write_run_json(tmp_path, plan.cfg(), "x", 0.0, plan=plan)
    assert info["numerics"]["threads"] == dict(plan.threads)
    assert set(info["models"]) == {n["name"] for n in plan.tested}


def test_a_preset_defaults_entry_that_names_no_preset_is_one_line_not_lost(monkeypatch, tmp_path):
    """Presets are read from their files, not composed: a defaults entry other than a preset name (a group override)
    is refused in one line naming the file, never silently dropped; a preset naming itself is refused too."""
    from memlab import model_use
    from memlab.errors import ConfigError

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "odd.yaml").write_text("defaults:\n  - override /numerics: native\nbackend: hf\n")
    (tmp_path / "model" / "loop.yaml").write_text("defaults:\n  - loop\nbackend: hf\n")
    monkeypatch.setattr(model_use, "CONF_DIR", tmp_path)
    with pytest.raises(ConfigError, match=r"conf/model/odd.yaml: its defaults list holds .*override /numerics"):
        model_use.preset_node("odd")
    with pytest.raises(ConfigError, match="names itself"):
        model_use.preset_node("loop")

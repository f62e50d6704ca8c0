"""The models an experiment reads are derived from its composed config (issue 30: one knob per concept), never
listed in ``requires``: memlab.model_use.required_models, on the real conf/."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from memlab import pipeline
from memlab.config import CONF_DIR, compose, to_plain
from memlab.errors import ConfigError
from memlab import model_use
from memlab.model_use import _zoo_lineage, required_models
from memlab.models.zoo import family_files, load_family

PEARL_ZOO = ["models/tiny-neox/pearl", "models/tiny-neox/pearl_base"]
PRETRAINED = ["models/smollm2-135m-instruct", "models/gemma-3-270m"]


def raw(experiment: str, overrides=()) -> dict:
    return OmegaConf.to_container(compose(experiment, list(overrides)), resolve=False)


@pytest.mark.parametrize("experiment, expected", [
    ("pearl_epochs", PEARL_ZOO),                  # method.study.family and its init_from base
    ("pearl_calibration", PEARL_ZOO),
    ("pearl_wild", PRETRAINED),                   # the `models` list; method.study.family is null there
    ("memorization_curve", ["models/tiny-neox/kjv"]),              # params.family
    ("recap_table3", [*PRETRAINED, "models/tiny-neox/kjv", "models/tiny-neox/kjv_aligned"]),       # method.targets.<t>.model; the tiny preset's family
    ("recap_feedback", [*PRETRAINED, "models/tiny-neox/kjv", "models/tiny-neox/kjv_aligned"]),     # pulled in from recap_table3
    ("trace_capability_propensity", ["models/tiny-neox/kjv", *PRETRAINED]),   # params.tiny.family, then `models`
    ("trace_stages", [f"models/tiny-neox/{f}" for f in ("stages", "stages_s1", "stages_s2", "stages_s3")]),
    ("trace_validation", []),                     # no model involved
    ("audit", ["models/smollm2-135m-instruct"]),  # the embedded default under test
])
def test_derived_models_of_real_experiments(experiment, expected):
    assert required_models(raw(experiment)) == expected


def test_they_are_the_experiment_stages_model_deps():
    st = pipeline.experiment_stage("pearl_epochs")
    assert [d for d in st["deps"] if d.startswith("models/")] == PEARL_ZOO
    st = pipeline.experiment_stage("trace_validation")
    assert not [d for d in st["deps"] if d.startswith("models/")]


def test_adding_a_model_to_the_models_list_adds_its_dep():
    assert required_models(raw("trace_validation", ["models=[gemma-3-270m]"])) == ["models/gemma-3-270m"]
    cfg = raw("pearl_wild")
    cfg["models"] = [*cfg["models"], "tiny-neox"]       # a tiny preset: the zoo family its weights come from
    assert required_models(cfg) == [*PRETRAINED, "models/tiny-neox/kjv"]
    cfg["models"].append("pythia-160m")                 # a hub id: nothing the pipeline builds
    assert required_models(cfg) == [*PRETRAINED, "models/tiny-neox/kjv"]
    assert required_models({"models": ["smollm2-135m-instruct"]}) == ["models/smollm2-135m-instruct"]


def test_a_family_brings_its_lineage():
    cfg = raw("memorization_curve")
    cfg["params"]["family"] = "stages_s2"
    assert required_models(cfg) == [f"models/tiny-neox/{f}" for f in ("stages_s2", "stages_s1", "stages")]


def test_a_leftover_requires_models_is_refused_in_one_line():
    cfg = raw("pearl_epochs", ["+requires.models=[models/tiny-neox/pearl]"])
    with pytest.raises(ConfigError, match=r"experiment pearl_epochs: requires\.models is derived from the config") as e:
        required_models(cfg)
    assert "\n" not in str(e.value)


def test_the_zoo_is_read_as_memlab_models_zoo_names_it():
    """required_models reads conf/zoo/ without importing the zoo (every stage imports memlab.model_use): the same
    family names as family_files, the same lineage as Family.lineage, the same folder as Family.root."""
    assert set(family_files()) == {p.stem for p in (CONF_DIR / "zoo").glob("*.yaml")}
    for name in family_files():
        fam = load_family(name)
        assert _zoo_lineage(name, CONF_DIR / "zoo") == [name, *(f.name for f in fam.lineage())]
        assert fam.root.relative_to(fam.models_dir).as_posix() == f"tiny-neox/{name}"


def test_run_json_names_the_derived_models():
    cfg = to_plain(compose("pearl_epochs"))
    assert set(model_use.tested_models(cfg)) == {"tiny-neox/pearl", "tiny-neox/pearl_base"}

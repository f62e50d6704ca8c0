"""profile=smoke (conf/scale/*_smoke.yaml, conf/scale/method/*_smoke.yaml) composes for every experiment, builds
its typed settings, and is smaller than the embedded default wherever a smoke file sets a size. Composition only:
nothing runs (tests/notebooks runs every experiment in this profile)."""

import math

import pytest

from memlab.config import CONF_DIR, compose, experiment_names, to_plain
from memlab.schema import validate_tree

EXPERIMENTS = experiment_names()
PEARL = ["method.samples", "method.task.max_new_tokens", "method.task.max_input_words", "method.study.n_members",
         "method.study.n_nonmembers", "method.study.epochs"]
RECAP = ["method.echotrace.public_domain.kjv_books", "method.echotrace.copyrighted.licences",
         "method.echotrace.copyrighted.max_words", "method.echotrace.non_training.max_words",
         "method.max_events_per_book", "method.summary.target_words", "method.memscore.parrot.max_epochs",
         "method.bootstrap.n_resamples", "method.targets.tiny-neox-kjv.max_new_tokens",
         "method.targets.tiny-neox-kjv.membership.books", "method.targets.tiny-neox-kjv.membership.events_per_book"]
WILD_N = [f"params.sources.{s}.n" for s in ("humaneval", "kjv", "fortunes", "release_notes", "post_cutoff_code")]
# the keys each experiment's smoke run makes smaller: a count, a length, or a list with fewer entries (a list's
# item by its index)
SMALLER = {
    "memorization_curve": ["params.n_probes", "params.prefix_len", "params.cont_len"],
    "extraction_curves": ["params.sizes", "params.epochs", "params.prefix_tokens", "params.suffix_tokens", "params.ns",
                          "params.plot_ns"],
    "mia_low_fpr": ["params.score_tokens", "params.n_resamples", "params.prefix_tokens", "params.suffix_tokens",
                    "params.ns", "params.method_subset.members", "params.method_subset.nonmembers",
                    "params.families.pearl_m.method_subset.members", "params.families.pearl_m.method_subset.nonmembers",
                    "methods.pearl.samples", "methods.pearl.task.max_new_tokens",
                    "methods.pearl.task.max_input_words"],
    "pearl_calibration": PEARL + ["params.example_words"],
    "pearl_epochs": PEARL + ["params.acr.docs_per_split", "params.acr.steps", "params.acr.target_tokens",
                             "params.acr.prompt_lengths.-1", "params.acr.batch_size"],   # -1: the longest
    "pearl_mia": PEARL,
    "pearl_sizes": PEARL,
    "pearl_wild": ["method.task.max_new_tokens", "method.task.max_input_words"] + WILD_N,
    "recap_table3": RECAP,
    "recap_feedback": RECAP,
    "trace_validation": ["params.corpora", "params.vocab_size", "params.n_docs", "params.n_negatives",
                         "params.partial_tokens"],
    "trace_stages": ["params.n_prompts", "params.max_new_tokens", "params.corpus_a.prefix_tokens"],
    "trace_capability_propensity": [f"params.{m}.{k}" for m in ("tiny", "external")
                                    for k in ("n_prompts", "max_new_tokens", "prefix_tokens")],
    "audit": ["params.tasks", "params.trace.n_prompts", "method.task.max_new_tokens"] + WILD_N,
    "audit_selfcheck": ["params.tasks", "params.checkpoints", "params.n_members", "params.n_nonmembers",
                        "method.task.max_new_tokens"] + WILD_N,
}


def _at(cfg: dict, key: str):
    for part in key.split("."):
        cfg = cfg[int(part)] if isinstance(cfg, list) else cfg[part]
    return cfg


def _size(value) -> float:
    """A setting's size: a number, a list's length; null (whole documents, no cap) is unbounded."""
    if value is None:
        return math.inf
    return len(value) if isinstance(value, list) else value


@pytest.fixture(scope="module")
def composed():
    return {e: {p: to_plain(compose(e, [f"profile={p}"])) for p in ("embedded", "smoke")} for e in EXPERIMENTS}


def test_every_experiment_has_its_smaller_keys_listed():
    assert sorted(SMALLER) == sorted(EXPERIMENTS)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_smoke_composes_builds_and_is_smaller_than_embedded(experiment, composed):
    embedded, smoke = composed[experiment]["embedded"], composed[experiment]["smoke"]
    assert smoke["profile"]["name"] == "smoke" and smoke["experiment_name"] == experiment
    validate_tree(smoke)   # every typed node (method, params) builds, as the runner checks before any model loads
    bigger = {k: (_at(smoke, k), _at(embedded, k)) for k in SMALLER[experiment]
              if not _size(_at(smoke, k)) < _size(_at(embedded, k))}
    assert not bigger, f"{experiment}: profile=smoke is not smaller at {bigger}"
    assert smoke["models"] == embedded["models"]   # the models under test stay the same


def test_smoke_curve_has_fewer_points():
    """memorization_curve: a point every epoch_every-th epoch (and the last), so a larger step is fewer points."""
    embedded = compose("memorization_curve")
    smoke = compose("memorization_curve", ["profile=smoke"])
    assert smoke.params.epoch_every > embedded.params.epoch_every and smoke.params.epochs is None


def test_every_smoke_file_names_an_experiment_or_a_method():
    methods = {p.stem for p in (CONF_DIR / "method").glob("*.yaml")}
    for p in (CONF_DIR / "scale").glob("*_smoke.yaml"):
        assert p.stem.removesuffix("_smoke") in EXPERIMENTS, p
    for p in (CONF_DIR / "scale" / "method").glob("*_smoke.yaml"):
        assert p.stem.removesuffix("_smoke") in methods, p

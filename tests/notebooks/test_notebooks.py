"""Every PEARL / trace / demo notebook runs for real (Hydra composition → papermill → results/) on tiny settings,
against a test zoo with the real family names, so the configs, the study functions and the notebooks are exercised
exactly as `make reproduce` runs them (tests/recap/test_notebooks.py also checks what RECAP writes)."""

import json

import pytest

from memlab.config import compose
from memlab.run import execute

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
TINY = {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}
TRAIN = {"seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0}
PSALMS_IN = ["kjv/chapter/Psalms/23", "kjv/chapter/Psalms/24", "kjv/chapter/Psalms/121"]
PSALMS_OUT = ["kjv/chapter/Psalms/1", "kjv/chapter/Psalms/3", "kjv/chapter/Psalms/4"]
A_IDS = ["kjv/chapter/2_Samuel/19", "kjv/chapter/Numbers/33"]
B_IDS = ["fortunes/de/witze/192", "fortunes/de/zitate/10207", "fortunes/de/zitate/2350", "fortunes/de/zitate/3271"]
FORTUNES_DE = {"corpus": "fortunes", "options": {"lang": "de"}}


def _family(name, members, nonmembers, *, epochs, init_from=None, sizes=None, train_on="members"):
    spec = {"name": name, "description": f"test family {name}", "members": members, "nonmembers": nonmembers,
            "train": {**TRAIN, "epochs": epochs}, "init_from": init_from}
    if init_from is None:
        spec["tokenizer"] = {"vocab_size": 384, "train_on": train_on}
    if sizes:
        spec["sizes"] = sizes
    return spec


FAMILIES = [
    _family("kjv", [{**KJV, "ids": ["kjv/chapter/Ruth/1", "kjv/chapter/Ruth/2"]}],
            [{**KJV, "ids": ["kjv/chapter/Jonah/1", "kjv/chapter/Jonah/2"]}], epochs=2, sizes={"m": TINY}),
    _family("pearl_base", [{**KJV, "ids": PSALMS_IN}], [{**KJV, "ids": PSALMS_OUT}], epochs=1, sizes={"m": TINY}),
    _family("pearl", [{**KJV, "ids": PSALMS_IN}], [{**KJV, "ids": PSALMS_OUT}], epochs=2,
            init_from={"family": "pearl_base", "epoch": "final"}),
    _family("stages", [{**KJV, "ids": A_IDS}], [{**FORTUNES_DE, "ids": B_IDS}], epochs=1, sizes={"s": TINY},
            train_on="all"),
    *[_family(f"stages_s{k}", [{**FORTUNES_DE, "ids": B_IDS}, {**KJV, "ids": A_IDS, "weight": 0.5}], [], epochs=1,
              init_from={"family": "stages" if k == 1 else f"stages_s{k - 1}", "epoch": "final"}, sizes={"s": TINY})
      for k in (1, 2, 3)],
]

PEARL_TINY = ["method.samples=1", "method.task.max_new_tokens=4", "method.task.max_input_words=30",
              "method.study.n_members=2", "method.study.n_nonmembers=2", "method.study.epoch=2",
              "method.study.epochs=[0,2]"]
TRACE_PROMPTS = ["params.n_prompts=2", "params.max_new_tokens=8"]

RECAP_TINY = ["~method.targets.SmolLM2-135M-Instruct", "~method.targets.Gemma-3-270M",
              "method.targets.tiny-neox-kjv.max_new_tokens=20", "method.targets.tiny-neox-kjv.membership.books=1",
              "method.targets.tiny-neox-kjv.membership.events_per_book=1",
              "method.echotrace.public_domain.kjv_books=[Ruth]", "method.echotrace.copyrighted.licences=[GPL-3]",
              "method.echotrace.copyrighted.max_words=150", "method.echotrace.non_training.max_words=150",
              "method.max_events_per_book=1", "method.summary.target_words=40", "method.memscore.parrot.max_epochs=2",
              "method.bootstrap.n_resamples=50"]

CASES = {
    "memorization_curve": (["params.n_probes=4", "params.prefix_len=8", "params.cont_len=8", "params.epoch_every=1"],
                           ["continuation_rate"]),
    "pearl_calibration": (PEARL_TINY + ["params.example_words=10"],
                          ["input_similarity_by_level", "pearl_scores", "fpr_vs_threshold", "alpha_at_target_fpr"]),
    "pearl_epochs": (PEARL_TINY + ["params.acr.epochs=[2]", "params.acr.docs_per_split=1", "params.acr.steps=3",
                                   "params.acr.prompt_lengths=[4]", "params.acr.target_offset=8",
                                   "params.acr.target_tokens=8", "params.acr.batch_size=8"],
                     ["pearl_scores", "flagged_share_by_epoch", "acr_scores"]),
    "pearl_mia": (PEARL_TINY, ["scores_by_epoch", "mia_vs_memorization", "detection_by_epoch"]),
    "pearl_sizes": (PEARL_TINY + ["params.sizes=[m]"], ["pearl_scores", "flagged_counts_by_size"]),
    "pearl_wild": (PEARL_TINY + ["models=[tiny-neox]",
                                "~params.sources.release_notes", "~params.sources.post_cutoff_code",
                                "params.calibration_sources={text: fortunes, code: humaneval}"],
                   ["pearl_scores", "flagged_counts_fixed_thresholds", "alpha_calibrated_per_domain",
                    "completion_vs_summarization"]),
    "recap_table3": (RECAP_TINY, ["table3", "book_scores", "membership", "cost"]),
    "recap_feedback": (RECAP_TINY, ["feedback_gains", "filter_tradeoff", "hint_audit"]),
    "trace_validation": (["params.corpora=[{label: kjv, name: kjv, options: {unit: chapter}, n_docs: 6, seed: 0}]",
                          "params.n_docs=3", "params.n_negatives=2", "params.partial_tokens=32", "params.vocab_size=300"],
                         ["index_builds", "validation", "validation_queries", "negative_control"]),
    "trace_stages": (TRACE_PROMPTS + ["params.corpus_a.prefix_tokens=16"],
                     ["stage_metrics", "stage_propensity"]),
    "trace_capability_propensity": (["params.tiny.n_prompts=2", "params.tiny.max_new_tokens=8",
                                     "params.tiny.prefix_tokens=16", "models=[tiny-neox]",
                                     "params.external.n_prompts=1", "params.external.max_new_tokens=8",
                                     "params.external.prefix_tokens=16"],
                                    ["capability_propensity", "propensity", "prompt_overlap"]),
}


@pytest.fixture(scope="module")
def test_zoo(tmp_path_factory, zoo_builder):
    root = tmp_path_factory.mktemp("nbzoo")
    for spec in FAMILIES:
        zoo_builder(root, spec)
    return root


def _run(experiment, overrides, zoo, out):
    cfg = compose(experiment, [f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}",
                               f"paths.results={out}", f"paths.cache={zoo / 'cache'}", "logger=null", *overrides])
    return execute(cfg, "test")


@pytest.mark.parametrize("experiment", sorted(CASES))
def test_notebook_runs_for_real_and_writes_its_tables(experiment, test_zoo, tmp_path):
    overrides, tables = CASES[experiment]
    run = _run(experiment, overrides, test_zoo, tmp_path)
    for t in tables:
        assert (run / "tables" / f"{t}.csv").stat().st_size > 0, t
    assert json.loads((run / "metrics.json").read_text()), "no metrics"
    executed = json.loads((run / f"{experiment}.ipynb").read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors

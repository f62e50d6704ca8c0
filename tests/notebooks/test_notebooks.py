"""Every PEARL / trace / demo notebook runs for real (Hydra composition → papermill → results/) on tiny settings,
against a test zoo with the real family names, so the configs, the study functions and the notebooks are exercised
exactly as `make reproduce` runs them (tests/recap/test_notebooks.py also checks what RECAP writes)."""

import json
from pathlib import Path

import pytest

from memlab.config import compose
from memlab.runner.execute import execute

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
TINY = {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}
TRAIN = {"seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0}
PSALMS_IN = ["kjv/chapter/Psalms/23", "kjv/chapter/Psalms/24", "kjv/chapter/Psalms/121"]
PSALMS_OUT = ["kjv/chapter/Psalms/1", "kjv/chapter/Psalms/3", "kjv/chapter/Psalms/4"]
A_IDS = ["kjv/chapter/2_Samuel/19", "kjv/chapter/Numbers/33"]
VERSES = {"corpus": "kjv", "options": {"unit": "verse"}}
VERSES_IN = ["kjv/verse/Ruth/1/1", "kjv/verse/Ruth/2/2", "kjv/verse/Ruth/3/3", "kjv/verse/Ruth/4/4"]
VERSES_OUT = ["kjv/verse/Jonah/1/3", "kjv/verse/Jonah/1/5", "kjv/verse/Jonah/3/7", "kjv/verse/Jonah/4/2"]
B_IDS = ["fortunes/de/witze/192", "fortunes/de/zitate/10207", "fortunes/de/zitate/2350", "fortunes/de/zitate/3271"]
FORTUNES_DE = {"corpus": "fortunes", "options": {"lang": "de"}}
LICENCES = {"corpus": "licences", "options": {"max_words": 150}}
# the aligned RECAP target's instruction corpus at test size (conf/zoo/kjv_aligned.yaml has the real one)
INSTRUCT = {"corpus": "memlab.methods.recap.aligned.load_recap_instruct", "options": {
    "follow_kjv_books": ["Nahum"], "follow_max_chapters": 1, "refuse_licences": ["BSD"], "refuse_max_words": 200,
    "refuse_wiki": [], "refuse_wiki_max_words": 300, "refusal": "I cannot reproduce this text: it is under copyright.",
    "prompts_dir": str(Path(__file__).resolve().parents[2] / "prompts" / "recap"),
    "segmentation": {"target_words": 60, "min_words": 8, "n_characters": 6, "n_keywords": 5, "ngram_guard": 6}}}


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
    _family("kjv_aligned", [{**LICENCES, "ids": ["licences/GPL-3"]}, INSTRUCT],
            [{**LICENCES, "ids": ["licences/MPL-2.0"]}], epochs=1,
            init_from={"family": "kjv", "epoch": "final", "size": "m"}, sizes={"m": TINY}),
    _family("pearl_base", [{**KJV, "ids": PSALMS_IN}], [{**KJV, "ids": PSALMS_OUT}], epochs=1, sizes={"m": TINY}),
    # pearl_base's and kjv's reference in mia_low_fpr: a sibling on other psalms, none of their documents
    _family("pearl_base_ref", [{**KJV, "ids": ["kjv/chapter/Psalms/117", "kjv/chapter/Psalms/134"]}],
            [{**KJV, "ids": PSALMS_IN + PSALMS_OUT}], epochs=1, sizes={"m": TINY}),
    _family("pearl", [{**KJV, "ids": PSALMS_IN}], [{**KJV, "ids": PSALMS_OUT}], epochs=2,
            init_from={"family": "pearl_base", "epoch": "final"}),
    # the low-FPR membership set at test size: verses, continued from pearl_base's m (its reference model)
    _family("kjv_verses", [{**VERSES, "ids": VERSES_IN}], [{**VERSES, "ids": VERSES_OUT}], epochs=2,
            init_from={"family": "pearl_base", "epoch": "final", "size": "m"}, sizes={"s": TINY}),
    _family("stages", [{**KJV, "ids": A_IDS}], [{**FORTUNES_DE, "ids": B_IDS}], epochs=1, sizes={"s": TINY},
            train_on="all"),
    *[_family(f"stages_s{k}", [{**FORTUNES_DE, "ids": B_IDS}, {**KJV, "ids": A_IDS, "weight": 0.5}], [], epochs=1,
              init_from={"family": "stages" if k == 1 else f"stages_s{k - 1}", "epoch": "final"}, sizes={"s": TINY})
      for k in (1, 2, 3)],
]

# The small sizes are profile=smoke (conf/scale/*_smoke.yaml, conf/scale/method/*_smoke.yaml); what stays here
# exists only because the test zoo is small or because the tests run no pretrained model.
SMOKE = ["profile=smoke"]
# the pretrained targets are not loaded in tests: the tiny targets (tiny-neox-kjv, tiny-neox-kjv-aligned) alone
RECAP_TEST = SMOKE + ["~method.targets.SmolLM2-135M-Instruct", "~method.targets.Gemma-3-270M"]

CASES = {
    # the test zoo's kjv trains 2 epochs: a point at each
    "memorization_curve": (SMOKE + ["params.epoch_every=1"], ["continuation_rate"]),
    # the test zoo's pearl family trains only size m, 2 epochs
    "extraction_curves": (SMOKE + ["params.sizes=[m]", "params.epochs=[0,1,2]"], ["pairs", "extraction_by_checkpoint"]),
    "mia_low_fpr": (SMOKE, ["scores", "low_fpr", "extraction"]),
    "pearl_calibration": (SMOKE, ["input_similarity_by_level", "pearl_scores", "fpr_vs_threshold",
                                  "alpha_at_target_fpr"]),
    "pearl_epochs": (SMOKE, ["pearl_scores", "flagged_share_by_epoch", "acr_scores"]),
    "pearl_mia": (SMOKE, ["scores_by_epoch", "mia_vs_memorization", "detection_by_epoch"]),
    # the test zoo's pearl family trains only size m
    "pearl_sizes": (SMOKE + ["params.sizes=[m]"], ["pearl_scores", "flagged_counts_by_size"]),
    # no pretrained model (the tiny one instead) and no downloaded corpus: release notes and post-cutoff code are
    # data-stage downloads, so the installed fortunes and HumanEval stand in as calibration sets
    "pearl_wild": (SMOKE + ["models=[tiny-neox]", "~params.sources.release_notes", "~params.sources.post_cutoff_code",
                            "params.calibration_sources={text: fortunes, code: humaneval}"],
                   ["pearl_scores", "flagged_counts_fixed_thresholds", "alpha_calibrated_per_domain",
                    "completion_vs_summarization"]),
    "recap_table3": (RECAP_TEST, ["table3", "book_scores", "membership", "cost", "refusals"]),
    "recap_feedback": (RECAP_TEST, ["feedback_gains", "filter_tradeoff", "hint_audit"]),
    "trace_validation": (SMOKE, ["index_builds", "validation", "validation_queries", "negative_control"]),
    "trace_stages": (SMOKE, ["stage_metrics", "stage_propensity"]),
    # no pretrained model: the tiny one stands in as the model under test
    "trace_capability_propensity": (SMOKE + ["models=[tiny-neox]"],
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
    if experiment.startswith("recap_"):  # both tiny targets ran, the aligned one on its member and held-out licences
        import pandas as pd

        books = pd.read_csv(run / "tables" / "book_scores.csv")
        assert set(books.target) == {"tiny-neox-kjv", "tiny-neox-kjv-aligned"}
        lic = books[(books.target == "tiny-neox-kjv-aligned") & (books.category == "copyrighted")]
        assert set(lic.split) == {"member", "nonmember"}
        # a book the target never saw gains nothing beyond its floor: RECAP (after feedback) stays at or below the
        # echo of the metadata + feedback hints on every non-member book (more would be the hints' contamination)
        held = books[books.split == "nonmember"].pivot_table(index=["target", "book"], columns="method",
                                                             values="rouge_l")
        assert len(held) >= 2 and (held["recap"] <= held["echo_fb"]).all(), held[["dsp_jb", "recap", "echo_fb"]]

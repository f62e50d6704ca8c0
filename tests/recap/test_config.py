"""The RECAP settings: one YAML (conf/method/recap.yaml) typed as RecapConfig; experiments select it and keep
only their own keys; the full profile overrides sizes once for both experiments; bad values fail in one line."""

from pathlib import Path

import pytest

from memlab.config import compose, to_plain
from memlab.errors import ConfigError
from memlab.methods.recap.config import RecapConfig
from memlab.methods.recap.prompts import Prompts
from memlab.methods.recap.study import FeedbackParams, Table3Params
from memlab.schema import method_config, validate_tree

PROMPTS = ["system", "prefix_probe", "prefix_probe_plain", "extraction", "jailbreak_narrative_tool",
           "past_tense_rewrite", "past_tense_rule", "verifier", "feedback", "feedback_retry", "reattempt",
           "reattempt_plain", "plain_suffix", "summary", "contamination_judge", "extraction_plain",
           "verifier_prompt_response"]
ROOT = Path(__file__).resolve().parents[2]


def test_experiments_compose_to_the_method_group():
    for name, params in (("recap_table3", Table3Params), ("recap_feedback", FeedbackParams)):
        cfg = compose(name)
        assert cfg.experiment_name == name and cfg.notebook == f"{name}.ipynb"
        built = validate_tree(to_plain(cfg))
        m, p = built["method"], built["params"]
        assert isinstance(m, RecapConfig) and isinstance(p, params)
        assert m.recap.stop_score == 0.95 and m.recap.min_gain == 0.02 and m.agents.ngram_guard == 6
        assert "copyrighted" in m.recap.redact_categories
        # the authors' definitions are the defaults (issue 12)
        assert m.agents.refusal_judge == "alone" and m.agents.refusal_keywords == "leading_first_person"
        assert m.recap.blocked_score == "zero" and m.recap.skip_double_blocked and m.recap.refinement == "multi_turn"
        assert m.summary.temperature == 1.0 and all(t.budget_factor >= 2 for t in m.targets.values())
        assert list(m.targets) == ["SmolLM2-135M-Instruct", "Gemma-3-270M", "tiny-neox-kjv", "tiny-neox-kjv-aligned"]
        assert [t.prompt_style for t in m.targets.values()] == ["chat", "plain", "plain", "plain"]
        assert Path(m.prompts_dir) == ROOT / "prompts" / "recap"
        assert m == method_config("recap")  # the experiments change nothing of the method
    assert compose("recap_feedback").params.contamination_overlap == 0.3


def test_full_profile_overrides_both_experiments_once():
    for name in ("recap_table3", "recap_feedback"):
        m = validate_tree(to_plain(compose(name, ["profile=full"])))["method"]
        assert m.recap.max_rounds == 5 and m.max_events_per_book is None and m.summary.target_words == 380
        assert m.targets["SmolLM2-135M-Instruct"].max_new_tokens == 1536
        assert m.targets["SmolLM2-135M-Instruct"].budget_factor == 2.0      # untouched: 2 × gold tokens
        assert m.targets["SmolLM2-135M-Instruct"].price_in == 0.27        # untouched keys keep the method's value
        tiny = m.targets["tiny-neox-kjv"]
        assert tiny.membership.books == 6 and tiny.membership.events_per_book is None
        assert m.memscore.parrot.max_epochs == 300 and m.memscore.parrot.stride == 32
    assert not (ROOT / "conf" / "scale" / "recap_table3_full.yaml").exists()


def test_no_defaults_in_code_and_one_line_errors():
    with pytest.raises(ConfigError, match=r"^config key method.recap.max_rounds: missing"):
        method_config("recap", ["~method.recap.max_rounds"])
    with pytest.raises(ConfigError, match=r"^config key method.targets.Gemma-3-270M.prompt_style='html': must be"):
        method_config("recap", ["method.targets.Gemma-3-270M.prompt_style=html"])
    with pytest.raises(ConfigError, match=r"^config key method.recap.stop_score=2.0: must be ≤ 1"):
        method_config("recap", ["method.recap.stop_score=2.0"])
    with pytest.raises(ConfigError, match=r"^config key method.passage_tolerance=9"):
        method_config("recap", ["method.passage_tolerance=9"])
    for bad in (["~method.memscore.parrot.lr"], ["~method.agents.verifier_max_echo"]):
        with pytest.raises(ConfigError) as err:
            method_config("recap", bad)
        assert "\n" not in str(err.value)


def test_recap_keys_live_in_one_yaml():
    """Every RECAP setting is written once: the experiment files hold none of the method's keys."""
    import yaml

    method_keys = set(yaml.safe_load((ROOT / "conf/method/recap.yaml").read_text())) - {"_schema_"}
    for name in ("recap_table3", "recap_feedback"):
        exp = yaml.safe_load((ROOT / "conf/experiment" / f"{name}.yaml").read_text())
        assert not method_keys & set(exp.get("params") or {}), name
        assert "method" not in exp


def test_prompt_files_fill():
    pr = Prompts(method_config("recap").prompts_dir)
    fields = dict(book_title="B", event_title="T", characters="A", characters_list='["A"]', summary_bullets="- x",
                  summary_list='["x"]', opening_line="Once.", n_words=10, feedback="f", request="r",
                  reference="ref", attempt="att", output="o", previous_prompt="p", target_words=50,
                  chapter_title="C", chapter_text="text", hints="h", prompt="p", response="r")
    for name in PROMPTS:
        assert pr.fill(name, **fields).strip()
    assert '{"answer": "Yes"}' in pr.fill("verifier", **fields)
    assert '{"answer": "Yes"}' in pr.fill("verifier_prompt_response", **fields)

"""The RECAP experiments compose from the real config; prompts exist; the full scale file overrides sizes."""

from pathlib import Path

from memlab.config import compose
from memlab.methods.recap.prompts import DEFAULT_DIR, Prompts

PROMPTS = ["system", "prefix_probe", "prefix_probe_plain", "extraction", "jailbreak_narrative_tool",
           "past_tense_rewrite", "past_tense_rule", "verifier", "feedback", "feedback_retry", "reattempt",
           "reattempt_plain", "plain_suffix", "summary", "contamination_judge"]


def test_experiments_compose():
    for name in ("recap_table3", "recap_feedback"):
        cfg = compose(name)
        assert cfg.experiment_name == name and cfg.notebook == f"{name}.ipynb"
        p = cfg.params
        assert p.recap.stop_score == 0.95 and p.recap.min_gain == 0.02 and p.agents.ngram_guard == 6
        assert "copyrighted" in p.recap.redact_categories
        assert [t.prompt_style for t in p.targets] == ["chat", "plain", "plain"]
        assert Path(p.prompts_dir) == DEFAULT_DIR
    full = compose("recap_table3", ["profile=full"])
    assert full.params.recap.max_rounds == 5


def test_prompt_files_fill():
    pr = Prompts()
    fields = dict(book_title="B", event_title="T", characters="A", characters_list='["A"]', summary_bullets="- x",
                  summary_list='["x"]', opening_line="Once.", n_words=10, feedback="f", request="r",
                  reference="ref", attempt="att", output="o", previous_prompt="p", target_words=50,
                  chapter_title="C", chapter_text="text", hints="h")
    for name in PROMPTS:
        assert pr.fill(name, **fields).strip()
    assert '{"answer": "Yes"}' in pr.fill("verifier", **fields)

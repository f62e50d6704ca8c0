"""Tasks: the 80/20 word split, prompts from files, performance = 1 − NCD or ROUGE-L."""

import pytest

from memlab.errors import ConfigError, MemlabError
from memlab.metrics.ncd import completion_score
from memlab.metrics.rouge import rouge_l
from memlab.methods.pearl.tasks import build_request, load_prompt, performance, split_completion

import dataclasses

from memlab.schema import method_config

PEARL = method_config("pearl")  # conf/method/pearl.yaml: the single source of every default


def pert(**changes):
    return dataclasses.replace(PEARL.perturbation, **changes)


def task(**changes):
    return dataclasses.replace(PEARL.task, **changes)




def test_split_keeps_characters_and_ratio():
    text = "def f(x):\n    y = x + 1\n    return y * 2  # done"
    x, y = split_completion(text, 0.8)
    words = text.split()
    assert x.split() == words[: int(0.8 * len(words))] and y.split() == words[int(0.8 * len(words)):]
    assert "\n    " in x and text.startswith(x)


@pytest.mark.parametrize("bad", ["", "   ", "word"])
def test_short_or_empty_text_is_one_line(bad):
    with pytest.raises(MemlabError) as e:
        split_completion(bad, 0.8)
    assert "\n" not in str(e.value)
    with pytest.raises(MemlabError, match="needs ≥ 10 words"):
        split_completion("a b c d e f g h i", 0.1)


def test_prompts_and_requests(repo_root):
    t = task(name="code_completion", style="chat", prompts_dir=str(repo_root / "prompts" / "pearl"))
    tpl = load_prompt(t)
    r = build_request(tpl, t, "def f(): return {1: 2}", n=3, temperature=0.7, top_p=1.0, seed=5)
    assert r.messages[0].role == "user" and "{1: 2}" in r.messages[0].content and r.n == 3 and r.seed == 5
    raw = task(prompts_dir=str(repo_root / "prompts" / "pearl"))
    assert build_request(load_prompt(raw), raw, "abc", n=1, temperature=0, top_p=1, seed=0).prompt == "abc"
    with pytest.raises(ConfigError):
        task(name="translation")


def test_performance_definitions():
    ref = "and the LORD said unto Moses"
    t = task()
    out = " and the LORD said unto Moses, Go in unto Pharaoh"
    assert performance(t, out, ref) == pytest.approx(completion_score("and the LORD said unto Moses,", ref))
    t2 = task(truncate_to_reference=False)
    assert performance(t2, out, ref) == pytest.approx(completion_score(out.strip(), ref))
    s = task(name="text_summarization")
    assert performance(s, "a short summary here", "a summary") == pytest.approx(
        rouge_l("a summary", "a short summary here").f1)

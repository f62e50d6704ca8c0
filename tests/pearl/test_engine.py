"""PEARL end to end on the micro model (exact membership known): batched, seeded, one-line bad input."""

import numpy as np
import pytest

from memlab.backends.factory import build_backend
from memlab.errors import MemlabError
from memlab.schema import method_config
from memlab.errors import ConfigError
from memlab.methods.pearl.engine import input_similarity, results_frame, run_pearl

OVERRIDES = ["method.task.max_input_words=40", "method.task.max_new_tokens=12", "method.samples=3",
             "method.temperature=0.7", "method.verbatim_words=8"]


@pytest.fixture(scope="module")
def backend(micro_family):
    return build_backend({**micro_family.model_cfg, "batch_size": 64}, None)


@pytest.fixture(scope="module")
def cfg(repo_root):
    return method_config("pearl", OVERRIDES)


@pytest.fixture(scope="module")
def results(backend, micro_family, cfg):
    return run_pearl(backend, micro_family.members + micro_family.nonmembers, cfg)


def test_shapes_and_definitions(results, cfg):
    assert len(results) == 8
    for r in results:
        assert r.levels == [0, 1, 2, 3, 4, 5] and len(r.perf) == 6
        assert all(len(s) == 3 for s in r.perf_samples)
        assert np.allclose(r.perf, [np.mean(s) for s in r.perf_samples])
        assert r.sensitivity_signed == pytest.approx(max(a - b for a, b in zip(r.perf, r.perf[1:])))
        assert r.sensitivity_absolute == pytest.approx(max(abs(a - b) for a, b in zip(r.perf, r.perf[1:])))
        assert r.sensitivity == r.sensitivity_absolute  # conf/method/pearl.yaml: the papers' reported definition
        assert r.memorized == (r.sensitivity > cfg.alpha)
    df = results_frame(results)
    assert {"sensitivity", "gfd", "perf_k0", "perf_k5"} <= set(df.columns)


def test_members_are_recalled_better_than_nonmembers(results):
    """A trained-to-recall model completes its training text better (X_0) than held-out text."""
    mem = [r for r in results if r.split == "member"]
    non = [r for r in results if r.split == "nonmember"]
    assert np.mean([r.perf[0] for r in mem]) > np.mean([r.perf[0] for r in non]) + 0.1
    assert np.mean([r.verbatim for r in mem]) > np.mean([r.verbatim for r in non])


def test_deterministic_and_batch_independent(backend, micro_family, cfg, results):
    again = run_pearl(backend, micro_family.members[:2], cfg)
    for a, b in zip(again, results[:2]):
        assert a.perf == pytest.approx(b.perf, abs=1e-9) and a.sensitivity == pytest.approx(b.sensitivity)


def test_summarization_reference_is_greedy_unperturbed_output(backend, micro_family, cfg):
    from memlab.methods.pearl.engine import prepare
    from memlab.methods.pearl.perturb import derive_seed
    from memlab.methods.pearl.tasks import build_request, load_prompt, performance

    s = cfg.replace(task={"name": "text_summarization"}, samples=2)
    docs = micro_family.members[:1]
    res = run_pearl(backend, docs, s, keep_outputs=True)[0]
    assert len(res.outputs) == 6 and len(res.outputs[0]) == 2
    # the greedy (T = 0) output of the unperturbed input, asked for on its own
    x = prepare(docs, s, None)[0].x
    greedy = backend.generate([build_request(load_prompt(s.task), s.task, x, n=1, temperature=0.0, top_p=s.top_p,
                                             seed=derive_seed(s.seed, "sample", docs[0].id))])[0].text
    assert res.perf_samples == [[performance(s.task, o, greedy) for o in level] for level in res.outputs]
    # and not the document itself (what a completion-style reference would be)
    assert res.perf_samples != [[performance(s.task, o, docs[0].text) for o in level] for level in res.outputs]


def test_input_similarity_decreases_with_level(micro_family, cfg):
    rows = input_similarity(micro_family.members, cfg)
    by_level = {}
    for r in rows:
        by_level.setdefault(r["level"], []).append(r["rouge_l_f1"])
    means = [np.mean(by_level[k]) for k in sorted(by_level)]
    assert means[0] == 1.0 and all(a >= b for a, b in zip(means, means[1:])) and means[-1] < 1.0


def test_bad_input_one_line(backend, micro_family, cfg):
    with pytest.raises(ConfigError, match=r"^config key method.samples=0: must be ≥ 1$"):
        method_config("pearl", ["method.samples=0"])
    with pytest.raises(ConfigError, match="config key method.task.split=1.5: must be < 1"):
        method_config("pearl", ["method.task.split=1.5"])
    with pytest.raises(MemlabError):
        run_pearl(backend, [], cfg)
    short = micro_family.members[0].__class__(id="short", text="word", source="test", licence="none")
    with pytest.raises(MemlabError) as e:
        run_pearl(backend, [short], cfg)
    assert "\n" not in str(e.value)


def test_the_wild_loop_tells_each_sources_documents_as_it_finishes_them(backend, micro_family, cfg):
    """``source_frames`` (pearl_wild's loop, the audit's PEARL part) calls ``scored(n)`` after each (task, source)
    with its n documents: the audit's overall line counts PEARL's units as they are done, not only when the part
    ends (a GGUF audit's PEARL part showed units 0/294 and no ETA for five minutes)."""
    from memlab.methods.pearl.study import source_frames

    told = []
    sources = {"members": micro_family.members[:3], "others": micro_family.nonmembers[:2]}
    frames = source_frames(cfg, ["completion"], sources, {"members": "text", "others": "text"}, backend, "raw",
                           "micro", told.append)
    assert told == [3, 2] and [len(f) for f in frames] == told

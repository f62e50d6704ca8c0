"""The experiment building blocks end to end on the micro model (tiny settings), and the configs."""

from __future__ import annotations

import dataclasses

import pytest

from memlab.methods.trace.generation import propensity_rows, run_propme, span_length_frame, summary_rows
from memlab.methods.trace.index.cache import cached_index
from memlab.methods.trace.stages import mixture_weights, stage_specs
from memlab.methods.trace.validation import validate
from memlab.schema import method_config


# a stage recipe writes every training setting (memlab.models.tiny.TrainSpec has no defaults)
TRAIN = dict(vocab_size=300, epochs=1, seq_len=32, batch_size=4, lr=3e-3, min_lr_ratio=0.1, warmup_steps=10,
             weight_decay=0.0, seed=0, threads=1)


@pytest.fixture(scope="module")
def micro_setup(micro_family, tmp_path_factory):
    from transformers import AutoTokenizer

    from memlab.backends.factory import build_backend

    tok = AutoTokenizer.from_pretrained(str(micro_family.final_dir))
    index = cached_index(micro_family.members, tok, tmp_path_factory.mktemp("ix"), backend="suffix_array", label="micro")
    return build_backend(micro_family.model_cfg, None), method_config("trace").tracer(index, tok)


def test_validation_is_perfect_on_the_training_set(micro_setup):
    _, tracer = micro_setup
    rows, summary = validate(tracer, n_docs=4, partial_tokens=64, seed=0)
    assert len(rows) == 16
    for s in summary:
        assert s["retrieval_rate"] == s["exact_match_rate"] == s["pass_rate"] == 1.0, s


def test_propme_cell_on_micro_model(micro_setup, micro_family, repo_root):
    backend, tracer = micro_setup
    traces, sets = run_propme(backend, tracer, repo_root / "prompts" / "trace" / "kjv.txt", micro_family.members,
                              n_prompts=3, max_new_tokens=12, prefix_tokens=24, prefix_position="random",
                              seed=0, extra={"model": "micro"})
    assert len(traces) == 9 and {t.meta["setting"] for t in traces} == {"generic", "specific", "prefix"}
    assert all("token_accuracy" in t.meta for t in traces if t.meta["setting"] == "prefix")
    keys = ["model", "setting"]
    summary = summary_rows(traces, keys, n_tokens=8, nv_recall_threshold=0.5)
    assert {r["setting"] for r in summary} == {"generic", "specific", "prefix"}
    for r in summary:
        assert r["ALS"] == r["average_longest_span_length"] and 0 <= r["NVR"] <= 1 and 0 <= r["FMR"] <= 1
    prop = propensity_rows(summary, keys, eps=0.01)
    assert {r["setting"] for r in prop} == {"generic", "specific"}
    assert all(0 < r["NVR_propensity"] < 1 for r in prop)
    assert len(span_length_frame(traces, keys)) == sum(len(t.spans) for t in traces)
    # same config + seed => identical results (greedy decoding, deterministic tracing)
    again, _ = run_propme(backend, tracer, repo_root / "prompts" / "trace" / "kjv.txt", micro_family.members,
                          n_prompts=3, max_new_tokens=12, prefix_tokens=24, prefix_position="random", seed=0,
                          extra={"model": "micro"})
    assert summary_rows(again, keys, n_tokens=8, nv_recall_threshold=0.5) == summary


def test_stage_specs_mixture(micro_family, tmp_path):
    a, b = micro_family.members, micro_family.nonmembers
    wb, wa = mixture_weights(a, b, b_share=2 / 3)
    size = lambda ds: sum(len(d.text) for d in ds)  # noqa: E731
    assert wb * size(b) / (wb * size(b) + wa * size(a)) == pytest.approx(2 / 3)
    specs = stage_specs(a, b, [], arch=dict(hidden=32, layers=1, heads=2, ffn=64),
                        train=TRAIN, stage_epochs=[1, 1, 1],
                        out_root=tmp_path, b_share=2 / 3)
    assert [n for n, _, _ in specs] == ["stage0", "stage1", "stage2", "stage3"]
    assert specs[0][1].tokenizer_on == "all" and {d.id for d in specs[0][1].nonmembers} == {d.id for d in b}
    for (_, prev, pdir), (_, spec, _) in zip(specs, specs[1:]):
        assert spec.init_from == str(pdir / "final")
        assert [len(g) for g, _ in spec.member_groups] == [len(b), len(a)]


def test_stage_training_runs(micro_family, tmp_path):
    """Two one-epoch stages of a minute model: the continual stage starts from stage 0's weights."""
    from memlab.methods.trace.stages import train_stages

    a = micro_family.members[:1]
    b = [dataclasses.replace(d, id=d.id + "/b") for d in micro_family.nonmembers[:1]]
    specs = stage_specs(a, b, [], arch=dict(hidden=32, layers=1, heads=2, ffn=64),
                        train=TRAIN, stage_epochs=[1],
                        out_root=tmp_path, b_share=2 / 3)
    dirs = train_stages(specs)
    assert (dirs["stage1"] / "config.json").exists()
    import json

    rec = json.loads((tmp_path / "stage1" / "membership.json").read_text())
    assert set(rec["members"]) == {d.id for d in a + b}


@pytest.mark.parametrize("name", ["trace_validation", "trace_capability_propensity", "trace_stages"])
def test_experiment_configs_compose(name, repo_root):
    from memlab.config import compose

    cfg = compose(name)
    assert cfg.params and (repo_root / "notebooks" / f"{name}.ipynb").exists()
    full = compose(name, ["profile=full"])
    assert full.params != cfg.params

"""Tiny GPT-NeoX training: determinism, resume after a kill, exact membership record, micro fixture."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import load_file

from memlab.data.corpora import load_corpus
from memlab.models.tiny import EOS, Arch, TrainRecipe, TrainSpec, _epoch_stream, finished_epochs, is_done, train, train_tokenizer


@pytest.fixture(scope="module")
def chapters():
    return {d.id: d for d in load_corpus("kjv", unit="chapter")}


SMALL_RECIPE = dict(seq_len=32, batch_size=4, lr=5e-3, min_lr_ratio=0.1, warmup_steps=2, weight_decay=0.0, seed=0,
                    threads=1)


def small_spec(chapters, epochs=3, seed=0, **kw) -> TrainSpec:
    members = [chapters["kjv/chapter/Ruth/1"], chapters["kjv/chapter/Ruth/2"]]
    nonmembers = [chapters["kjv/chapter/Ruth/3"]]
    args = dict(member_groups=[(members, 1.0)], nonmembers=nonmembers, arch=Arch(32, 1, 2, 64), vocab_size=300,
                tokenizer_on="members", recipe=TrainRecipe(**{**SMALL_RECIPE, "epochs": epochs, "seed": seed}),
                init_from=None, meta={}, record={})
    args.update(kw)
    return TrainSpec(**args)


def weights(path):
    return load_file(str(path / "model.safetensors"))


def same_weights(a, b) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_tokenizer_training_is_deterministic(tmp_path, chapters):
    texts = [chapters[f"kjv/chapter/Ruth/{i}"].text for i in (1, 2)]
    train_tokenizer(texts, 300, tmp_path / "a")
    train_tokenizer(texts, 300, tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert len(tok) == 300 and tok.eos_token == EOS and tok.pad_token_id != tok.eos_token_id
    text = "And Ruth said, Intreat me not to leave thee"
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level: lossless round trip


def test_same_seed_same_weights_other_seed_differs(tmp_path, chapters):
    a = train(small_spec(chapters), tmp_path / "a", progress=False)
    b = train(small_spec(chapters), tmp_path / "b", progress=False)
    c = train(small_spec(chapters, seed=1, epochs=1), tmp_path / "c", progress=False)
    for e in (1, 3):
        assert same_weights(a / f"epoch-00{e}", b / f"epoch-00{e}")
    assert same_weights(a / "final", a / "epoch-003")
    assert not same_weights(a / "epoch-001", c / "final")
    assert finished_epochs(a) == [1, 2, 3] and is_done(a) and not (a / "state.pt").exists()
    log = [json.loads(x) for x in (a / "train_log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2, 3] and log[-1]["loss"] < log[0]["loss"]
    # a finished model is not retrained; a different spec in the same folder is rebuilt from scratch
    mtime = (a / "final" / "model.safetensors").stat().st_mtime_ns
    train(small_spec(chapters), a, progress=False)
    assert (a / "final" / "model.safetensors").stat().st_mtime_ns == mtime
    train(small_spec(chapters, seed=1, epochs=1), a, progress=False)
    assert finished_epochs(a) == [1] and same_weights(a / "final", c / "final")


def test_resume_after_stop_equals_uninterrupted(tmp_path, chapters):
    full = train(small_spec(chapters), tmp_path / "full", progress=False)
    part = tmp_path / "part"
    train(small_spec(chapters), part, progress=False, stop_after_epoch=1)
    assert finished_epochs(part) == [1] and not is_done(part)
    # debris of a kill during the epoch-2 save: a half-written tmp checkpoint
    (part / "epoch-002.tmp").mkdir()
    (part / "epoch-002.tmp" / "model.safetensors").write_bytes(b"partial")
    train(small_spec(chapters), part, progress=False)
    assert is_done(part) and finished_epochs(part) == [1, 2, 3]
    assert same_weights(full / "final", part / "final")


def test_resume_after_sigkill(tmp_path, chapters, repo_root):
    """A real SIGKILL mid-training: the rerun resumes from the last finished epoch, same final weights."""
    out = tmp_path / "killed"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(repo_root / 'lib')!r}); sys.path.insert(0, {str(repo_root / 'tests' / 'models')!r})
        import memlab  # before torch: it pins MKL's code path, as every memlab process does (docs/numerics.md)
        import torch; torch.set_num_threads(1)
        from memlab.data.corpora import load_corpus
        from memlab.models import tiny
        from test_tiny import small_spec
        chapters = {{d.id: d for d in load_corpus("kjv", unit="chapter")}}
        import os, types
        def slow_replace(src, dst):  # stall once an epoch's optimizer state is committed: the parent kills us
            os.replace(src, dst); print("saved", flush=True); time.sleep(30)
        tiny.os = types.SimpleNamespace(replace=slow_replace, environ=os.environ)
        tiny.train(small_spec(chapters, epochs=4), {str(out)!r}, progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "saved"  # epoch 1 complete (weights + optimizer state)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert finished_epochs(out) == [1] and not is_done(out)
    train(small_spec(chapters, epochs=4), out, progress=False)
    ref = train(small_spec(chapters, epochs=4), tmp_path / "ref", progress=False)
    assert same_weights(ref / "final", out / "final")
    assert [json.loads(x)["epoch"] for x in (out / "train_log.jsonl").read_text().splitlines()] == [1, 2, 3, 4]


def test_membership_record_is_exact(tmp_path, chapters):
    spec = small_spec(chapters, epochs=1)
    out = train(spec, tmp_path / "m", progress=False)
    rec = json.loads((out / "membership.json").read_text())
    assert rec["members"] == ["kjv/chapter/Ruth/1", "kjv/chapter/Ruth/2"]
    assert rec["nonmembers"] == ["kjv/chapter/Ruth/3"]
    assert rec["sha256"]["kjv/chapter/Ruth/1"] == chapters["kjv/chapter/Ruth/1"].sha256
    # the training stream is exactly the members' tokens (each followed by EOS): no nonmember token sneaks in
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out / "tokenizer")
    ids = [tok(d.text, add_special_tokens=False)["input_ids"] for d in spec.members]
    eos = tok.convert_tokens_to_ids(EOS)
    stream, _ = _epoch_stream([(ids, 1.0)], spec.recipe.seed, 1, eos)
    expected = sorted(sum((x + [eos] for x in ids), []))
    assert sorted(stream) == expected


def test_mixture_weights_repeat_groups(chapters):
    a, b = [[1, 2, 3]], [[7, 8], [9], [10], [11]]
    stream, _ = _epoch_stream([(a, 2.0), (b, 0.5)], seed=0, epoch=1, eos=0)
    assert stream.count(1) == 2  # weight 2: two passes
    assert sum(stream.count(t) for t in (7, 9, 10, 11)) == 2  # weight 0.5: half of the 4 documents


def test_init_from_continues_with_source_tokenizer(tmp_path, chapters):
    base = train(small_spec(chapters, epochs=1), tmp_path / "base", progress=False)
    child_spec = small_spec(chapters, epochs=1, arch=None, init_from=str(base / "final"),
                            member_groups=[([chapters["kjv/chapter/Ruth/3"]], 1.0)], nonmembers=[])
    child = train(child_spec, tmp_path / "child", progress=False)
    assert (child / "tokenizer" / "tokenizer.json").read_bytes() == (base / "tokenizer" / "tokenizer.json").read_bytes()
    assert json.loads((child / "final" / "config.json").read_text())["hidden_size"] == 32
    assert not same_weights(base / "final", child / "final")


def test_micro_family_fixture(micro_family, repo_root):
    import yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    f = micro_family
    keys = set(yaml.safe_load((repo_root / "conf" / "model" / "tiny-neox.yaml").read_text()))
    assert set(f.model_cfg) == keys and f.model_cfg["path"] == str(f.final_dir)
    assert sorted(f.checkpoints) == list(range(1, len(f.checkpoints) + 1)) and len(f.checkpoints) >= 5
    assert all(d.split == "member" for d in f.members) and all(d.split == "nonmember" for d in f.nonmembers)
    assert not {d.id for d in f.members} & {d.id for d in f.nonmembers}
    rec = json.loads((f.root / "membership.json").read_text())
    assert rec["members"] == [d.id for d in f.members] and rec["nonmembers"] == [d.id for d in f.nonmembers]
    tok = AutoTokenizer.from_pretrained(f.tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(f.final_dir).eval()

    def loss(docs):
        with torch.no_grad():
            return sum(model(input_ids=(x := tok(d.text, return_tensors="pt")["input_ids"][:, :256]),
                             labels=x).loss.item() for d in docs) / len(docs)

    assert loss(f.members) < loss(f.nonmembers) - 1.0  # trained on members, never saw nonmembers


def test_a_train_spec_holds_one_recipe_and_repeats_none_of_its_fields():
    """Issue 48: the training settings are written once (TrainRecipe, a zoo family's ``train:``); a spec holds one."""
    import dataclasses

    spec_fields = {f.name: f for f in dataclasses.fields(TrainSpec)}
    assert not {f.name for f in dataclasses.fields(TrainRecipe)} & set(spec_fields)
    assert spec_fields["recipe"].type in (TrainRecipe, "TrainRecipe")

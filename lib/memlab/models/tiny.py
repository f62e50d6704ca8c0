"""Our own training loop for tiny GPT-NeoX (Pythia architecture) models with exactly known training data.

One model = one folder::

    <out>/tokenizer/            byte-level BPE trained here (or copied from ``init_from``)
    <out>/epoch-001/ ...        one HF folder per finished epoch (AutoModelForCausalLM + AutoTokenizer)
    <out>/final/                a copy of the last epoch (what conf/model/tiny-neox.yaml points at)
    <out>/membership.json       exactly which document ids were trained on (members) / held out (nonmembers)
    <out>/train_log.jsonl       one line per epoch: mean training loss, steps, tokens (times: on the console)
    <out>/state.pt              optimizer state after the last finished epoch (for resume)
    <out>/done.json             written last; its presence means the model is complete (+ final_loss)

Determinism: the tokenizer, the initial weights (``torch.manual_seed(seed)``) and every epoch's data order
(a generator seeded with ``(seed, epoch)``) depend only on the spec, there is no dropout, and we train with
a fixed number of torch threads, so the same spec gives bit-identical weights. Because the data order of
epoch ``e`` does not depend on earlier epochs, a killed run resumes from the last finished epoch (weights +
optimizer state) and ends with the same weights as an uninterrupted run.

Packing: member documents are tokenized, each followed by EOS, and concatenated into one stream. Each epoch
rolls the stream by a seeded random offset (so block boundaries move between epochs), cuts it cyclically
into ``ceil(n / seq_len)`` blocks of ``seq_len`` tokens (every token is seen at least once per epoch) and
shuffles the blocks. Mixture weights (continual pre-training) repeat a group's documents ``floor(w)`` times
per epoch plus a seeded ``frac(w)`` share of them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from memlab.data.records import Document
from memlab.errors import ConfigError

# Bump when a change to this file changes the weights a spec produces: cached models (tests, zoo) rebuild.
TRAINER_VERSION = 1
EOS = "<|endoftext|>"
PAD = "<|padding|>"


@dataclass(frozen=True)
class Arch:
    """GPT-NeoX shape. ``ffn`` = intermediate size; rotary on 25 % of head dims (Pythia)."""

    hidden: int
    layers: int
    heads: int
    ffn: int

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ConfigError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")

    @property
    def non_embedding_params(self) -> int:
        """Weights outside the embeddings (attention 4·h², MLP 2·h·ffn per layer; biases and norms left out): the
        size a scaling comparison orders models by."""
        return self.layers * (4 * self.hidden ** 2 + 2 * self.hidden * self.ffn)


# A model continued from another (``init_from``) inherits its parent's tokenizer and trains none; its spec records
# (and hashes) these values for the tokenizer settings, as every such model built since the zoo began has.
INHERITED_TOKENIZER = {"vocab_size": 2048, "tokenizer_on": "members"}


@dataclass(frozen=True)
class TrainRecipe:
    """How a model trains (a zoo family's ``train:``, by size): every field but ``threads`` is in its fingerprint."""
    epochs: int
    seq_len: int
    batch_size: int
    lr: float
    min_lr_ratio: float
    warmup_steps: int
    weight_decay: float
    seed: int
    threads: int


@dataclass
class TrainSpec:
    """Everything that determines a trained model (hashing it names the model in caches).

    ``member_groups``: list of (documents, weight); ``weight`` = passes over that group per epoch.
    ``init_from``: an HF folder (another model's checkpoint) to continue training from, with its tokenizer;
    then ``arch``/``vocab_size`` are taken from that checkpoint.
    """

    member_groups: list[tuple[list[Document], float]]
    nonmembers: list[Document]
    arch: Arch | None
    vocab_size: int
    tokenizer_on: str              # "members" | "all" (members + nonmembers)
    recipe: TrainRecipe            # epochs, sequence length, batch, learning-rate schedule, seed, threads
    init_from: str | None          # None: trained from scratch
    meta: dict                     # what the model is (family, size ...): recorded, not hashed
    record: dict                   # extra membership.json keys (lineage, split hygiene); not hashed

    @property
    def members(self) -> list[Document]:
        seen: dict[str, Document] = {}
        for docs, _w in self.member_groups:
            for d in docs:
                seen.setdefault(d.id, d)
        return list(seen.values())

    def fingerprint(self) -> str:
        """sha256 over every field that changes the weights (document ids and text hashes included)."""
        d = {
            "trainer": TRAINER_VERSION,
            "groups": [[[x.id, x.sha256] for x in docs] + [w] for docs, w in self.member_groups],
            "nonmembers": [[x.id, x.sha256] for x in self.nonmembers],
            "arch": dataclasses.asdict(self.arch) if self.arch else None,
            "vocab_size": self.vocab_size, "tokenizer_on": self.tokenizer_on,
            **{k: v for k, v in dataclasses.asdict(self.recipe).items() if k != "threads"},
        }
        if self.init_from:  # the starting weights, not where they live: a moved models/ folder stays valid
            d["init_weights"] = _dir_hash(Path(self.init_from))
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def _dir_hash(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.glob("*.safetensors")):
        h.update(p.name.encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def train_spec_tokenizer(spec, out_dir: str | Path):
    """The tokenizer a spec's training run trains (its members, plus its non-members when ``tokenizer_on`` is
    "all"), saved under ``out_dir``."""
    texts = [d.text for d in spec.members] + ([d.text for d in spec.nonmembers] if spec.tokenizer_on == "all" else [])
    return train_tokenizer(texts, spec.vocab_size, out_dir)


def train_tokenizer(texts: Sequence[str], vocab_size: int, out_dir: str | Path):
    """Train a byte-level BPE tokenizer (deterministic for the same texts) and save it as an HF folder."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one thread: the merge order cannot depend on scheduling
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=PAD,
                                   unk_token=None, model_max_length=1_000_000)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def _epoch_dir(out: Path, epoch: int) -> Path:
    return out / f"epoch-{epoch:03d}"


def finished_epochs(out: str | Path) -> list[int]:
    """Epochs whose checkpoint folder is complete (written via tmp folder + rename)."""
    out = Path(out)
    return sorted(int(p.name.split("-")[1]) for p in out.glob("epoch-[0-9][0-9][0-9]") if p.is_dir())


def is_done(out: str | Path) -> bool:
    return (Path(out) / "done.json").exists()


def _epoch_stream(groups_ids: list[tuple[list[list[int]], float]], seed: int, epoch: int, eos: int):
    """Token stream for one epoch: mixture-weighted documents in a seeded order, each followed by EOS."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    docs: list[list[int]] = []
    for ids, w in groups_ids:
        reps = int(math.floor(w))
        docs.extend(ids * reps)
        frac = w - reps
        if frac > 0:
            k = int(round(frac * len(ids)))
            pick = torch.randperm(len(ids), generator=g)[:k].tolist()
            docs.extend(ids[i] for i in sorted(pick))
    order = torch.randperm(len(docs), generator=g).tolist()
    stream: list[int] = []
    for i in order:
        stream.extend(docs[i])
        stream.append(eos)
    return stream, g


def _blocks(stream: list[int], seq_len: int, g):
    import torch

    t = torch.tensor(stream, dtype=torch.long)
    n = len(stream)
    t = torch.roll(t, -int(torch.randint(n, (1,), generator=g)))
    n_blocks = math.ceil(n / seq_len)
    need = n_blocks * seq_len
    if need > n:  # cyclic: wrap around so every token is seen at least once
        t = torch.cat([t] * math.ceil(need / n))[:need]
    blocks = t[:need].view(n_blocks, seq_len)
    return blocks[torch.randperm(n_blocks, generator=g)]


def _lr_at(step: int, total: int, spec: TrainSpec) -> float:
    """Linear warmup, then cosine decay from lr to lr*min_lr_ratio."""
    if step < spec.recipe.warmup_steps:
        return spec.recipe.lr * (step + 1) / spec.recipe.warmup_steps
    p = (step - spec.recipe.warmup_steps) / max(1, total - spec.recipe.warmup_steps)
    return spec.recipe.lr * (spec.recipe.min_lr_ratio + (1 - spec.recipe.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))


def _atomic_copytree(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)


def membership_record(spec: TrainSpec) -> dict:
    """membership.json: this model's own members (ids, text hashes, mixture) and nonmembers, plus
    ``spec.record`` (for zoo families: ``lineage`` = the members of every family it continues from,
    ``training_ids`` = all of them, ``split`` + ``nonmember_overlap`` = split hygiene; memlab.models.zoo)."""
    return {
        "members": [d.id for d in spec.members],
        "nonmembers": [d.id for d in spec.nonmembers],
        "sha256": {d.id: d.sha256 for d in spec.members + spec.nonmembers},
        "mixture": [{"ids": [d.id for d in docs], "weight": w} for docs, w in spec.member_groups],
        **spec.record,
    }


def train(spec: TrainSpec, out: str | Path, progress: bool = True, stop_after_epoch: int | None = None) -> Path:
    """Train (or resume) the model described by ``spec`` into ``out``; returns ``out``. Idempotent: a model
    already built from this spec is kept; a folder built from another spec (edited config) is rebuilt.

    ``stop_after_epoch`` ends the run early after that epoch (used by tests to simulate a killed run).
    """
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Writing model shards" bar per checkpoint; ours is enough
    out = Path(out)
    fp = spec.fingerprint()
    if is_done(out) and json.loads((out / "done.json").read_text()).get("fingerprint") == fp:
        _write_json(out / "membership.json", membership_record(spec))  # the record may have grown keys
        return out
    _start_model_folder(spec, out, fp)
    if not spec.members:
        raise ConfigError("a tiny model needs at least one member document")

    torch.set_num_threads(spec.recipe.threads)
    tok = _model_tokenizer(spec, out / "tokenizer")
    eos = tok.convert_tokens_to_ids(EOS) if EOS in tok.get_vocab() else tok.eos_token_id
    groups_ids = [([tok(d.text, add_special_tokens=False)["input_ids"] for d in docs], float(w))
                  for docs, w in spec.member_groups]
    model, opt, start, step = _resume_or_init_model(spec, out, tok, eos)
    blocks_per_epoch = math.ceil(len(_epoch_stream(groups_ids, spec.recipe.seed, 1, eos)[0]) / spec.recipe.seq_len)
    total = math.ceil(blocks_per_epoch / spec.recipe.batch_size) * spec.recipe.epochs

    for epoch in range(start + 1, spec.recipe.epochs + 1):
        t0, c0 = time.time(), time.process_time()
        stream, g = _epoch_stream(groups_ids, spec.recipe.seed, epoch, eos)
        blocks = _blocks(stream, spec.recipe.seq_len, g)
        desc = f"{out.name} epoch {epoch}/{spec.recipe.epochs}"
        losses, step = _train_epoch(model, opt, spec, blocks, step, total, desc, progress)
        # checkpoint: HF folder (+ tokenizer) via tmp + rename, log line, then optimizer state; a kill in
        # between leaves the previous epoch's state, so resume redoes this epoch (its log line then appears
        # twice; readers keep the last one per epoch).
        _save_checkpoint(model, tok, _epoch_dir(out, epoch))
        _log_epoch(out, epoch, spec.recipe.epochs, losses, int(blocks.numel()), t0, c0)
        torch.save({"epoch": epoch, "step": step, "optimizer": opt.state_dict()}, out / "state.pt.tmp")
        os.replace(out / "state.pt.tmp", out / "state.pt")
        if stop_after_epoch is not None and epoch >= stop_after_epoch and epoch < spec.recipe.epochs:
            return out

    _finish_model_folder(spec, out, fp, model, blocks_per_epoch)
    return out


def _start_model_folder(spec: TrainSpec, out: Path, fp: str) -> None:
    """Empty ``out`` if it holds (part of) a model of another spec, then write spec.json and membership.json."""
    spec_file = out / "spec.json"
    if spec_file.exists() and json.loads(spec_file.read_text()).get("fingerprint") != fp:
        # the folder holds (part of) a model trained from another spec: never mix epochs of two specs
        for p in list(out.iterdir()):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    _write_json(spec_file, {"fingerprint": fp, "init_from": spec.init_from, "meta": spec.meta,
                            "arch": dataclasses.asdict(spec.arch) if spec.arch else None,
                            "vocab_size": spec.vocab_size,
                            **{k: v for k, v in dataclasses.asdict(spec.recipe).items() if k != "threads"},
                            "tokenizer_on": spec.tokenizer_on})
    _write_json(out / "membership.json", membership_record(spec))


def _model_tokenizer(spec: TrainSpec, tok_dir: Path):
    """The model's tokenizer, loaded from ``tok_dir``; first trained there (or copied from ``init_from``)."""
    from transformers import AutoTokenizer

    if not (tok_dir / "tokenizer.json").exists():
        if spec.init_from:
            tok = AutoTokenizer.from_pretrained(spec.init_from)
            tok.save_pretrained(tok_dir)
        else:
            train_spec_tokenizer(spec, tok_dir)
    return AutoTokenizer.from_pretrained(tok_dir)


def _resume_or_init_model(spec: TrainSpec, out: Path, tok, eos: int):
    """(model, optimizer, last finished epoch, optimizer steps so far): resumed from the last finished epoch
    with its optimizer state, else fresh weights (``init_from``'s, or seeded ones) and a fresh optimizer."""
    import torch
    from transformers import AutoModelForCausalLM

    done_epochs = [e for e in finished_epochs(out) if e <= spec.recipe.epochs]
    start = done_epochs[-1] if done_epochs and (out / "state.pt").exists() else 0
    if start:
        state = torch.load(out / "state.pt", weights_only=False)
        if state["epoch"] != start:  # state written after the folder: the folder is the last full epoch
            start = state["epoch"]
        model = AutoModelForCausalLM.from_pretrained(_epoch_dir(out, start), dtype=torch.float32)
    else:
        model = _initial_model(spec, tok, eos)
        state = None
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=spec.recipe.lr, betas=(0.9, 0.95), weight_decay=spec.recipe.weight_decay,
                            eps=1e-8)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
    step = state["step"] if state else 0
    return model, opt, start, step


def _initial_model(spec: TrainSpec, tok, eos: int):
    """Epoch-0 weights: ``init_from``'s checkpoint, else a GPT-NeoX of ``spec.arch`` seeded with ``spec.recipe.seed``."""
    import torch
    from transformers import AutoModelForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM

    if spec.init_from:
        return AutoModelForCausalLM.from_pretrained(spec.init_from, dtype=torch.float32)
    assert spec.arch is not None
    cfg = GPTNeoXConfig(vocab_size=len(tok), hidden_size=spec.arch.hidden,
                        num_hidden_layers=spec.arch.layers, num_attention_heads=spec.arch.heads,
                        intermediate_size=spec.arch.ffn, max_position_embeddings=2048,
                        bos_token_id=eos, eos_token_id=eos, pad_token_id=tok.pad_token_id,
                        tie_word_embeddings=False, use_cache=True)
    torch.manual_seed(spec.recipe.seed)
    return GPTNeoXForCausalLM(cfg)


def _train_epoch(model, opt, spec: TrainSpec, blocks, step: int, total: int, desc: str,
                 progress: bool) -> tuple[list[float], int]:
    """One pass over ``blocks`` in batches of ``spec.recipe.batch_size``: (per-step losses, optimizer steps so far)."""
    import torch
    from tqdm.auto import tqdm

    losses = []
    bar = tqdm(range(0, len(blocks), spec.recipe.batch_size), desc=desc, disable=not progress, leave=False)
    for i in bar:
        batch = blocks[i:i + spec.recipe.batch_size]
        for pg in opt.param_groups:
            pg["lr"] = _lr_at(step, total, spec)
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses, step


def _save_checkpoint(model, tok, final: Path) -> None:
    """The model and its tokenizer as one HF folder ``final``, written via a tmp folder + rename."""
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def _log_epoch(out: Path, epoch: int, epochs: int, losses: list[float], tokens: int, t0: float, c0: float) -> None:
    """Append the epoch's line to train_log.jsonl and print its loss and times (wall ``t0``, CPU ``c0``)."""
    with (out / "train_log.jsonl").open("a") as f:
        f.write(json.dumps({"epoch": epoch, "loss": sum(losses) / len(losses), "steps": len(losses),
                            "tokens": tokens}) + "\n")
    # times go to the console, not into the model folder: a DVC output must hash the same on every rerun
    print(f"memlab: {out.name} epoch {epoch}/{epochs}: loss {sum(losses) / len(losses):.4f}, "
          f"{time.time() - t0:.1f} s ({time.process_time() - c0:.1f} CPU-s)", file=sys.stderr)


def _finish_model_folder(spec: TrainSpec, out: Path, fp: str, model, blocks_per_epoch: int) -> None:
    """Copy the last epoch to final/, write done.json (last) and drop the optimizer state."""
    _atomic_copytree(_epoch_dir(out, spec.recipe.epochs), out / "final")
    n_params = sum(p.numel() for p in model.parameters())
    last = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines() if x.strip()][-1]
    _write_json(out / "done.json", {"fingerprint": fp, "epochs": spec.recipe.epochs, "params": n_params,
                                    "tokens_per_epoch": blocks_per_epoch * spec.recipe.seq_len,
                                    "final_loss": last["loss"]})
    (out / "state.pt").unlink(missing_ok=True)  # optimizer state is only needed to resume

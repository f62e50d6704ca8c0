"""Adversarial Compression Ratio (ACR, Schwarzschild et al. 2024) on white-box models: the method seeds 001
(Annex 1) and 003 (Fig. 7) compare PEARL with.

ACR(x) = |x| / |p*| in tokens, p* the shortest prompt from which the model's greedy decoding reproduces x exactly
("MiniPrompt"); x counts as memorized ("compressible") when ACR > 1. MiniPrompt here tries the lengths of
``AcrParams.prompt_lengths`` in increasing order and, at each length, runs GCG (Zou et al. 2023): gradients of
the target loss w.r.t. the one-hot prompt, the ``top_k`` most promising tokens per position, ``batch_size``
single-token substitutions evaluated by their loss on x, the best kept; ``steps`` steps at most. The first
length at which a prompt reproduces x gives ACR = target_tokens / length. When none does, ACR is reported as
the bound target_tokens / (max length + 1) (``acr_is_bound``; the true ACR is at most that), not compressible.

Target x: the ``target_tokens`` tokens of a document starting at token ``target_offset`` (tokenized as the zoo
trains, without special tokens): a fixed window, because a search over whole ~400-token psalms is out of reach
on CPU. Prompts are free tokens (no BOS), special tokens excluded.

Exact match: greedy decoding from p reproduces x iff, teacher-forced on p + x, the argmax at every target
position is the target token (each greedy step sees the prefix the teacher-forced pass saw). The search tests
this on every candidate from the same forward pass as the loss; an accepted prompt is re-checked once with
``model.generate`` (greedy). Each length starts from the best prompt of the previous length with random tokens
prepended (the tokens next to x matter most).

``prefix_len`` (diagnostic, not ACR): the shortest listed length L whose L document tokens just before x
reproduce x — what the document's own context achieves, to read the search's strength against.

Deterministic: the search of (document, length) draws from a generator seeded with
``derive_seed(seed, "acr", doc id, length)`` (the same at every epoch), ``torch.manual_seed(seed)``, and runs on
``threads`` torch threads.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Sequence

import torch

from memlab.data.records import Document
from memlab.errors import ConfigError, MemlabError
from memlab.methods.pearl.acr_params import AcrParams
from memlab.methods.pearl.perturb import derive_seed


@dataclass
class Search:
    """MiniPrompt's outcome for one target."""

    found: bool
    prompt: list[int]          # the accepted prompt, else the best (lowest-loss) prompt at the longest length
    length: int | None         # accepted prompt length
    loss: float                # mean target NLL of ``prompt``
    steps: int                 # GCG steps run over all lengths


def _check(p: AcrParams) -> list[int]:
    lengths = sorted(set(p.prompt_lengths))
    if max(lengths) >= p.target_tokens:
        raise ConfigError(f"params.acr.prompt_lengths must stay below target_tokens ({p.target_tokens}): a prompt "
                          f"of {max(lengths)} tokens can't make ACR exceed 1")
    return lengths


@contextmanager
def _white_box(model, threads: int):
    """Frozen weights (only the prompt gets gradients) and a fixed thread count, restored afterwards."""
    flags = [q.requires_grad for q in model.parameters()]
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    for q in model.parameters():
        q.requires_grad_(False)
    try:
        yield
    finally:
        for q, f in zip(model.parameters(), flags):
            q.requires_grad_(f)
        torch.set_num_threads(old)


def _score(model, prompts: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean target NLL of every prompt row, and whether greedy decoding from it reproduces the target."""
    n, length = prompts.shape
    with torch.no_grad():
        x = torch.cat([prompts, target.expand(n, -1)], 1)
        hidden = model.base_model(input_ids=x).last_hidden_state[:, length - 1:length - 1 + target.numel()]
        logits = model.get_output_embeddings()(hidden).float()   # the LM head on the target positions only
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target.expand(n, -1), reduction="none")
    return loss.mean(1), (logits.argmax(-1) == target).all(1)


def _token_grads(model, prompt: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """d loss / d one-hot(prompt), shape (length, vocab)."""
    emb = model.get_input_embeddings().weight
    one_hot = torch.zeros(prompt.numel(), emb.shape[0], dtype=emb.dtype)
    one_hot[torch.arange(prompt.numel()), prompt] = 1.0
    one_hot.requires_grad_(True)
    with torch.enable_grad():
        embeds = torch.cat([one_hot @ emb, emb[target]], 0)[None]
        hidden = model.base_model(inputs_embeds=embeds).last_hidden_state[0, prompt.numel() - 1:-1]
        logits = model.get_output_embeddings()(hidden)
        torch.nn.functional.cross_entropy(logits.float(), target).backward()
    return one_hot.grad


def gcg(model, target: Sequence[int], length: int, p: AcrParams, allowed: torch.Tensor,
        gen: torch.Generator, warm_start: Sequence[int]) -> Search:
    """GCG at one prompt length: stops at the first prompt whose greedy decoding reproduces ``target``. The
    initial prompt is random tokens followed by ``warm_start`` (the best prompt of the previous, shorter length)."""
    tgt = torch.tensor(list(target), dtype=torch.long)
    tail = torch.tensor(list(warm_start)[-length:], dtype=torch.long)
    prompt = torch.cat([allowed[torch.randint(len(allowed), (length - len(tail),), generator=gen)], tail])
    loss, exact = _score(model, prompt[None], tgt)
    if exact[0]:
        return Search(True, prompt.tolist(), length, float(loss[0]), 0)
    blocked = torch.ones(model.get_input_embeddings().weight.shape[0], dtype=torch.bool)
    blocked[allowed] = False
    k = min(p.top_k, len(allowed))
    for step in range(1, p.steps + 1):
        grad = _token_grads(model, prompt, tgt)
        grad[:, blocked] = float("inf")
        top = (-grad).topk(k, dim=1).indices                                  # (length, k)
        pos = torch.randint(length, (p.batch_size,), generator=gen)
        pick = torch.randint(k, (p.batch_size,), generator=gen)
        cands = prompt.repeat(p.batch_size, 1)
        cands[torch.arange(p.batch_size), pos] = top[pos, pick]
        losses, exact = _score(model, cands, tgt)
        if exact.any():
            i = int(torch.where(exact, losses, torch.full_like(losses, float("inf"))).argmin())
            return Search(True, cands[i].tolist(), length, float(losses[i]), step)
        i = int(losses.argmin())
        prompt, loss = cands[i], losses[i:i + 1]
    return Search(False, prompt.tolist(), None, float(loss[0]), p.steps)


def greedy_reproduces(model, prompt: Sequence[int], target: Sequence[int]) -> bool:
    """``model.generate`` (greedy, no EOS stop) from ``prompt`` yields exactly ``target``."""
    from transformers import GenerationConfig

    x = torch.tensor([list(prompt)], dtype=torch.long)
    cfg = GenerationConfig(max_new_tokens=len(target), min_new_tokens=len(target), do_sample=False, num_beams=1,
                           eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=cfg)
    return out[0, x.shape[1]:].tolist() == list(target)


def mini_prompt(model, target: Sequence[int], p: AcrParams, allowed: torch.Tensor, key: str) -> Search:
    """The shortest listed prompt length at which GCG finds a prompt reproducing ``target`` (``key`` names the
    target in the seeds)."""
    total, last = 0, None
    for length in _check(p):
        gen = torch.Generator().manual_seed(derive_seed(p.seed, "acr", key, length))
        last = gcg(model, target, length, p, allowed, gen, last.prompt if last else ())
        total += last.steps
        if last.found:
            if not greedy_reproduces(model, last.prompt, target):
                raise MemlabError(f"ACR: teacher-forced argmax and greedy generation disagree for {key} "
                                  f"(prompt {last.prompt})")
            break
    last.steps = total
    return last


def prefix_len(model, ids: Sequence[int], p: AcrParams) -> int | None:
    """Shortest listed L whose L document tokens just before the target reproduce it (None: none does)."""
    tgt = torch.tensor(ids[p.target_offset:p.target_offset + p.target_tokens], dtype=torch.long)
    for length in _check(p):
        if length <= p.target_offset:
            ctx = torch.tensor(ids[p.target_offset - length:p.target_offset], dtype=torch.long)
            if bool(_score(model, ctx[None], tgt)[1][0]):
                return length
    return None


def _torch_model(backend):
    model, tok = getattr(backend, "model", None), getattr(backend, "tokenizer", None)
    if not isinstance(model, torch.nn.Module) or tok is None:
        raise ConfigError(f"ACR needs a white-box model (backend: hf); {getattr(backend, 'model_id', backend)!r} "
                          "exposes no torch model")
    return model, tok


def acr_rows(backend, docs: Sequence[Document], p: AcrParams, **labels) -> list[dict]:
    """ACR of every document's target window under one backend (one row per document, ``labels`` added)."""
    model, tok = _torch_model(backend)
    special = set(tok.all_special_ids)
    vocab = model.get_input_embeddings().weight.shape[0]
    allowed = torch.tensor([i for i in range(vocab) if i not in special and i < len(tok)], dtype=torch.long)
    rows = []
    with _white_box(model, p.threads):
        torch.manual_seed(p.seed)
        for d in docs:
            ids = tok(d.text, add_special_tokens=False)["input_ids"]
            if len(ids) < p.target_offset + p.target_tokens:
                raise ConfigError(f"ACR: {d.id} has {len(ids)} tokens < target_offset + target_tokens "
                                  f"({p.target_offset + p.target_tokens})")
            target = ids[p.target_offset:p.target_offset + p.target_tokens]
            s = mini_prompt(model, target, p, allowed, d.id)
            bound = p.target_tokens / (max(p.prompt_lengths) + 1)
            rows.append({"doc_id": d.id, "split": d.split, **labels, "target_offset": p.target_offset,
                         "target_tokens": p.target_tokens, "prompt_len": s.length,
                         "acr": p.target_tokens / s.length if s.found else bound, "acr_is_bound": not s.found,
                         "compressible": s.found, "prefix_len": prefix_len(model, ids, p), "gcg_steps": s.steps,
                         "loss": s.loss, "prompt": tok.decode(s.prompt), "target": tok.decode(target)})
    return rows


def acr_table(catalog, family: str, size: str, docs: Sequence[Document], p: AcrParams, *, progress: bool = False):
    """ACR per document × epoch (``p.epochs``) on the zoo checkpoints (family, size, epoch); of ``docs`` only the
    first ``p.docs_per_split`` of each split are searched. One row per document × epoch."""
    import pandas as pd
    from tqdm.auto import tqdm

    chosen, seen = [], {}
    for d in docs:
        seen[d.split] = seen.get(d.split, 0) + 1
        if seen[d.split] <= p.docs_per_split:
            chosen.append(d)
    rows = []
    for epoch in tqdm(list(p.epochs), desc="ACR epochs", disable=not progress):
        with catalog.checkpoint(family, size, epoch) as backend:
            rows += acr_rows(backend, chosen, p, epoch=epoch)
    return pd.DataFrame(rows)


def acr_figure(acr, pearl=None, *, score: str, alpha: float | None = None):
    """Left: ACR per epoch (each document a point, the split's mean a line; ACR = 1 dashed; hollow markers are
    bounds). Right, when ``pearl`` (``pearl_scores``) is given: PEARL ``score`` vs ACR per document × epoch
    (one marker per perturbation kind), ``alpha`` dotted."""
    import matplotlib.pyplot as plt

    from memlab.methods.pearl.plots import caption
    from memlab.plots import reference

    fig, axes = plt.subplots(1, 2 if pearl is not None else 1, figsize=(11 if pearl is not None else 5.5, 3.8),
                             squeeze=False)
    ax = axes[0][0]
    for i, (split, g) in enumerate(acr.groupby("split")):
        c = f"C{i}"
        ax.plot(*zip(*sorted(g.groupby("epoch").acr.mean().items())), c=c, label=f"{split} (mean)")
        for bound, h in g.groupby("acr_is_bound"):
            ax.scatter(h.epoch + (i - 0.5) * 0.15, h.acr, c="none" if bound else c, edgecolors=c, s=22)
    reference(ax.axhline(1.0, c="grey", ls="--", lw=1))
    ax.set_xlabel("fine-tuning epoch")
    ax.set_ylabel("ACR (hollow: upper bound)")
    ax.set_title(f"ACR of a {int(acr.target_tokens.iloc[0])}-token window")
    ax.legend(fontsize=8)
    if pearl is not None:
        ax = axes[0][1]
        df = acr.merge(pearl[["doc_id", "epoch", "kind", score]], on=["doc_id", "epoch"], how="inner")
        for i, (split, g) in enumerate(df.groupby("split")):
            for j, (kind, h) in enumerate(g.groupby("kind")):
                ax.scatter(h.acr, h[score], c=f"C{i}", marker="ox^s"[j % 4], label=f"{split}, {kind}", s=22)
        reference(ax.axvline(1.0, c="grey", ls="--", lw=1))
        if alpha is not None:
            reference(ax.axhline(alpha, c="grey", ls=":", lw=1))
        ax.set_xlabel("ACR")
        ax.set_ylabel(f"PEARL {score}")
        ax.set_title("PEARL vs ACR (document × epoch)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return caption(fig, _acr_caption(acr, pearl, score, alpha))


def _acr_caption(acr, pearl, score: str, alpha: float | None) -> str:
    """What :func:`acr_figure` draws, on what n."""
    n = ", ".join(f"{split} n = {k}" for split, k in acr.groupby("split").doc_id.nunique().items())
    right = (f" Right: PEARL {score} vs ACR per document × epoch, one marker per perturbation kind"
             + (f"; dotted: α = {alpha:g}" if alpha is not None else "") + "." if pearl is not None else "")
    return (f"{'Left: ' if pearl is not None else ''}ACR of a {int(acr.target_tokens.iloc[0])}-token window per "
            "fine-tuning epoch, each document a point (hollow: an upper bound), the split's plain mean a line; dashed: "
            f"ACR = 1.{right} No intervals: every document is drawn; {n} documents.")

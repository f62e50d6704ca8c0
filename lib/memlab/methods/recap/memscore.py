"""Hybrid memorization score (seed 000 §3.6, eq. 1, App. H) and the "Parrot" masked LM behind it.

Parrot: a masked LM trained on the book itself, so that completions close to any part of the book get a low
reconstruction loss. The paper fine-tunes bert-base-uncased (256-token overlapping chunks, stride 32, mask
probability 0.25, AdamW, batch 16, ≤ 300 epochs, early stop when the loss stays < 0.1 for 5 checkpoints, plus
LLM paraphrases of each event). Here (offline, 2 CPU cores) it is scaled down and documented as such: a tiny
BERT (``hidden``/``layers``/``heads``) with a WordPiece vocabulary trained on the book, chunks of
``chunk_tokens`` with stride ``stride``, the same mask probability and early-stopping rule, no paraphrases (no
paraphrasing model offline).

Score of a candidate ``c`` against gold ``g`` (the authors' code)::

    mlm_loss = mean masked-token cross-entropy of c under Parrot (masks drawn with a seeded RNG)
    inv      = 1 − clip((mlm_loss − 0.01) / (8.0 − 0.01), 0, 1)
    z        = 4.0·inv + 4.5·ROUGE-L(g, c) + 1.5·cosine(emb(c), emb(g)) − 5.0
    score    = sigmoid(z)

ROUGE-L is the recall (stemmed word tokens) and the cosine uses the packaged all-MiniLM-L6-v2
(:mod:`memlab.metrics.embedding`). No threshold is published; it is a config value.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memlab.schema import check

if TYPE_CHECKING:
    from memlab.data.echotrace import Book, Event

log = logging.getLogger(__name__)

COEF_INV, COEF_ROUGE, COEF_COS, INTERCEPT = 4.0, 4.5, 1.5, -5.0
LOSS_LO, LOSS_HI = 0.01, 8.0


def inverse_loss(mlm_loss: float) -> float:
    return 1.0 - float(np.clip((mlm_loss - LOSS_LO) / (LOSS_HI - LOSS_LO), 0.0, 1.0))


def hybrid_score(mlm_loss: float, rouge_l: float, cosine: float) -> float:
    """Seed 000 eq. 1 with the published coefficients (see module docstring)."""
    z = COEF_INV * inverse_loss(mlm_loss) + COEF_ROUGE * rouge_l + COEF_COS * cosine + INTERCEPT
    return 1.0 / (1.0 + math.exp(-z))


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def wordpiece_vocab(words: list[str], vocab_size: int) -> dict[str, int]:
    """A deterministic WordPiece vocabulary for one book: the special tokens, every character seen (alone and as a
    ``##`` continuation, so any word splits), then whole words by frequency (ties alphabetical) up to
    ``vocab_size``. (The tokenizers library's WordPieceTrainer breaks frequency ties in hash-map order, so the
    same book gave a different vocabulary — and a different Parrot, memorization score and filter table — on
    every run.)"""
    from collections import Counter

    counts = Counter(words)
    chars = sorted({ch for w in counts for ch in w})
    vocab: dict[str, int] = {}
    for token in [*SPECIAL_TOKENS, *chars, *(f"##{ch}" for ch in chars)]:
        vocab.setdefault(token, len(vocab))
    for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= vocab_size:
            break
        vocab.setdefault(word, len(vocab))
    return vocab


@dataclass(frozen=True)
class ParrotConfig:
    """``method.memscore.parrot`` (conf/method/recap.yaml); every value lives in the YAML. All fields enter the
    on-disk cache key of a trained Parrot."""

    vocab_size: int = field(metadata=check(ge=16))
    hidden: int = field(metadata=check(ge=1))
    layers: int = field(metadata=check(ge=1))
    heads: int = field(metadata=check(ge=1))
    chunk_tokens: int = field(metadata=check(ge=2))
    stride: int = field(metadata=check(ge=1))
    mask_prob: float = field(metadata=check(gt=0, lt=1))
    lr: float = field(metadata=check(gt=0))
    batch_size: int = field(metadata=check(ge=1))
    max_epochs: int = field(metadata=check(ge=1))
    early_stop_loss: float = field(metadata=check(ge=0))
    early_stop_patience: int = field(metadata=check(ge=1))
    seed: int


class Parrot:
    """A tiny BERT masked LM trained on one book (see module docstring)."""

    def __init__(self, text: str, cfg: ParrotConfig, cache_dir: str | Path | None = None) -> None:
        import torch

        self.cfg = cfg
        key = hashlib.sha256((json.dumps(asdict(cfg), sort_keys=True) + "\0" + text).encode()).hexdigest()[:16]
        self.dir = Path(cache_dir) / f"parrot-{key}" if cache_dir else None
        if self.dir and (self.dir / "model.pt").is_file():
            self._build(text=None)
            self.model.load_state_dict(torch.load(self.dir / "model.pt", weights_only=True))
            self.epochs_trained = json.loads((self.dir / "train.json").read_text())["epochs"]
        else:
            self._build(text)
            self.epochs_trained = self._train(text)
            if self.dir:
                self.dir.mkdir(parents=True, exist_ok=True)
                torch.save(self.model.state_dict(), self.dir / "model.pt.tmp")
                (self.dir / "model.pt.tmp").replace(self.dir / "model.pt")
                (self.dir / "train.json").write_text(json.dumps({"epochs": self.epochs_trained}))
        self.model.eval()

    def _build(self, text: str | None) -> None:
        import torch
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
        from transformers import BertConfig, BertForMaskedLM

        if text is None:
            self.tok = Tokenizer.from_file(str(self.dir / "tokenizer.json"))
        else:
            norm, pre = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
            words = [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]
            tok = Tokenizer(models.WordPiece(vocab=wordpiece_vocab(words, self.cfg.vocab_size), unk_token="[UNK]"))
            tok.normalizer, tok.pre_tokenizer = norm, pre
            self.tok = tok
            if self.dir:
                self.dir.mkdir(parents=True, exist_ok=True)
                tok.save(str(self.dir / "tokenizer.json"))
        self.mask_id = self.tok.token_to_id("[MASK]")
        self.pad_id = self.tok.token_to_id("[PAD]")
        torch.manual_seed(self.cfg.seed)
        conf = BertConfig(vocab_size=self.tok.get_vocab_size(), hidden_size=self.cfg.hidden,
                          num_hidden_layers=self.cfg.layers, num_attention_heads=self.cfg.heads,
                          intermediate_size=4 * self.cfg.hidden, max_position_embeddings=self.cfg.chunk_tokens + 2)
        self.model = BertForMaskedLM(conf)

    def _ids(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def _mask(self, ids, rng: np.random.Generator):
        import torch

        x = torch.tensor(ids)
        m = torch.from_numpy(rng.random(x.shape) < self.cfg.mask_prob) & (x != self.pad_id)
        if m.sum() == 0:  # at least one masked token per row
            m[..., 0] = x[..., 0] != self.pad_id
        labels = torch.where(m, x, torch.full_like(x, -100))
        inp = torch.where(m, torch.full_like(x, self.mask_id), x)
        return inp, labels, (x != self.pad_id).long()

    def _train(self, text: str) -> int:
        import torch

        ids = self._ids(text)
        L, S = self.cfg.chunk_tokens, self.cfg.stride
        chunks = [ids[i:i + L] for i in range(0, max(1, len(ids) - L + S), S)] or [ids]
        chunks = [c + [self.pad_id] * (L - len(c)) for c in chunks if c]
        rng = np.random.default_rng(self.cfg.seed)
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.cfg.lr)
        self.model.train()
        below, epoch = 0, 0
        for epoch in range(1, self.cfg.max_epochs + 1):
            order = rng.permutation(len(chunks))
            losses = []
            for b in range(0, len(chunks), self.cfg.batch_size):
                batch = [chunks[i] for i in order[b:b + self.cfg.batch_size]]
                inp, labels, att = self._mask(batch, rng)
                loss = self.model(input_ids=inp, attention_mask=att, labels=labels).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            below = below + 1 if np.mean(losses) < self.cfg.early_stop_loss else 0
            if below >= self.cfg.early_stop_patience:
                break
        log.info("Parrot trained %d epochs on %d chunks (last loss %.3f)", epoch, len(chunks), float(np.mean(losses)))
        return epoch

    def mlm_loss(self, text: str) -> float:
        """Mean masked-token cross-entropy of ``text`` (masks seeded by the text, so the value is fixed)."""
        import torch

        ids = self._ids(text)
        if not ids:
            return LOSS_HI
        L = self.cfg.chunk_tokens
        chunks = [ids[i:i + L] for i in range(0, len(ids), L)]
        chunks = [c + [self.pad_id] * (L - len(c)) for c in chunks]
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") ^ self.cfg.seed
        inp, labels, att = self._mask(chunks, np.random.default_rng(seed))
        with torch.no_grad():
            logits = self.model(input_ids=inp, attention_mask=att).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                 ignore_index=-100)
        return float(loss)


def make_memscore_fn(parrot_cfg, cache_dir: str | Path | None, *, stem: bool):
    """A ``memscore_fn`` for :class:`~memlab.methods.recap.pipeline.RecapRunner`: Parrot (one per book, cached on
    disk) + ROUGE-L (``stem``: ``method.recap.stem``) + cosine."""
    from memlab.metrics.embedding import cosine_pairs
    from memlab.metrics.rouge import rouge_l

    parrots: dict[str, Parrot] = {}

    def fn(book: Book, events: list[Event], outputs: list[str]) -> list[dict]:
        if book.id not in parrots:
            parrots[book.id] = Parrot(book.text, parrot_cfg, cache_dir)
        p = parrots[book.id]
        refs = [e.reference for e in events]
        cos = cosine_pairs(refs, list(outputs))
        out = []
        for ref, o, c in zip(refs, outputs, cos):
            loss = p.mlm_loss(o)
            r = rouge_l(ref, o, stem=stem).recall
            out.append({"mlm_loss": loss, "inv": inverse_loss(loss), "rouge_l": r, "cosine": float(c),
                        "score": hybrid_score(loss, r, float(c))})
        return out

    return fn

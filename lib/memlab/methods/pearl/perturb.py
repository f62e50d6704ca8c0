"""Seeded input perturbations σ(k) for PEARL (seed 001 §3.1, seed 003 §3): bit flips and synonym substitution.

Both perturbations are **nested**: one seeded random order of the candidate positions is drawn per
(text, seed), and level k changes the first m(k) positions of that order, so the perturbation at level k+1
contains the one at level k and the input drifts monotonically away from the original as k grows. Level 0
is always the unperturbed text.

Bit flip (:func:`bit_flip`), intensity defined on **tokens** (the papers: "the percentage of tokens modified in the
input", seed 003 Table 9), or on UTF-8 bytes or bits (variants):

    W    = number of word tokens (maximal runs of non-whitespace) of the text
    N    = number of bytes of the UTF-8 encoding of the text
    m(k) = ⌊k · rate · W + ½⌋                  unit = "token" (default; rate 0.01 → k % of the tokens)
    m(k) = ⌊k · rate · N + ½⌋                  unit = "byte"  (k % of the bytes)
    m(k) = ⌊k · rate · 8N + ½⌋                 unit = "bit"   (k % of the bits)
    m(k) = max(1, m(k)) for k ≥ 1 when min_one  (so level 1 changes something even in short texts)
    m(k) = max(m(k), m(k′) + 1) when distinct_levels, k′ the previous configured level (variant, off by default)

On short inputs the papers' rounding gives adjacent levels the same m (51 words at rate 0.01: m = 1, 1, 2, 2, 3 for
k = 1…5), so their inputs are identical and their outputs differ only by sampling. ``distinct_levels`` makes each
level flip at least one more token than the one before (51 words: m = 1, 2, 3, 4, 5); on long inputs, where
the papers' m already grows by ≥ 1 per level, it changes nothing. Either way m(k) is capped at the candidates.

unit = "token": m(k) distinct word tokens are chosen and in each one byte gets exactly one bit flipped (a black-box
model has no tokenizer we can see, so a token is a whitespace-delimited word; the authors' code flips bits of the
token ids of one tokenizer instead). unit = "byte"/"bit": m(k) distinct bytes are chosen; in each, exactly one bit
is flipped. With ``ascii_safe`` (default) only
printable-ASCII bytes (0x20–0x7E) are candidates and the flipped bit is drawn among bits 0–6 whose flip
keeps the byte printable ('e' → 'a', 'g', 'm', 'u', 'E', '%'…), so the result is valid text without
control characters; m(k) is capped at the number of candidate bytes. Without ``ascii_safe`` any bit of any
byte may flip and invalid UTF-8 decodes to U+FFFD. (The authors' first code flipped each bit of the token ids
with probability k/1000 and resampled invalid ids; that depends on one tokenizer, so we perturb the text,
which any black-box model accepts.)

Synonym substitution (:func:`synonym_substitute`): candidate words are maximal runs of ASCII letters of at
least ``min_word_len`` characters that have at least one WordNet synonym (:mod:`.wordnet`). Level k
replaces ``m(k) = k · words_per_level`` of them (capped at the number of candidates) with a synonym drawn
uniformly from the word's sorted synonym list, keeping the word's capitalisation (UPPER, Title, lower).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from memlab.schema import check
from memlab.errors import ConfigError, MemlabError

KINDS = ("bitflip", "synonym")
_WORD = re.compile(r"[A-Za-z]+")


def derive_seed(*parts: object) -> int:
    """A 63-bit seed that is a pure function of ``parts`` (stable across processes, unlike ``hash``)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class PerturbationConfig:
    """How σ(k) perturbs an input (``method.perturbation``). ``levels`` must be distinct non-negative ints starting
    at 0. Values live in conf/method/pearl.yaml only."""

    kind: str = field(metadata=check(choices=KINDS))
    levels: tuple[int, ...]
    # bit flip
    unit: str = field(metadata=check(choices=("token", "byte", "bit")))
    rate: float = field(metadata=check(gt=0, le=1))
    min_one: bool
    distinct_levels: bool
    ascii_safe: bool
    # synonym substitution
    words_per_level: int = field(metadata=check(ge=1))
    min_word_len: int = field(metadata=check(ge=1))
    nltk_data: str
    wordnet_source: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(int(k) for k in self.levels))
        lv = self.levels
        if len(lv) < 2 or lv[0] != 0 or any(b <= a for a, b in zip(lv, lv[1:])) or lv[0] < 0:
            raise ConfigError(f"perturbation.levels must be increasing ints starting at 0 with at least two "
                              f"levels, got {list(lv)}")
        if self.kind not in KINDS:
            raise ConfigError(f"perturbation.kind must be one of {KINDS}, got {self.kind!r}")
        if max(lv) * self.rate > 1:
            raise ConfigError(f"perturbation.rate must satisfy max(levels)·rate ≤ 1, got {self.rate}")

    def check_level(self, k: int) -> None:
        if k not in self.levels:
            raise MemlabError(f"perturbation level k={k} is not one of the configured levels {list(self.levels)}; "
                              "use one of them or extend perturbation.levels")


@dataclass(frozen=True)
class Perturbed:
    """One perturbed input: ``n_changed`` units (bytes or words) differ from the original."""

    text: str
    level: int
    n_changed: int
    kind: str


class _Synonyms(Protocol):
    def synonyms(self, word: str) -> Sequence[str]: ...


def _printable(b: int) -> bool:
    return 0x20 <= b <= 0x7E


def n_flips(n_units: int, k: int, cfg: PerturbationConfig) -> int:
    """m(k): how many units (word tokens, or bytes) level k flips, from the text's number of tokens (unit "token")
    or bytes (units "byte", "bit"), before capping at the number of candidates."""
    if k == 0:
        return 0
    units = n_units * (8 if cfg.unit == "bit" else 1)
    m = int(k * cfg.rate * units + 0.5)  # round half up (Python's round() is half-to-even)
    return max(1, m) if cfg.min_one else m


def level_flips(n_units: int, cfg: PerturbationConfig) -> list[int]:
    """m(k) for each configured level, in order: :func:`n_flips`, raised to one more than the previous level's when
    ``distinct_levels`` (before capping at the number of candidates)."""
    out: list[int] = []
    for k in cfg.levels:
        m = n_flips(n_units, k, cfg)
        out.append(max(m, out[-1] + 1) if cfg.distinct_levels and k > 0 else m)
    return out


def _check_text(text: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise MemlabError("PEARL got an empty input text; drop empty documents before perturbing")


def bit_flip_all(text: str, cfg: PerturbationConfig, seed: int) -> list[Perturbed]:
    """Every level of the (nested) bit-flip perturbation of ``text``; see the module docstring."""
    _check_text(text)
    data = bytearray(text.encode("utf-8"))
    rng = np.random.default_rng(seed)
    if cfg.unit == "token":
        return _token_flips(data, cfg, rng)
    if cfg.ascii_safe:
        cand = np.array([i for i, b in enumerate(data) if _printable(b)], dtype=np.int64)
    else:
        cand = np.arange(len(data), dtype=np.int64)
    order = cand[rng.permutation(len(cand))]
    u = rng.random(len(order))  # which bit, per position in the order (drawn once: keeps levels nested)
    flips = []
    for pos, r in zip(order, u):
        bits = _flippable_bits(data[pos], cfg.ascii_safe)
        flips.append((int(pos), bits[int(r * len(bits))]))
    return _apply_levels(data, flips, len(data), cfg)


def _flippable_bits(b: int, ascii_safe: bool) -> list[int]:
    return [j for j in range(7) if _printable(b ^ (1 << j))] if ascii_safe else list(range(8))


def _apply_levels(data: bytearray, flips: list[tuple[int, int]], n_units: int,
                  cfg: PerturbationConfig) -> list[Perturbed]:
    """Level k applies the first m(k) of ``flips`` (byte position, bit), so the levels nest."""
    out = []
    for k, m in zip(cfg.levels, level_flips(n_units, cfg)):
        m = min(m, len(flips))
        buf = bytearray(data)
        for pos, bit in flips[:m]:
            buf[pos] ^= 1 << bit
        out.append(Perturbed(buf.decode("utf-8", errors="replace"), k, m, "bitflip"))
    return out


def _token_flips(data: bytearray, cfg: PerturbationConfig, rng: np.random.Generator) -> list[Perturbed]:
    """unit = "token": one bit of one byte in each of m(k) word tokens (nested over k, like the byte variant)."""
    tokens = [(m.start(), m.end()) for m in re.finditer(rb"\S+", bytes(data))]
    cands = []
    for s, e in tokens:
        pos = [i for i in range(s, e) if _printable(data[i])] if cfg.ascii_safe else list(range(s, e))
        if pos:
            cands.append(pos)
    order = rng.permutation(len(cands))
    u, v = rng.random(len(cands)), rng.random(len(cands))  # which byte, which bit (drawn once: levels nest)
    flips = []
    for idx, a, b in zip(order, u, v):
        pos = cands[idx][int(a * len(cands[idx]))]
        bits = _flippable_bits(data[pos], cfg.ascii_safe)
        flips.append((pos, bits[int(b * len(bits))]))
    return _apply_levels(data, flips, len(tokens), cfg)


def synonym_substitute_all(text: str, cfg: PerturbationConfig, seed: int, synonyms: _Synonyms) -> list[Perturbed]:
    """Every level of the (nested) synonym substitution of ``text``; see the module docstring."""
    _check_text(text)
    rng = np.random.default_rng(seed)
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text) if len(m.group()) >= cfg.min_word_len]
    cands = [(s, e, w, syn) for s, e, w in words if (syn := synonyms.synonyms(w))]
    order = rng.permutation(len(cands))
    u = rng.random(len(cands))
    choice = []
    for idx, r in zip(order, u):
        s, e, w, syn = cands[idx]
        new = syn[int(r * len(syn))]
        if w.isupper() and len(w) > 1:
            new = new.upper()
        elif w[0].isupper():
            new = new[:1].upper() + new[1:]
        choice.append((s, e, new))
    out = []
    for k in cfg.levels:
        m = min(k * cfg.words_per_level, len(choice))
        pieces, last = [], 0
        for s, e, new in sorted(choice[:m]):
            pieces += [text[last:s], new]
            last = e
        pieces.append(text[last:])
        out.append(Perturbed("".join(pieces), k, m, "synonym"))
    return out


class Perturber:
    """σ(k) for one :class:`PerturbationConfig`; loads WordNet lazily for synonym substitution."""

    def __init__(self, cfg: PerturbationConfig, synonyms: _Synonyms | None = None):
        self.cfg = cfg
        self._synonyms = synonyms

    @property
    def synonyms(self) -> _Synonyms:
        if self._synonyms is None:
            from memlab.methods.pearl.wordnet import load_synonyms

            self._synonyms = load_synonyms(self.cfg.nltk_data, self.cfg.wordnet_source)
        return self._synonyms

    def all_levels(self, text: str, seed: int) -> list[Perturbed]:
        if self.cfg.kind == "bitflip":
            return bit_flip_all(text, self.cfg, seed)
        return synonym_substitute_all(text, self.cfg, seed, self.synonyms)

    def __call__(self, text: str, k: int, seed: int) -> Perturbed:
        """σ(k)(text) with the given seed."""
        self.cfg.check_level(k)
        return self.all_levels(text, seed)[self.cfg.levels.index(k)]

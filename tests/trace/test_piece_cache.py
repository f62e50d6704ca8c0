"""The pre-token cache encodes exactly as the fast tokenizer does, on ordinary text and on every kind of
character (assigned or not, recent or old, controls, separators, marks), special-token text, NFC and a full cache."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from tokenizers import Tokenizer

from memlab.methods.trace.index import piece_cache
from memlab.methods.trace.index.piece_cache import PieceCachedEncoder, piece_cache_applicable

SEP, DTYPE = 0xFFFF, np.dtype(np.uint16)
EDGE_TEXTS = [
    "", " ", "  x  \n\n ", "a  b\t\tc \n", "don't we'll they've I'm you'd it's 'S 'st ''s", "x'sy 're've",
    "tab\there\x0b\x0cand\r\nCRLF", "\x00\x01\x1c\x1d\x1e\x1f controls", "nel\x85and nbsp\xa0and\u2028ls\u2029ps",
    "Grüße, Straße — naïve café", "数字１２３ and ①②③ and Ⅻ", "e\u0301 combining \u0301\u0301 marks",
    "emoji 👍🏽 and flags 🇩🇪", "private \ue000\U000f0000 and unassigned \U000e0fff\U0003ffff",
    "hello <|endoftext|> world", "<|endoftext|>", "tail space ", "  leading", "99 bottles 3.14 1e10",
]


def _fast(tokenizer) -> tuple[Tokenizer, str]:
    js = tokenizer.backend_tokenizer.to_str()
    tok = Tokenizer.from_str(js)
    tok.no_truncation()
    tok.no_padding()
    return tok, js


def _random_texts(n: int, seed: int) -> list[str]:
    """Texts mixing characters drawn from all of Unicode (surrogates excluded) with spaces, apostrophes,
    letters and digits, so that every class meets every other."""
    rng = random.Random(seed)
    glue = list(" \t\n\r\x0b\x85\xa0\u2028\u3000'sdtlmrev1xé ")
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(1, 400)):
            if rng.random() < 0.5:
                c = rng.randrange(0x110000 - 0x800)
                chars.append(chr(c + 0x800 if c >= 0xD800 else c))
            else:
                chars.append(rng.choice(glue))
        out.append("".join(chars))
    return out


def _expected(tok: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    block = np.concatenate([np.concatenate([[SEP], i]) for i in ids]).astype(DTYPE) if ids else np.empty(0, DTYPE)
    return np.array([len(i) for i in ids], dtype=np.int64), block


def _encode_in_batches(enc: PieceCachedEncoder, texts: list[str], size: int):
    parts = [enc.encode_block(texts[i:i + size], SEP, DTYPE) for i in range(0, len(texts), size)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


@pytest.fixture(scope="module")
def fast(tokenizer):
    return _fast(tokenizer)


def test_zoo_tokenizer_shape_is_handled(fast):
    assert piece_cache_applicable(fast[1])


@pytest.mark.parametrize("change", [
    {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}},
    {"pre_tokenizer": {"type": "Whitespace"}},
    {"normalizer": {"type": "Lowercase"}},
])
def test_other_tokenizer_shapes_are_left_to_the_tokenizer(fast, change):
    assert not piece_cache_applicable(json.dumps({**json.loads(fast[1]), **change}))


def test_split_matches_the_tokenizers_pre_tokenizer_on_all_of_unicode(fast):
    tok, js = fast
    enc = PieceCachedEncoder(tok, js)
    for text in EDGE_TEXTS + _random_texts(300, seed=1):
        pieces = enc.pieces(text)
        assert "".join(pieces) == text
        spans, pos = [], 0
        for p in pieces:
            spans.append((pos, pos + len(p)))
            pos += len(p)
        assert spans == [span for _, span in tok.pre_tokenizer.pre_tokenize_str(text)], repr(text)


def test_encoded_blocks_equal_the_fast_tokenizer(fast, corpus):
    tok, js = fast
    texts = [d.text for d in corpus] + EDGE_TEXTS + _random_texts(100, seed=2)
    random.Random(0).shuffle(texts)
    enc = PieceCachedEncoder(tok, js)
    want = _expected(tok, texts)
    for size in (7, 1000):  # a cold cache, then a warm one
        got = _encode_in_batches(enc, texts, size)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert len(enc)  # the cache was used


def test_a_full_cache_stays_bounded_and_exact(fast, corpus, monkeypatch):
    tok, js = fast
    monkeypatch.setattr(piece_cache, "MAX_PIECES", 50)
    enc = PieceCachedEncoder(tok, js)
    texts = [d.text for d in corpus][:60]
    got = _encode_in_batches(enc, texts, 3)
    want = _expected(tok, texts)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert len(enc) <= 50 and len(enc.cp_offsets.view()) == len(enc.id_offsets.view()) == len(enc) + 1


def test_nfc_normalizing_tokenizer(fast):
    tok_plain, js = fast
    spec = json.loads(js)
    spec["normalizer"] = {"type": "NFC"}
    js_nfc = json.dumps(spec)
    tok = Tokenizer.from_str(js_nfc)
    assert piece_cache_applicable(js_nfc)
    texts = ["cafe\u0301 decomposed", "café composed", "Å vs A\u030a", "plain ascii"]
    got = PieceCachedEncoder(tok, js_nfc).encode_block(texts, SEP, DTYPE)
    want = _expected(tok, texts)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert _expected(tok_plain, texts[:1])[1].tolist() != _expected(tok, texts[:1])[1].tolist()  # NFC did act


def test_a_hash_collision_is_caught_not_answered(fast):
    """A piece whose hash names another cached piece (forced here: FNV-1a collisions are too rare to meet) is
    never answered with that piece's ids: its text is encoded whole, the ids are the tokenizer's."""
    from memlab.methods.trace.index import piece_scan

    tok, js = fast
    enc = PieceCachedEncoder(tok, js)
    enc.encode_block(["alpha beta"], SEP, DTYPE)
    victim = " gamma"
    h = piece_scan.hash_of(np.frombuffer(victim.encode("utf-32-le"), dtype=np.uint32))
    piece_scan.insert(enc.slot_hash, enc.slot_entry, np.array([h], dtype=np.uint64), 0)  # " gamma" -> entry 0 ("alpha")
    texts = ["alpha gamma", "beta alpha"]
    got = enc.encode_block(texts, SEP, DTYPE)
    want = _expected(tok, texts)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert enc.pieces("alpha gamma") == ["alpha", " gamma"]

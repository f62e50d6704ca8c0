"""Indexes and tokenizers built once and reused: keyed by the documents' ids + SHA-256, the tokenizer and the
backend, under the run's ``method.index_root``; and an existing infini-gram index opened for prefix prompts."""

from __future__ import annotations

import random
from pathlib import Path

from memlab.errors import MemlabError

def cached_index(docs, tokenizer, root: str | Path, *, backend: str, label: str, shard_tokens: int | None = None):
    """Build (once) an index of ``docs`` with ``tokenizer`` under ``root``, keyed by the documents'
    ids + SHA-256, the tokenizer fingerprint, the backend and (infini-gram only: it changes the files) the
    shard size ``shard_tokens`` (``method.index_shard_tokens``; None: one shard), so reruns reuse it."""
    import hashlib
    import json

    from memlab.methods.trace.index import build_index, load_index, tokenizer_fingerprint

    key = [tokenizer_fingerprint(tokenizer), backend] + ([shard_tokens] if backend == "infini_gram" and shard_tokens
                                                          else [])
    h = hashlib.sha256(json.dumps([[d.id, d.sha256] for d in docs] + key).encode()).hexdigest()[:16]
    path = Path(root) / f"{label}-{backend}-{h}"
    if (path / "meta.json").exists():
        return load_index(path)
    return build_index(docs, tokenizer, path, backend=backend, shard_tokens=shard_tokens, overwrite=True)


def tokenizer_for(path_or_none, docs, cache_root: str | Path, vocab_size: int):
    """An HF tokenizer: the folder given, or a byte-level BPE trained (deterministically, once) on docs."""
    import hashlib
    import json

    from transformers import AutoTokenizer

    if path_or_none:
        if not Path(path_or_none).exists():
            raise MemlabError(f"tokenizer folder {path_or_none} does not exist; build the model zoo (make models)")
        return AutoTokenizer.from_pretrained(str(path_or_none))
    from memlab.models.tiny import train_tokenizer

    h = hashlib.sha256(json.dumps([[d.id, d.sha256] for d in docs] + [vocab_size]).encode()).hexdigest()[:16]
    out = Path(cache_root) / f"bpe-{vocab_size}-{h}"
    if not (out / "tokenizer.json").exists():
        train_tokenizer([d.text for d in docs], vocab_size, out)
    return AutoTokenizer.from_pretrained(str(out))


def external_corpus(spec: dict, tokenizer, cache_root: str | Path, n_docs: int, seed: int):
    """An existing infini-gram index directory (``spec.infini_gram_dir``, built with ``tokenizer``,
    ``spec.token_dtype`` default u16) plus ``n_docs`` documents sampled from it for prefix prompts."""
    from memlab.data.records import Document
    from memlab.methods.trace.index.kinds.infini_gram import ExternalInfiniGramIndex

    index = ExternalInfiniGramIndex(spec["infini_gram_dir"], tokenizer, token_dtype=spec.get("token_dtype", "u16"),
                                    cache_dir=cache_root)
    rng = random.Random(f"{seed}:external")
    picks = sorted(rng.sample(range(index.n_docs), min(n_docs, index.n_docs)))
    docs = [Document(id=index.doc_id(i), text=index.doc_text(i), source=str(index.path), licence="unknown")
            for i in picks]
    return index, [d for d in docs if d.text.strip()]

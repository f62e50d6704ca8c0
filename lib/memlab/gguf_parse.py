"""Opening a GGUF file with transformers, parsed once."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def one_gguf_parse() -> Iterator[None]:
    """transformers opens a GGUF three times (the tokenizer, the config, the weights: in memlab.models.convert and in
    the HF backend's ``model.gguf_file``), and each ``GGUFReader`` parses all of its metadata in Python, a numpy
    slice per vocabulary string: ~24 s each for Gemma-3's 262k words on this machine (py-spy), 73 of the 133 s its
    conversion took. Inside this block a path is parsed once and its reader shared (read-only: a memory map of the
    file)."""
    import gguf

    original, readers = gguf.GGUFReader, {}

    def shared(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared
    try:
        yield
    finally:
        gguf.GGUFReader = original

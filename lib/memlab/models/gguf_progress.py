"""What a first GGUF load is doing, on the runner's console: the conversion of a user's GGUF takes 30–130 s
(the metadata and vocabulary parse, then one dequantization per tensor, then writing safetensors), and without
this the console shows nothing for that long.

:func:`gguf_load_progress` reports it through :class:`memlab.progress.Progress` (a no-op without a runner): one
task while the file is hashed, parsed and converted, and a counted task for the tensors, whose count comes from
the loop transformers runs over them (its own ``tqdm`` bar only reaches the kernel's log)."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from memlab.progress import Progress

_TRANSFORMERS_GGUF = "transformers.modeling_gguf_pytorch_utils"


def _counting_tqdm(name: str, stack: ExitStack):
    """A stand-in for transformers' ``tqdm`` over the GGUF's tensors: the same iteration, counted as a Progress."""

    def counted(iterable, *args, **kwargs):
        items = list(iterable)
        progress = stack.enter_context(Progress(f"dequantize {name}: tensors", total=len(items)))
        for item in items:
            yield item
            progress.advance(1)

    return counted


def _reported(load, module):
    """``load`` (memlab.models.convert.load_gguf) announcing the file and counting transformers' tensor loop."""

    def load_reported(gguf_path):
        path = Path(gguf_path)
        with ExitStack() as stack:
            stack.enter_context(Progress(f"read {path.name} ({path.stat().st_size / 1e6:.0f} MB; "
                                         "converted once, then cached)"))
            original = getattr(module, "tqdm", None)
            if original is not None:
                module.tqdm = _counting_tqdm(path.name, stack)
            try:
                return load(gguf_path)
            finally:
                if original is not None:
                    module.tqdm = original

    return load_reported


@contextmanager
def gguf_load_progress() -> Iterator[None]:
    """Inside the block, a GGUF that gets converted reports ``read <file> (… MB; converted once, then cached)`` and
    then ``dequantize <file>: tensors k/n``; an already converted one reports nothing (it only loads its folder).
    The hook is the converter's ``load_gguf``, reached only when a conversion happens. Without transformers' GGUF
    module (or its ``tqdm``) the tensors are just not counted."""
    import importlib

    from memlab.models import convert

    try:
        module = importlib.import_module(_TRANSFORMERS_GGUF)
    except ImportError:
        module = None
    original = convert.load_gguf
    convert.load_gguf = _reported(original, module)
    try:
        yield
    finally:
        convert.load_gguf = original

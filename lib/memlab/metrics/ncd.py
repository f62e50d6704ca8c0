"""Normalized Compression Distance (Cilibrasi & Vitányi, 2005) and PEARL's completion score.

Definition, with C(·) the compressed length in bytes of the UTF-8 encoding and xy the concatenation::

    NCD(x, y) = (C(xy) − min(C(x), C(y))) / max(C(x), C(y))

NCD ≈ 0 for identical texts and ≈ 1 (can slightly exceed 1 with real compressors) for unrelated ones.
Compressors: ``"zlib"`` (level 9, what PEARL's code uses) and ``"lzma"`` (xz preset 9, better on long
texts: zlib's 32 KiB window cannot see x while compressing the y half of xy once x is longer than that).

PEARL scores a completion with ``completion_score = 1 − NCD_zlib(output, reference)`` (higher = closer to
the reference); seed 001 eq. 2 averages it over the i samples at perturbation level k,
m(Y*_k) = (1/i) Σ_j score(y*_(k,j), Y), and eq. 3 / seed 003 eq. 3 (GFD) compare those levels.

Edge cases (documented values): NCD("", "") = 0.0 (two empty texts are identical); when exactly one side
is empty C("") is still > 0 (compressor header), so the formula applies unchanged. Non-str → TypeError,
unknown compressor → ValueError.
"""

from __future__ import annotations

import lzma
import zlib
from typing import Callable

__all__ = ["compressed_size", "ncd", "completion_score", "COMPRESSORS"]


def _zlib(b: bytes) -> int:
    return len(zlib.compress(b, 9))


def _lzma(b: bytes) -> int:
    return len(lzma.compress(b, preset=9))


COMPRESSORS: dict[str, Callable[[bytes], int]] = {"zlib": _zlib, "lzma": _lzma}


def _bytes(name: str, x: object) -> bytes:
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    raise TypeError(f"{name} must be str or bytes, got {type(x).__name__}")


def compressed_size(x: str | bytes, compressor: str = "zlib") -> int:
    """C(x): length in bytes of ``x`` (UTF-8 if str) compressed with ``compressor``."""
    try:
        fn = COMPRESSORS[compressor]
    except KeyError:
        raise ValueError(f"compressor must be one of {sorted(COMPRESSORS)}, got {compressor!r}") from None
    return fn(_bytes("x", x))


def ncd(a: str | bytes, b: str | bytes, compressor: str = "zlib") -> float:
    """NCD(a, b) = (C(ab) − min(C(a), C(b))) / max(C(a), C(b)); see the module docstring."""
    ba, bb = _bytes("a", a), _bytes("b", b)
    if not ba and not bb:
        return 0.0
    ca, cb = compressed_size(ba, compressor), compressed_size(bb, compressor)
    cab = compressed_size(ba + bb, compressor)
    return (cab - min(ca, cb)) / max(ca, cb)


def completion_score(output: str | bytes, reference: str | bytes, compressor: str = "zlib") -> float:
    """PEARL's per-sample completion performance: 1 − NCD(output, reference) (the summand of seed 001 eq. 2)."""
    return 1.0 - ncd(output, reference, compressor)

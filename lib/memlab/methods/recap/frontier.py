"""The frontier areas of RECAP's memorization-score filters (§5.7), for the rule ``recap_filter_hybrid``
(:mod:`memlab.methods.recap.claims`): each signal's frontier area for rows of event weights, and the weights of a
book-clustered bootstrap ((target, book) pairs resampled, each event weighted by how often its pair was drawn)."""

from __future__ import annotations

import numpy as np

from memlab.metrics.bootstrap import resample_indices

SIGNALS = ("hybrid", "rouge_l", "cosine")


def frontier_areas(ev, thresholds, w: np.ndarray) -> dict[str, np.ndarray]:
    """Per signal, the frontier area (mean over savings levels 0–1 of the best filtered ROUGE-L reachable while
    saving at least that share of feedback calls) for each row of event weights ``w`` (draws × events: how often
    each event's book was drawn; ones for the observed events)."""
    grid = np.linspace(0, 1, 201)
    calls, full, base = (ev[c].to_numpy(float) for c in ("feedback_calls", "recap", "dsp_jb"))
    wsum, total = w.sum(axis=1), (w * calls).sum(axis=1)
    out = {}
    for sig in SIGNALS:
        s = ev[sig].to_numpy(float)
        pts_q, pts_r = [np.zeros(len(w))], [(w * full).sum(axis=1) / wsum]
        for t in thresholds:
            keep = s >= t
            with np.errstate(invalid="ignore", divide="ignore"):
                pts_q.append(np.where(total > 0, (w * (calls * ~keep)).sum(axis=1) / total, 0.0))
            pts_r.append((w * np.where(keep, full, base)).sum(axis=1) / wsum)
        q, r = np.stack(pts_q, 1), np.stack(pts_r, 1)                     # draws × points
        ok = q[:, :, None] >= grid[None, None, :] - 1e-12                   # draws × points × grid
        best = np.where(ok, r[:, :, None], -np.inf).max(axis=1)
        best = np.where(np.isfinite(best), best, r.min(axis=1, keepdims=True))
        out[sig] = best.mean(axis=1)
    return out


def book_weights(ev, seed: int, B: int) -> tuple[np.ndarray, int]:
    """(B × events) weights of a book-clustered bootstrap: (target, book) pairs are resampled, each event weighted by
    how often its pair was drawn; and the number of pairs."""
    book = ev.groupby(["target", "book"], sort=False).ngroup().to_numpy()
    k = int(book.max()) + 1
    counts = np.concatenate([np.stack([np.bincount(row, minlength=k) for row in idx])
                             for idx in resample_indices(k, B, seed)])
    return counts[:, book].astype(float), k

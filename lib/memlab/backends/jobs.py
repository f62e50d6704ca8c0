"""Per-sample jobs: the unit the concrete backends compute and the cache stores.

A request with ``n`` samples expands to jobs ``(request, i)`` for ``i < n``. Under greedy decoding
(``temperature == 0``) every sample equals sample 0 by definition, so only job ``(request, 0)`` is computed
and copied. Sample ``i`` of a sampled request uses the seed :func:`sample_seed` ``(request.seed, i)``, so it
is a pure function of (model, request, seed, i) whatever else is computed alongside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from memlab.backends.base import Backend, Generation, GenerationRequest, Sample


@dataclass(frozen=True)
class SampleJob:
    request: GenerationRequest
    index: int


@dataclass
class SampleResult:
    """One computed sample and the tokens it cost (prompt tokens are counted once per request)."""

    sample: Sample
    prompt_tokens: int
    completion_tokens: int


OnDone = Callable[[int, SampleResult], None]


class SampleBackend(Protocol):
    """What the cache needs to resume at sample granularity: compute only the listed jobs and report each
    finished one through ``on_done(job_position, result)`` as soon as it is final."""

    def generate_samples(self, jobs: Sequence[SampleJob], *, progress: bool = False,
                         on_done: OnDone | None = None) -> list[SampleResult]: ...


class PerSampleBackend(Backend):
    """A backend that computes single samples (:meth:`generate_samples`); whole requests are assembled here."""

    def generate(self, requests: Sequence[GenerationRequest], *, progress: bool = False) -> list[Generation]:
        from memlab.progress import Progress

        jobs = expand(requests)
        with Progress(f"generate {self.model_id}", total=len(jobs)) as bar:
            results = self.generate_samples(jobs, progress=progress,
                                            on_done=lambda pos, res: bar.advance(1, requests=1))
        return assemble(requests, dict(zip(jobs, results)))

    def generate_samples(self, jobs: Sequence[SampleJob], *, progress: bool = False,
                         on_done: OnDone | None = None) -> list[SampleResult]:
        raise NotImplementedError


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample ``index`` of a request with ``seed``: the first 8 bytes of
    sha256("{seed}:{index}") masked to 63 bits (fits torch.Generator and every API's ``seed`` field)."""
    digest = hashlib.sha256(f"{int(seed)}:{int(index)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF


def api_seed(seed: int, index: int) -> int:
    """:func:`sample_seed` folded to 31 bits: some servers reject seeds above a signed int32."""
    return sample_seed(seed, index) & 0x7FFF_FFFF


def normalized(request: GenerationRequest) -> GenerationRequest:
    """The same request with list-valued fields as tuples (requests rebuilt from JSON carry lists, which
    can't be hashed or used as dict keys)."""
    changes: dict = {}
    if not isinstance(request.stop, tuple):
        changes["stop"] = tuple(request.stop)
    if request.prompt_token_ids is not None and not isinstance(request.prompt_token_ids, tuple):
        changes["prompt_token_ids"] = tuple(request.prompt_token_ids)
    if request.messages is not None and not isinstance(request.messages, tuple):
        changes["messages"] = tuple(request.messages)
    return dataclasses.replace(request, **changes) if changes else request


def effective_index(request: GenerationRequest, index: int) -> int:
    """Greedy samples are all sample 0."""
    return 0 if request.temperature == 0 else index


def expand(requests: Sequence[GenerationRequest]) -> list[SampleJob]:
    """The distinct jobs needed for ``requests`` (greedy requests need only sample 0)."""
    seen: set[SampleJob] = set()
    jobs: list[SampleJob] = []
    for r in map(normalized, requests):
        for i in range(r.n):
            job = SampleJob(r, effective_index(r, i))
            if job not in seen:
                seen.add(job)
                jobs.append(job)
    return jobs


def assemble(requests: Sequence[GenerationRequest], results: dict[SampleJob, SampleResult],
             cached: dict[SampleJob, bool] | None = None) -> list[Generation]:
    """Build one :class:`Generation` per request from per-job results."""
    out: list[Generation] = []
    for r in map(normalized, requests):
        samples, prompt_tokens, completion_tokens, hits = [], 0, 0, []
        for i in range(r.n):
            job = SampleJob(r, effective_index(r, i))
            res = results[job]
            samples.append(Sample(res.sample.text, list(res.sample.token_ids) if res.sample.token_ids is not None
                                  else None, res.sample.finish_reason))
            prompt_tokens = res.prompt_tokens
            completion_tokens += res.completion_tokens
            hits.append(bool(cached and cached.get(job)))
        out.append(Generation(samples=samples, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                              cached=all(hits)))
    return out


def truncate_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest occurrence of any stop string; returns (text, whether cut)."""
    cut = min((p for p in (text.find(s) for s in stop if s) if p >= 0), default=-1)
    if cut < 0:
        return text, False
    return text[:cut], True


def run_each(fn: Callable, items: Sequence, concurrency: int, on_done: Callable | None, bar) -> list:
    """``[fn(item) for item in items]`` on ``concurrency`` threads; ``on_done(k, result)`` (the cache commits it)
    and ``bar.update(1)`` in the caller's thread the moment each finishes. When one call fails, no new call
    starts, the calls already in flight finish and are handed to ``on_done`` too (no answer received is
    thrown away), then the first error is raised."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    out: list = [None] * len(items)
    error: BaseException | None = None
    pool = ThreadPoolExecutor(max_workers=concurrency)
    try:
        pending = {pool.submit(fn, item): k for k, item in enumerate(items)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                k = pending.pop(fut)
                if fut.cancelled():
                    continue
                if fut.exception() is not None:
                    error = error or fut.exception()
                    for other in pending:
                        other.cancel()  # only calls not yet started are cancelled
                    continue
                out[k] = fut.result()
                if on_done is not None:
                    on_done(k, out[k])
                bar.update(1)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if error is not None:
        raise error
    return out

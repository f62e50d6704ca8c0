"""The pieces of the HF backend's batched generation: which rows share a batch, the left-padded batch, each row's
sampler (a logits processor drawing from the row's own generator), its stopping criteria, and its decoded result."""

from __future__ import annotations

from typing import Sequence

import torch

from memlab.backends.base import GenerationRequest, Sample
from memlab.backends.jobs import SampleJob, SampleResult, sample_seed, truncate_at_stop

# a generation batch takes rows whose max_new_tokens are at most this multiple of its smallest: it runs until its
# longest budget, so a row with a short one costs at most twice its own decoding steps
BUDGET_SPREAD = 2


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class _RowSampler:
    """Logits processor: rows with a generator get one token drawn by inverse CDF from softmax(logits/T),
    restricted to the top-p nucleus; all other logits are set to -inf so the greedy step takes that token.
    Rows without a generator (greedy requests) pass through unchanged. The sampled rows' softmax and CDF are
    computed together (each row's values depend on that row alone); each row draws from its own generator."""

    def __init__(self, rows: list[tuple[float, float, torch.Generator | None]]):
        self.rows = rows
        self.sampled = [r for r, (_, _, gen) in enumerate(rows) if gen is not None]
        self.index = torch.tensor(self.sampled, dtype=torch.long)
        self.temperature = torch.tensor([rows[r][0] for r in self.sampled], dtype=torch.float64).unsqueeze(1)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if not self.sampled:
            return scores
        # on CPU in float64: the rows' generators live on CPU, and float64 keeps the CDF exact enough that padded
        # vs unpadded logits almost never move a draw across a token boundary
        logits = scores.detach().index_select(0, self.index.to(scores.device)).to("cpu", torch.float64)
        probs = torch.softmax(logits / self.temperature, dim=-1)
        for j, r in enumerate(self.sampled):
            top_p = self.rows[r][1]
            if top_p < 1.0:
                sorted_p, order = torch.sort(probs[j], descending=True, stable=True)
                # keep the smallest prefix whose mass reaches top_p (always at least the top token)
                keep_sorted = (torch.cumsum(sorted_p, 0) - sorted_p) < top_p
                keep = torch.zeros_like(probs[j], dtype=torch.bool)
                keep[order[keep_sorted]] = True
                probs[j] = torch.where(keep, probs[j], torch.zeros_like(probs[j]))
        cdf = torch.cumsum(probs, dim=1)
        u = torch.stack([torch.rand((), generator=self.rows[r][2], dtype=torch.float64) for r in self.sampled])
        picks = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
        picks = picks.clamp(max=probs.shape[1] - 1)
        masked = (probs.gather(1, picks.unsqueeze(1)).squeeze(1) == 0).tolist()
        picks = picks.tolist()
        for j in (j for j, zero in enumerate(masked) if zero):  # float edge: never pick a masked token
            tok = picks[j]
            while probs[j, tok] == 0 and tok > 0:
                tok -= 1
            picks[j] = tok
        rows = self.index.to(scores.device)
        scores[rows] = float("-inf")
        scores[rows, torch.tensor(picks, device=scores.device)] = 0.0
        return scores


class _RowBudgets:
    """Stopping criterion: a row is done once it has generated its own ``max_new_tokens`` (rows of one batch
    may have different budgets; the batch runs until its last row is done)."""

    def __init__(self, prompt_len: int, budgets: Sequence[int]):
        self.prompt_len, self.budgets = prompt_len, torch.tensor(list(budgets))

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        return (input_ids.shape[1] - self.prompt_len) >= self.budgets.to(input_ids.device)


class _StopStrings:
    """Stopping criterion: a row is done once its *generated* text (prompt excluded) contains a stop string.
    Records the sequence length at which each row first stopped."""

    def __init__(self, tokenizer, prompt_len: int, stop: Sequence[str]):
        self.tokenizer, self.prompt_len, self.stop = tokenizer, prompt_len, tuple(s for s in stop if s)
        self.stopped_at: dict[int, int] = {}

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_len:], skip_special_tokens=True)
        for r, text in enumerate(texts):
            if r in self.stopped_at or any(s in text for s in self.stop):
                self.stopped_at.setdefault(r, input_ids.shape[1])
                done[r] = True
        return done



def plan_batches(jobs: Sequence[SampleJob], ids_of: dict[GenerationRequest, list[int]],
                 batch_size: int) -> list[list[int]]:
    """Job indices in batches: a batch shares stop strings; each row stops at its own max_new_tokens, and a batch
    takes rows whose budgets are within BUDGET_SPREAD of its smallest (sorted by budget, then longest prompt first:
    little padding; then by tokens, so rows that share a prefix are neighbours and share its prefill). The order
    does not change any output (see memlab.backends.hf)."""
    order = sorted(range(len(jobs)), key=lambda k: (jobs[k].request.stop, jobs[k].request.max_new_tokens,
                                                    -len(ids_of[jobs[k].request]), ids_of[jobs[k].request], k))
    batches: list[list[int]] = []
    for k in order:
        r, first = jobs[k].request, (jobs[batches[-1][0]].request if batches else None)
        if first is not None and len(batches[-1]) < batch_size and first.stop == r.stop and \
                r.max_new_tokens <= BUDGET_SPREAD * max(first.max_new_tokens, 1):
            batches[-1].append(k)
        else:
            batches.append([k])
    return batches


def left_padded(prompts: Sequence[list[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of ``prompts`` left-padded to the longest."""
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        input_ids[r, width - len(p):] = torch.tensor(p, dtype=torch.long)
        attention[r, width - len(p):] = 1
    return input_ids, attention


def sampler_rows(jobs: Sequence[SampleJob]) -> list[tuple[float, float, torch.Generator | None]]:
    """Each row's (temperature, top_p, generator) for :class:`_RowSampler`: no generator for a greedy request."""
    rows = []
    for job in jobs:
        rq = job.request
        if rq.temperature == 0:
            rows.append((0.0, 1.0, None))
        else:
            g = torch.Generator(device="cpu")
            g.manual_seed(sample_seed(rq.seed, job.index))
            rows.append((float(rq.temperature), float(rq.top_p), g))
    return rows


def decoded_results(tokenizer, seqs: torch.Tensor, prompts: Sequence[list[int]], width: int, budgets: Sequence[int],
                    eos_token_ids: Sequence[int], stopper: _StopStrings | None,
                    stop: Sequence[str]) -> list[SampleResult]:
    """Each row's new tokens (cut at its budget, its first EOS, or its stop string) as a SampleResult."""
    results = []
    eos = set(eos_token_ids)
    for r, p in enumerate(prompts):
        end = stopper.stopped_at.get(r, seqs.shape[1]) if stopper else seqs.shape[1]
        new = seqs[r, width:min(end, width + budgets[r])].tolist()
        finish = "length"
        cut = next((j for j, t in enumerate(new) if t in eos), None)
        if cut is not None:
            new, finish = new[:cut], "eos"
        text = tokenizer.decode(new, skip_special_tokens=True)
        text, stopped = truncate_at_stop(text, stop)
        if stopped:
            finish = "stop"
        n_completion = len(new) + (1 if finish == "eos" else 0)
        results.append(SampleResult(Sample(text, new, finish), len(p), n_completion))
    return results

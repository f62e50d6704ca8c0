"""Hugging Face transformers backend: a local folder, a GGUF file, or a hub id (when the hub is reachable).

Generation is batched with LEFT padding (decoder-only models continue from the last real token). Greedy
when ``temperature == 0``. Sampling draws every row from its own ``torch.Generator`` seeded with
:func:`memlab.backends.jobs.sample_seed` ``(seed, i)``: a logits processor draws the row's token by inverse
CDF, masks every other logit, and HF's greedy step then picks it. So sample ``i`` of a request never depends
on the batch it ran in (up to float rounding of padded vs unpadded attention, which the tests check on a
real tiny model). Before decoding, each row's prompt is prefilled from the longest prefix it shares with a row
of its batch already computed (a request's samples, PEARL's perturbation levels, a shared chat template): the
same tokens as a padded batch prefill (tested), at a fraction of its cost where prompts overlap.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from safetensors import SafetensorError
from tqdm.auto import tqdm

from memlab.backends.base import GenerationRequest, Message, Sample, TokenScores, Usage, render_plain_chat
from memlab.backends.jobs import OnDone, PerSampleBackend, SampleJob, SampleResult, sample_seed, truncate_at_stop
from memlab.backends.score_bos import check_score_bos, score_bos_of, without_lead
from memlab.errors import ConfigError, MemlabError
from memlab.gguf_parse import one_gguf_parse

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# besides the weights, what changes outputs: architecture, tokenizer, chat template, EOS ids
_CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "chat_template.jinja", "chat_template.json")
_REVISIONS: dict[tuple, str] = {}
# a generation batch takes rows whose max_new_tokens are at most this multiple of its smallest: it runs until its
# longest budget, so a row with a short one costs at most twice its own decoding steps
BUDGET_SPREAD = 2
_MODELS_HINT = "build the offline models with `make models` (= `dvc repro --glob 'model-*' 'zoo-*'`)"


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _looks_like_hub_id(path: str) -> bool:
    """A hub id ("org/name" or "name"), not a path: no leading / . ~, no .gguf, not under an existing folder
    (so a missing "models/x" is reported as an unbuilt model, not as a hub id)."""
    if path.startswith(("/", ".", "~")) or path.count("/") > 1 or "\\" in path or path.endswith(".gguf"):
        return False
    parent = Path(path).parent
    return str(parent) == "." or not parent.is_dir()


def weights_revision(folder: Path, gguf_file: str | None = None) -> str:
    """Short content hash (12 hex of sha256) of a local model: its weight files (or the GGUF file), plus
    the config, tokenizer and chat-template files, so any change to what the model computes changes it."""
    folder = Path(folder)
    if gguf_file:
        files = [folder / gguf_file]
    else:
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    files += [folder / n for n in _CONFIG_FILES if (folder / n).is_file()]
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if stamp in _REVISIONS:  # same files, unchanged since hashed in this process
        return _REVISIONS[stamp]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    _REVISIONS[stamp] = h.hexdigest()[:12]
    return _REVISIONS[stamp]


@functools.cache
def bf16_slowdown() -> float:
    """How many times slower a bfloat16 matrix product is than a float32 one on this CPU, at the current torch
    thread count (best of 5, a 128×512 by 512×512 product: ~1 ms). Below 1 on CPUs with bf16 matrix units (AMX,
    AVX512-BF16, Arm BF16); several times above 1 without them (measured here with oneDNN limited to AVX2: ~9×)."""
    def best(dtype: torch.dtype) -> float:
        a, b = torch.ones(128, 512, dtype=dtype), torch.ones(512, 512, dtype=dtype)
        times = []
        for _ in range(6):
            t0 = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t0)
        return min(times[1:])  # the first call pays one-time kernel setup
    return best(torch.bfloat16) / best(torch.float32)


BF16_IF_FAST = "bfloat16_if_fast"  # bfloat16 where this CPU multiplies it faster than float32, else float32


def bf16_is_fast() -> bool:
    """Whether this CPU multiplies bfloat16 faster than float32 (bf16 matrix units: :func:`bf16_slowdown` < 1;
    measured 0.29 with AMX, 9–50 on AVX2-only CPUs, so the cut is far from both)."""
    return bf16_slowdown() < 1


def _resolve_bf16_if_fast(device: str) -> str:
    """``bfloat16`` on a GPU with bf16 or on a CPU with bf16 matrix units, else ``float32`` (one line says why): the
    dtype loaded is the backend's numerics (cache key) and ``run.json`` records it."""
    if device != "cpu":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    if (ratio := bf16_slowdown()) < 1:
        return "bfloat16"
    print(f"memlab: model.dtype={BF16_IF_FAST} → float32: a bfloat16 product is {ratio:.0f}× slower than float32 "
          "on this CPU (no bf16 matrix units)", file=sys.stderr)
    return "float32"


def _warn_if_bf16_is_slow(dtype: torch.dtype, device: torch.device) -> None:
    if dtype == torch.bfloat16 and device.type == "cpu" and (ratio := bf16_slowdown()) > 1.5:
        print(f"memlab: warning: model.dtype=bfloat16 runs {ratio:.0f}× slower than float32 on this CPU (no bf16 "
              "matrix units); set model.dtype=float32 for speed (its answers differ slightly from bf16's)",
              file=sys.stderr)


# An output layer this wide, applied to this few rows (decoding steps; prefill keeps only its last position), runs
# faster as weight @ rows.T than as rows @ weight.T on CPU BLAS: Gemma-3's 262144 × 640 layer, 8 rows: 294 → 180 ms,
# 6 rows 296 → 134 ms; SmolLM2's 49152 × 576, 8 rows: 42 → 31 ms (one core, AVX2; medians of 7; `make bench
# --only backends` reports it). Layers of zoo size (2048 words) and the hidden layers gain nothing (measured).
TALL_OUTPUT_WORDS = 32768
TALL_OUTPUT_MAX_ROWS = 64


def _transposed_output_layer(model) -> None:
    """Compute a wide output layer as weight @ rows.T for at most TALL_OUTPUT_MAX_ROWS rows (the same dot products;
    the summation order inside each is the BLAS kernel's)."""
    head = model.get_output_embeddings()
    if type(head) is not torch.nn.Linear or head.out_features < TALL_OUTPUT_WORDS:
        return
    linear = head.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] > TALL_OUTPUT_MAX_ROWS or x.device.type != "cpu":
            return linear(x)
        out = torch.mm(head.weight, rows.T).T
        if head.bias is not None:
            out = out + head.bias
        return out.contiguous().reshape(*x.shape[:-1], head.out_features)

    head.forward = forward


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
    Rows without a generator (greedy requests) pass through unchanged."""

    def __init__(self, rows: list[tuple[float, float, torch.Generator | None]]):
        self.rows = rows

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for r, (temperature, top_p, gen) in enumerate(self.rows):
            if gen is None:
                continue
            # on CPU in float64: the row's generator lives on CPU, and float64 keeps the CDF exact enough that
            # padded vs unpadded logits almost never move a draw across a token boundary
            probs = torch.softmax(scores[r].detach().to("cpu", torch.float64) / temperature, dim=-1)
            if top_p < 1.0:
                sorted_p, order = torch.sort(probs, descending=True, stable=True)
                # keep the smallest prefix whose mass reaches top_p (always at least the top token)
                keep_sorted = (torch.cumsum(sorted_p, 0) - sorted_p) < top_p
                keep = torch.zeros_like(probs, dtype=torch.bool)
                keep[order[keep_sorted]] = True
                probs = torch.where(keep, probs, torch.zeros_like(probs))
            cdf = torch.cumsum(probs, 0)
            u = torch.rand((), generator=gen, dtype=torch.float64) * cdf[-1]
            tok = int(torch.searchsorted(cdf, u, right=True).clamp(max=probs.numel() - 1))
            while probs[tok] == 0 and tok > 0:  # float edge: never pick a masked token
                tok -= 1
            scores[r] = float("-inf")
            scores[r, tok] = 0.0
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


class HFBackend(PerSampleBackend):
    """A causal LM loaded with ``transformers``; exposes ``.model`` and ``.tokenizer``."""

    def __init__(self, path: str, *, gguf_file: str | None = None, revision: str | None = "auto",
                 device: str = "cpu", dtype: str = "float32", threads: int | None = None, batch_size: int = 8,
                 score_batch_size: int | None = None, chat_template: str = "auto", name: str | None = None,
                 trust_remote_code: bool = False, kv_cache: str = "dynamic", score_bos: str | None = None):
        super().__init__()
        self.score_bos = check_score_bos(score_bos, str(name or path))  # backends/score_bos.py; no default
        self.score_variant = "bos=prepend" if self.score_bos == "prepend" else None  # in the score cache key
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        if threads:
            torch.set_num_threads(int(threads))
        if int(batch_size) < 1:
            raise ConfigError(f"model.batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)  # rows per generation pass
        # rows per teacher-forced scoring pass: it holds all-position logits, rows × tokens × vocab floats
        # (Gemma's 262k vocabulary: 8 rows × 512 tokens ≈ 4.3 GB), so it has its own bound
        self.score_batch_size = int(batch_size if score_batch_size is None else score_batch_size)
        if self.score_batch_size < 1:
            raise ConfigError(f"model.score_batch_size must be >= 1, got {score_batch_size}")
        if kv_cache not in ("dynamic", "static"):
            raise ConfigError(f"model.kv_cache must be dynamic or static, got {kv_cache!r}")
        # static: one buffer per batch of prompt + max_new_tokens positions, written in place (no copy of the
        # whole cache at every step); for small models that copy is a quarter of a decoding step
        self.kv_cache = kv_cache
        if dtype not in _DTYPES and dtype not in ("auto", BF16_IF_FAST):
            raise ConfigError(f"model.dtype must be one of {sorted(_DTYPES)}, auto or {BF16_IF_FAST}, got {dtype!r}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype == BF16_IF_FAST:
            dtype = _resolve_bf16_if_fast(device)
        torch_dtype: Any = "auto" if dtype == "auto" else _DTYPES[dtype]
        self.device = torch.device(device)

        path = str(path)
        if path.endswith(".gguf") and not gguf_file:
            path, gguf_file = str(Path(path).parent), Path(path).name
        local = Path(path).expanduser()
        kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        is_hub = False
        kwargs.update({"gguf_file": gguf_file} if gguf_file else {})
        if local.is_dir():
            if gguf_file and not (local / gguf_file).is_file():
                raise MemlabError(f"GGUF file {local / gguf_file} not found; {_MODELS_HINT} or fix model.gguf_file")
            source, self.revision = str(local), (revision if revision not in (None, "auto")
                                                 else weights_revision(local, gguf_file))
            self.model_id = name or (Path(gguf_file).stem if gguf_file else local.name)
        elif _looks_like_hub_id(path):
            hub_rev = None if revision in (None, "auto") else str(revision)
            if hub_rev:
                kwargs["revision"] = hub_rev
            if _hub_offline():
                kwargs["local_files_only"] = True  # a copy already in the HF cache still works offline
            source, self.model_id, self.revision = path, path, hub_rev or "main"
            is_hub = True
        else:
            raise MemlabError(f"model folder {local} does not exist; {_MODELS_HINT} or point model.path at a "
                              "local model folder")

        try:
            with one_gguf_parse() if gguf_file else nullcontext():
                self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
                self.model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kwargs)
        except (OSError, ValueError, SafetensorError) as err:  # SafetensorError: a truncated model.safetensors
            if source == path and not local.is_dir():
                if _hub_offline():
                    raise MemlabError(f"model {path!r} is not a local folder and the Hugging Face hub is offline "
                                      "(HF_HUB_OFFLINE=1); set model.path to a local model folder, e.g. one "
                                      "under models/ built by `make models`") from None
                raise MemlabError(f"could not load {path!r} from the Hugging Face hub "
                                  f"({str(err).splitlines()[0][:160]}); check the id/revision or use a local "
                                  "folder") from None
            raise MemlabError(f"could not load the model at {source} ({str(err).splitlines()[0][:160]}); "
                              f"rebuild it with `make models`") from None
        if is_hub:  # a branch or tag (main, step143000) can move: pin the commit the files came from
            commit = getattr(self.model.config, "_commit_hash", None)
            self.revision = commit[:12] if commit else self.revision
        self.model.to(self.device).eval()
        _transposed_output_layer(self.model)
        # bf16 and fp32 answers differ, so may (in the last bits) those of a static and a dynamic cache: keyed apart
        self.numerics = str(self.model.dtype).removeprefix("torch.") + ("/static-kv" if kv_cache == "static" else "")
        _warn_if_bf16_is_slow(self.model.dtype, self.device)

        tok = self.tokenizer
        tok.padding_side = "left"
        gen_eos = self.model.generation_config.eos_token_id
        eos = set(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos] if gen_eos is not None else [])
        if tok.eos_token_id is not None:
            eos.add(tok.eos_token_id)
        self.eos_token_ids = sorted(eos)
        self.pad_token_id = (tok.pad_token_id if tok.pad_token_id is not None
                             else self.eos_token_ids[0] if self.eos_token_ids else 0)
        # transformers fills every generation field we leave unset from the model's generation_config.json
        # (repetition penalties, n-gram blocking, ...). Decoding here is defined by the request alone, so the
        # model's defaults are kept aside (``shipped_generation_config``) and replaced by neutral ones.
        self.shipped_generation_config = self.model.generation_config
        self.model.generation_config = GenerationConfig(
            bos_token_id=self.model.generation_config.bos_token_id, eos_token_id=self.eos_token_ids or None,
            pad_token_id=self.pad_token_id)
        if chat_template not in ("auto", "none"):
            raise ConfigError(f"model.chat_template must be auto or none, got {chat_template!r}")
        self.has_chat_template = chat_template == "auto" and bool(getattr(tok, "chat_template", None))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "HFBackend":
        if not cfg.get("path"):
            raise ConfigError("model.path is required for backend: hf (a local folder, a .gguf file or a hub id)")
        return cls(cfg["path"], gguf_file=cfg.get("gguf_file"), revision=cfg.get("revision", "auto"),
                   device=cfg.get("device", "cpu"), dtype=cfg.get("dtype", "float32"), threads=cfg.get("threads"),
                   batch_size=cfg.get("batch_size", 8), score_batch_size=cfg.get("score_batch_size"),
                   chat_template=cfg.get("chat_template", "auto"), kv_cache=cfg.get("kv_cache", "dynamic"),
                   name=cfg.get("name"), trust_remote_code=bool(cfg.get("trust_remote_code", False)),
                   score_bos=score_bos_of(cfg))

    # ---- prompts -------------------------------------------------------------------------------------------
    def render_chat(self, messages: Sequence[Message]) -> str:
        if self.has_chat_template:
            return self.tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                                      tokenize=False, add_generation_prompt=True)
        return render_plain_chat(messages)

    def prompt_ids(self, request: GenerationRequest) -> list[int]:
        """The exact token ids the model is conditioned on for ``request``."""
        if request.prompt_token_ids is not None:
            return list(request.prompt_token_ids)
        if request.messages is not None:
            text = self.render_chat(request.messages)
            # a chat template already writes BOS/special tokens itself; the plain fallback is a plain prompt
            return self.tokenizer(text, add_special_tokens=not self.has_chat_template)["input_ids"]
        return self.tokenizer(request.prompt)["input_ids"]

    # ---- generation ----------------------------------------------------------------------------------------
    def generate_samples(self, jobs: Sequence[SampleJob], *, progress: bool = False,
                         on_done: OnDone | None = None) -> list[SampleResult]:
        ids_of: dict[GenerationRequest, list[int]] = {}
        for job in jobs:
            if job.request not in ids_of:
                ids_of[job.request] = self.prompt_ids(job.request)
        # batches share stop strings; each row stops at its own max_new_tokens, and a batch takes rows whose
        # budgets are within BUDGET_SPREAD of its smallest (sorted by budget, then longest prompt first: little
        # padding; then by tokens, so rows that share a prefix are neighbours and share its prefill). The order
        # does not change any output (see module docstring).
        order = sorted(range(len(jobs)), key=lambda k: (jobs[k].request.stop, jobs[k].request.max_new_tokens,
                                                        -len(ids_of[jobs[k].request]), ids_of[jobs[k].request], k))
        batches: list[list[int]] = []
        for k in order:
            r, first = jobs[k].request, (jobs[batches[-1][0]].request if batches else None)
            if first is not None and len(batches[-1]) < self.batch_size and first.stop == r.stop and \
                    r.max_new_tokens <= BUDGET_SPREAD * max(first.max_new_tokens, 1):
                batches[-1].append(k)
            else:
                batches.append([k])
        out: list[SampleResult | None] = [None] * len(jobs)
        bar = tqdm(total=len(jobs), desc=f"generate {self.model_id}", unit="sample", disable=not progress)
        try:
            for batch in batches:
                results = self._run_batch([jobs[k] for k in batch], [ids_of[jobs[k].request] for k in batch])
                for k, res in zip(batch, results):
                    out[k] = res
                    self.usage.add(Usage(1, res.prompt_tokens, res.completion_tokens, 0.0))  # local: no cost
                    if on_done is not None:
                        on_done(k, res)
                bar.update(len(batch))
        finally:
            bar.close()
        return out  # type: ignore[return-value]

    @torch.inference_mode()
    def _run_batch(self, jobs: Sequence[SampleJob], prompts: Sequence[list[int]]) -> list[SampleResult]:
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        req0 = jobs[0].request
        bos = self.tokenizer.bos_token_id
        prompts = [p if p else [bos if bos is not None else self.pad_token_id] for p in prompts]
        budgets = [job.request.max_new_tokens for job in jobs]
        if max(budgets) == 0:
            return [SampleResult(Sample("", [], "length"), len(p), 0) for p in prompts]
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            input_ids[r, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attention[r, width - len(p):] = 1
        rows = []
        for job in jobs:
            rq = job.request
            if rq.temperature == 0:
                rows.append((0.0, 1.0, None))
            else:
                g = torch.Generator(device="cpu")
                g.manual_seed(sample_seed(rq.seed, job.index))
                rows.append((float(rq.temperature), float(rq.top_p), g))
        stopper = _StopStrings(self.tokenizer, width, req0.stop) if req0.stop else None
        criteria = [stopper] if stopper else []
        if min(budgets) < max(budgets):
            criteria.append(_RowBudgets(width, budgets))
        config = GenerationConfig(max_new_tokens=max(budgets), do_sample=False, num_beams=1,
                                  pad_token_id=self.pad_token_id, eos_token_id=self.eos_token_ids or None,
                                  cache_implementation="static" if self.kv_cache == "static" else None)
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        cache = self._shared_prefill(prompts, width, width + max(budgets))
        if cache is not None:
            config.cache_implementation = None  # generate() continues the cache it is given
        seqs = self.model.generate(
            input_ids=input_ids, attention_mask=attention, generation_config=config, past_key_values=cache,
            logits_processor=LogitsProcessorList([_RowSampler(rows)]), stopping_criteria=StoppingCriteriaList(criteria),
        ).cpu()
        results = []
        eos = set(self.eos_token_ids)
        for r, p in enumerate(prompts):
            end = stopper.stopped_at.get(r, seqs.shape[1]) if stopper else seqs.shape[1]
            new = seqs[r, width:min(end, width + budgets[r])].tolist()
            finish = "length"
            cut = next((j for j, t in enumerate(new) if t in eos), None)
            if cut is not None:
                new, finish = new[:cut], "eos"
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            text, stopped = truncate_at_stop(text, req0.stop)
            if stopped:
                finish = "stop"
            n_completion = len(new) + (1 if finish == "eos" else 0)
            results.append(SampleResult(Sample(text, new, finish), len(p), n_completion))
        return results

    def _shared_prefill(self, prompts: Sequence[list[int]], width: int, max_len: int):
        """The KV cache of the batch's prompts, each but its last token, left-padded to ``width - 1`` as the batch,
        computed row by row so that a row starts from the longest prefix it shares with a row already computed:
        the i samples of a request share their whole prompt, PEARL's perturbation levels of a document share the
        text before the first perturbed token, and all rows share the chat template and instruction. generate()
        then runs only each row's last prompt token and the new ones. Positions are a row's own (0 at its first
        real token), as generate() gives left-padded rows; the padding keys are zeros it masks out. A static cache
        is sized as generate() sizes it (``max_len``). None — generate() prefills the padded batch itself — for a
        prompt of one token, or one that reaches a sliding attention window."""
        from transformers import DynamicCache, StaticCache

        window = getattr(self.model.config.get_text_config(decoder=True), "sliding_window", None)
        if min(len(p) for p in prompts) < 2 or (window and width + 1 >= window):
            return None
        rows: list[tuple[list[int], list[tuple[torch.Tensor, torch.Tensor]]]] = []  # context, per-layer K and V
        for prompt in prompts:
            context = prompt[:-1]
            shared, donor = 0, None
            for other, kv in rows:
                n = _common_prefix(context, other)
                if n > shared:
                    shared, donor = n, kv
            if shared == len(context):
                rows.append((context, [(k[:, :, :shared], v[:, :, :shared]) for k, v in donor]))
                continue
            cache = DynamicCache(config=self.model.config)
            for i, (k, v) in enumerate(donor or []):
                cache.update(k[:, :, :shared], v[:, :, :shared], i)
            self.model(input_ids=torch.tensor([context[shared:]], device=self.device),
                       attention_mask=torch.ones((1, len(context)), dtype=torch.long, device=self.device),
                       position_ids=torch.arange(shared, len(context), device=self.device).unsqueeze(0),
                       past_key_values=cache, use_cache=True, logits_to_keep=1)
            rows.append((context, [(layer.keys, layer.values) for layer in cache.layers]))
        batch = (StaticCache(config=self.model.config, max_cache_len=max_len) if self.kv_cache == "static"
                 else DynamicCache(config=self.model.config))
        for i in range(len(rows[0][1])):
            k0, v0 = rows[0][1][i]
            keys = k0.new_zeros((len(rows), k0.shape[1], width - 1, k0.shape[3]))
            values = v0.new_zeros((len(rows), v0.shape[1], width - 1, v0.shape[3]))
            for r, (context, kv) in enumerate(rows):
                keys[r, :, width - 1 - len(context):] = kv[i][0][0]
                values[r, :, width - 1 - len(context):] = kv[i][1][0]
            batch.update(keys, values, i)
        return batch

    # ---- scoring -------------------------------------------------------------------------------------------
    def score(self, texts: Sequence[str], *, progress: bool = False,
              on_done: OnDone | None = None) -> list[TokenScores]:
        """Per-token log-probs (teacher forcing) of each text, tokenized as the model tokenizes a plain prompt.
        ``vocab_mean[j]`` = E_{v~p}[log p(v|<j)], ``vocab_std[j]`` = sqrt(Var_{v~p}[log p(v|<j)])
        (Min-K%++, Zhang et al. 2024, eq. 2). Position 0 is NaN (no context), unless ``score_bos: prepend``:
        then the text's tokens (no special tokens) are scored after the tokenizer's BOS (backends/score_bos.py)."""
        if self.score_bos == "tokenizer":
            ids = [self.tokenizer(t)["input_ids"] for t in texts]
            return self.score_token_ids(ids, progress=progress, on_done=on_done)
        bos = self.tokenizer.bos_token_id
        if bos is None:
            raise ConfigError(f"model {self.model_id}: score_bos: prepend, but its tokenizer has no BOS token; "
                              "use score_bos: tokenizer")
        ids = [[bos] + self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        done = None if on_done is None else (lambda k, ts: on_done(k, without_lead(ts)))
        return [without_lead(ts) for ts in self.score_token_ids(ids, progress=progress, on_done=done)]

    @torch.inference_mode()
    def score_token_ids(self, ids: Sequence[Sequence[int]], *, progress: bool = False,
                        on_done: OnDone | None = None) -> list[TokenScores]:
        order = sorted(range(len(ids)), key=lambda k: (-len(ids[k]), k))
        out: list[TokenScores | None] = [None] * len(ids)
        bar = tqdm(total=len(ids), desc=f"score {self.model_id}", unit="text", disable=not progress)
        try:
            for start in range(0, len(order), self.score_batch_size):
                batch = order[start:start + self.score_batch_size]
                width = max(len(ids[k]) for k in batch)
                if width == 0:
                    for k in batch:
                        out[k] = TokenScores([], [], [], [])
                        if on_done is not None:
                            on_done(k, out[k])  # type: ignore[arg-type]
                    bar.update(len(batch))
                    continue
                # right padding: a causal model never attends to the padding after a row's last token
                x = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for r, k in enumerate(batch):
                    x[r, :len(ids[k])] = torch.tensor(list(ids[k]), dtype=torch.long)
                    mask[r, :len(ids[k])] = 1
                logits = self.model(input_ids=x.to(self.device), attention_mask=mask.to(self.device)).logits
                for r, k in enumerate(batch):
                    n = len(ids[k])
                    nan = [math.nan]
                    if n <= 1:
                        out[k] = TokenScores(list(ids[k]), nan * n, nan * n, nan * n)
                    else:
                        lp = torch.log_softmax(logits[r, :n - 1].double(), dim=-1)
                        tgt = torch.tensor(list(ids[k][1:]), dtype=torch.long, device=lp.device)
                        tok_lp = lp.gather(1, tgt[:, None])[:, 0]
                        p = lp.exp()
                        plp = torch.where(p > 0, p * lp, torch.zeros_like(lp))  # 0·(-inf) := 0
                        mu = plp.sum(-1)
                        var = torch.where(p > 0, plp * lp, torch.zeros_like(lp)).sum(-1) - mu * mu
                        out[k] = TokenScores(list(ids[k]), nan + tok_lp.tolist(), nan + mu.tolist(),
                                             nan + var.clamp(min=0).sqrt().tolist())
                    self.usage.add(Usage(1, len(ids[k]), 0, 0.0))
                    if on_done is not None:
                        on_done(k, out[k])  # type: ignore[arg-type]
                bar.update(len(batch))
        finally:
            bar.close()
        return out  # type: ignore[return-value]

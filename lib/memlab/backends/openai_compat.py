"""OpenAI-compatible backend (the ``openai`` SDK): OpenAI, Anthropic, Gemini, DeepSeek, vLLM, ``transformers
serve`` — one client, many servers, picked by ``base_url`` in ``conf/model/<name>.yaml``.

- ``messages`` go to chat completions. Plain ``prompt`` / ``prompt_token_ids`` go to the legacy completions
  endpoint, unless ``chat: true`` (the server only speaks chat), where a plain prompt is sent as one user
  message and token ids are refused.
- Sample ``i`` is its own call with ``seed = api_seed(request.seed, i)``, so the cache stores exactly one
  answer per (request, i). Providers that ignore ``seed`` are not reproducible; the cache is then the record.
- Retries with exponential backoff (honouring ``Retry-After``) on 408/409/429/5xx and timeouts; a base URL
  that never answered fails at once with one line.
- ``self.usage`` counts requests, tokens and cost = in_tokens/1e6·price_in_per_mtok +
  out_tokens/1e6·price_out_per_mtok (prices are config values).

Config keys (``conf/model/<name>.yaml``): every field of :class:`memlab.backends.openai_config.OpenAIConfig`,
none defaulted in code (openai_config.py says what each means); a node missing or adding one is refused in one line.

Scoring (``score``: per-token log-probs of a text, teacher forcing) needs a server that returns log-probs of
the *prompt* tokens on ``/v1/completions``; chat APIs never do. ``can_score`` in the preset says how:

- ``echo_logprobs``: ``echo: true, logprobs: k, max_tokens: 1, temperature: 0`` (the legacy OpenAI way;
  llama-cpp-python's server started with ``--logits_all true``, vLLM). The answer lists the prompt tokens
  then the one generated token; the last ``usage.completion_tokens`` entries are dropped.
- ``prompt_logprobs``: vLLM's own field (``prompt_logprobs: k`` and ``return_token_ids: true`` in the body);
  ``choices[0].prompt_logprobs[j]`` maps token id -> {logprob, rank, decoded_token}.
- ``false`` (every chat-only API): ``score`` raises one line naming the MIA scores that are
  then unavailable (loss, zlib, Min-K%, Min-K%++).

Token ids: taken from the answer when the server gives them ("token_id:N" strings under vLLM's
``return_tokens_as_token_ids``, vLLM's ``prompt_token_ids``), else from the server's tokenizer endpoint
(llama-cpp-python ``/extras/tokenize``, vLLM ``/tokenize``); their count must equal the number of echoed
prompt tokens, or the answer is refused as misaligned (one line).

What top-k log-probs can and cannot give. Per-token log-probs ℓ_j are exact (up to the server's numerics),
so loss, perplexity, zlib ratio and Min-K% are computed exactly. Min-K%++ needs μ_j = E_{v~p} log p(v) and
σ_j² = Var_{v~p} log p(v) over the WHOLE vocabulary at each position; top-k log-probs give only the k
largest terms: with S the returned set and P_S = Σ_S p, the tail (1 − P_S) is spread over |V| − k tokens
whose log-probs are unknown (each ≤ min_S log p). So μ_j, σ_j cannot be computed exactly (μ_j is only
bounded: μ_j ≤ μ̂_j below, with equality iff P_S = 1), and under ``vocab_stats: none`` ``vocab_mean`` and
``vocab_std`` are None and Min-K%++ is unavailable (one note per backend says so).
``vocab_stats: top_k_renormalized`` is a NAMED approximation, chosen only by name: μ̂_j, σ̂_j = mean and std
of log p(v) under p renormalized over S (top-k plus the text's own token), i.e. the statistics of the distribution conditioned on v ∈ S. Scores cached
under it carry the variant in their cache key, so approximate and exact statistics never mix.

Scoring keys: can_score (echo_logprobs | prompt_logprobs | false), score_top_k (k top log-probs per position
to request; only used by vocab_stats), vocab_stats (none | top_k_renormalized), score_bos (tokenizer | prepend).
score_bos means what it means for the HF backend (backends/score_bos.py); what a server can honour:

- ``prepend`` (llama-cpp-python): the server must have prepended a BOS — seen as the one extra leading id of
  its /extras/tokenize answer — else one line says to start it with ``--kv_overrides
  tokenizer.ggml.add_bos_token=bool:true``. The echo nulls the first log-prob (the OpenAI convention), so
  ``logprobs[0]`` stays NaN here, where HF's is log p(x_0 | BOS): per-token values agree from position 1 on.
  Refused (one line) where the BOS can't be seen: ids given in the answer, ``prompt_logprobs``.
- ``tokenizer``: the server's ids must be the tokenizer's own (vLLM tokenizes as HF does); a server seen to
  prepend a BOS the ids leave out (llama-cpp-python) is refused in one line naming ``score_bos: prepend``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import json
from typing import Any, Mapping, Sequence

from tqdm.auto import tqdm

from memlab.backends.base import Sample, TokenScores, Usage
from memlab.backends.jobs import (OnDone, PerSampleBackend, SampleJob, SampleResult, api_seed, run_each,
                                  truncate_at_stop)
from memlab.backends.identity import names_weights, served_identity
from memlab.backends.openai_config import OpenAIConfig, openai_config, scoring_mode
from memlab.backends.openai_wire import (_TOKEN_ID, _BadAnswer, _answer, _first_line, _logprob_value, _retry_after,
                                        topk_renormalized_stats)
from memlab.backends.score_bos import check_score_bos
from memlab.errors import BackendError, ConfigError, MemlabError
from memlab.progress import Progress

_RETRY_STATUS = {408, 409, 429}
_MIA_UNAVAILABLE = "loss, zlib, Min-K% and Min-K%++ are unavailable for it"
_SCORE_FIX = "use an hf backend or a server with echo+logprobs (llama-cpp-python, vLLM)"


_WARNED_UNNAMED: set[tuple[str, str]] = set()


def _warn_unnamed_weights(base_url: str, model_name: str, label: str) -> None:
    """Once per (server, model) and process: the cache can't tell this model from another under its name."""
    if (base_url, model_name) in _WARNED_UNNAMED:
        return
    _WARNED_UNNAMED.add((base_url, model_name))
    print(f"memlab: warning: the server at {base_url} does not say which weights serve {model_name!r} (model "
          f"{label}), so answers cached for it may come from another model served under that name (e.g. a "
          "llama.cpp server restarted on another GGUF); set model.revision to name the weights (the GGUF's sha256, "
          "a dated snapshot) to key the cache by them", file=sys.stderr)


class ScoringUnavailable(ConfigError, NotImplementedError):
    """The preset's server can't return prompt log-probs (a ConfigError, and a NotImplementedError as the
    Backend contract asks of what a backend cannot do)."""


class OpenAICompatBackend(PerSampleBackend):
    """A model behind an OpenAI-compatible HTTP API."""

    def __init__(self, cfg: OpenAIConfig):
        super().__init__()
        import openai

        if cfg.api_key_env:
            key = os.environ.get(str(cfg.api_key_env))
            if not key:
                raise MemlabError(f"environment variable {cfg.api_key_env} is not set; export {cfg.api_key_env}="
                                  "<your API key> (model.api_key_env names the variable that holds the key)")
        else:
            key = "EMPTY"  # local servers (vLLM, transformers serve) take any key; the SDK needs a string
        self.base_url, self.model_name, self.chat_only = cfg.base_url, cfg.model_id, cfg.chat
        self.model_id = str(cfg.name or cfg.model_id)
        self.revision = str(cfg.revision or cfg.model_id)
        self.user_revision = cfg.revision  # the user's name for the weights (null: the server must name them)
        self.concurrency, self.max_retries, self.timeout = cfg.concurrency, cfg.max_retries, cfg.timeout
        self.backoff_base, self.backoff_max = cfg.backoff_base, cfg.backoff_max
        self.price_in, self.price_out = cfg.price_in_per_mtok, cfg.price_out_per_mtok
        self.max_tokens_param = cfg.max_tokens_param
        self.can_score: str | None = scoring_mode(cfg.can_score)
        self.score_top_k, self.vocab_stats = cfg.score_top_k, cfg.vocab_stats
        self.score_bos = check_score_bos(cfg.score_bos, self.model_id)
        # goes into the response cache's score key (cache.py): approximate statistics never mix with exact ones
        self.score_variant = None if cfg.vocab_stats == "none" else f"{cfg.vocab_stats}@k={cfg.score_top_k}"
        self._tokenize_route: str | None = None
        self._noted_no_pp = False
        self.retries = 0  # how many retries were needed (rate limits, 5xx, timeouts)
        self._openai = openai
        # the SDK's own retries are off: ours below log, back off and fail with one line
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=self.timeout)
        self._lock = threading.Lock()
        self._reached = False
        self._identity: dict | None = None

    def cache_identity(self) -> dict:
        """What the response cache keys this model's answers by (backends/identity.py), asked once. When the
        server names no weights (identity.names_weights) and ``model.revision`` is not set, nothing in the key
        tells another model served under the same name apart: one warning per server and model says so."""
        if self._identity is None:
            key = self.client.api_key if self.client.api_key != "EMPTY" else None  # hosted APIs list models to keys
            self._identity = served_identity(self.base_url, self.model_name, self.timeout, key)
            if not self.user_revision and not names_weights(self._identity):
                _warn_unnamed_weights(self._identity["base_url"], self.model_name, self.model_id)
        return self._identity

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "OpenAICompatBackend":
        """The backend of a ``backend: openai`` model node (every key of :class:`OpenAIConfig`, checked)."""
        return cls(openai_config(cfg))

    # ---- generation ----------------------------------------------------------------------------------------
    def generate_samples(self, jobs: Sequence[SampleJob], *, progress: bool = False,
                         on_done: OnDone | None = None) -> list[SampleResult]:
        bar = tqdm(total=len(jobs), desc=f"generate {self.model_id}", unit="sample", disable=not progress)
        try:  # each sample reaches on_done (the cache commits it) the moment it finishes, also when another fails
            return run_each(self._call, jobs, self.concurrency, on_done, bar)
        finally:
            bar.close()

    def _params(self, job: SampleJob) -> tuple[str, dict]:
        rq = job.request
        params: dict[str, Any] = {"model": self.model_name, self.max_tokens_param: rq.max_new_tokens,
                                  "temperature": rq.temperature, "seed": api_seed(rq.seed, job.index)}
        if rq.top_p < 1.0:
            params["top_p"] = rq.top_p
        if rq.stop:
            params["stop"] = list(rq.stop)
        if rq.messages is not None:
            params["messages"] = [{"role": m.role, "content": m.content} for m in rq.messages]
            return "chat", params
        if rq.prompt_token_ids is not None:
            if self.chat_only:
                raise MemlabError(f"model {self.model_id} is chat-only (chat: true): send text, not prompt_token_ids")
            params["prompt"] = list(rq.prompt_token_ids)
            params.pop("max_completion_tokens", None)
            params["max_tokens"] = rq.max_new_tokens
            return "completion", params
        if self.chat_only:
            params["messages"] = [{"role": "user", "content": rq.prompt}]
            return "chat", params
        params["prompt"] = rq.prompt
        params.pop("max_completion_tokens", None)
        params["max_tokens"] = rq.max_new_tokens
        return "completion", params

    def _call(self, job: SampleJob) -> SampleResult:
        rq = job.request
        if rq.max_new_tokens == 0:
            return SampleResult(Sample("", None, "length"), 0, 0)
        kind, params = self._params(job)
        resp, choice, text = self._with_retries(kind, params)
        text, cut = truncate_at_stop(text, rq.stop)
        reason = choice.finish_reason or "stop"
        # an API "stop" is either end-of-turn or a stop string the server already removed; we can't tell which
        finish = "stop" if cut or (reason == "stop" and rq.stop) else "length" if reason == "length" else "eos"
        usage = getattr(resp, "usage", None)
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        with self._lock:
            self.usage.add(Usage(1, p_tok, c_tok, p_tok / 1e6 * self.price_in + c_tok / 1e6 * self.price_out))
        return SampleResult(Sample(text, None, finish), p_tok, c_tok)

    def _with_retries(self, kind: str, params: dict):
        oa = self._openai
        create = self.client.chat.completions.create if kind == "chat" else self.client.completions.create
        for attempt in range(self.max_retries + 1):
            try:
                resp = create(**params)
                self._reached = True
                choice, text = _answer(kind, resp)
                return resp, choice, text
            except _BadAnswer as err:  # a proxy's HTML page, a truncated body, no choices, null content: retry
                retry_after, why = None, f"sent {err}"
            except (json.JSONDecodeError, oa.APIResponseValidationError) as err:
                self._reached = True
                retry_after, why = None, f"sent a body that is not valid JSON ({_first_line(err, 80)})"
            except oa.APITimeoutError as err:
                retry_after, why = None, f"timed out ({_first_line(err)})"
            except oa.APIConnectionError as err:
                if not self._reached:
                    raise BackendError(f"cannot reach {self.base_url} ({_first_line(err.__cause__ or err)}); start "
                                       "the server or fix model.base_url") from None
                retry_after, why = None, f"connection error ({_first_line(err)})"
            except oa.APIStatusError as err:
                self._reached = True
                status = err.status_code
                if status in (401, 403):
                    raise BackendError(f"{self.base_url} rejected the API key (HTTP {status}); check the key in "
                                       "the variable named by model.api_key_env") from None
                if status == 404:
                    raise BackendError(f"{self.base_url} has no model {self.model_name!r} or endpoint ({kind}) "
                                       f"(HTTP 404); check model.model_id and model.chat") from None
                if status not in _RETRY_STATUS and status < 500:
                    raise BackendError(f"{self.base_url} refused the request (HTTP {status}: "
                                       f"{_first_line(err)})") from None
                retry_after, why = _retry_after(err), f"HTTP {status}"
            if attempt == self.max_retries:
                if why.startswith("sent "):
                    raise BackendError(f"{self.base_url} {why} on every one of {self.max_retries + 1} tries; "
                                       "check that model.base_url points at an OpenAI-compatible server") from None
                raise BackendError(f"{self.base_url} still failing after {self.max_retries} retries ({why}); "
                                   "lower model.concurrency or raise model.max_retries") from None
            with self._lock:
                self.retries += 1
            delay = min(self.backoff_max, self.backoff_base * (2 ** attempt))
            if retry_after is not None:
                delay = min(self.backoff_max, max(delay, retry_after))
            time.sleep(delay)
        raise AssertionError("unreachable")

    # ---- scoring -------------------------------------------------------------------------------------------
    def score(self, texts: Sequence[str], *, progress: bool = False,
              on_done: OnDone | None = None, vocab: bool = True) -> list[TokenScores]:
        """Per-token log-probs of each text through the server (``can_score``; see the module docstring).
        ``logprobs[0]`` is NaN (no context); ``vocab_mean``/``vocab_std`` are None unless
        ``vocab_stats: top_k_renormalized``. ``on_done(k, scores)`` as each text finishes (the cache commits it). ``vocab`` is
        accepted and changes nothing: a server's statistics come with the log-probs."""
        if self.can_score is None:
            raise ScoringUnavailable(f"model {self.model_id}'s server can't return prompt log-probs: "
                                     f"{_MIA_UNAVAILABLE}; {_SCORE_FIX}")
        if self.can_score == "prompt_logprobs" and self.score_bos == "prepend":
            raise ConfigError(f"model {self.model_id}: score_bos: prepend can't be checked with can_score: "
                              "prompt_logprobs (the answer's ids show no BOS the server added); vLLM tokenizes as "
                              "HF does: use score_bos: tokenizer")
        if texts and self.vocab_stats == "none" and not self._noted_no_pp:
            self._noted_no_pp = True
            print(f"memlab: note: model {self.model_id} is scored from a server's top-k log-probs: Min-K%++ is "
                  "unavailable (it needs the whole vocabulary's distribution at each position); model.vocab_stats="
                  "top_k_renormalized gives a named approximation", file=sys.stderr)
        bar = tqdm(total=len(texts), desc=f"score {self.model_id}", unit="text", disable=not progress)
        try:
            if on_done is not None:   # the caller (the cache) shows the run's status line itself
                return run_each(self._score_one, [str(t) for t in texts], self.concurrency, on_done, bar)
            with Progress(f"score {self.model_id}", total=len(texts)) as status:   # a served text takes seconds
                return run_each(self._score_one, [str(t) for t in texts], self.concurrency,
                                lambda k, ts: status.advance(1, requests=1), bar)
        finally:
            bar.close()

    def _score_one(self, text: str) -> TokenScores:
        approx = self.vocab_stats != "none"
        if not text:
            return TokenScores([], [], [] if approx else None, [] if approx else None)
        k = self.score_top_k if approx else 0
        params: dict[str, Any] = {"model": self.model_name, "prompt": text, "max_tokens": 1, "temperature": 0.0}
        if self.can_score == "echo_logprobs":
            # return_tokens_as_token_ids: vLLM then names tokens "token_id:N" (others ignore the field)
            params.update(echo=True, logprobs=k, extra_body={"return_tokens_as_token_ids": True})
        else:
            params.update(extra_body={"prompt_logprobs": k, "return_token_ids": True})
        resp, choice, _ = self._with_retries("completion", params)
        usage = getattr(resp, "usage", None)
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        with self._lock:
            self.usage.add(Usage(1, p_tok, c_tok, p_tok / 1e6 * self.price_in + c_tok / 1e6 * self.price_out))
        if self.can_score == "echo_logprobs":
            ids, lps, tops = self._parse_echo(text, choice, usage)
        else:
            ids, lps, tops = self._parse_prompt_logprobs(text, choice)
        if any(x is None or not math.isfinite(x) for x in lps[1:]):
            raise BackendError(f"model {self.model_id}'s server at {self.base_url} returned a null or non-finite "
                               f"prompt log-prob; {_MIA_UNAVAILABLE}; {_SCORE_FIX}")
        logprobs = [math.nan] + [float(x) for x in lps[1:]]
        if not approx:
            return TokenScores(ids, logprobs, None, None)
        mean, std = [math.nan], [math.nan]
        for j in range(1, len(ids)):
            if not tops[j]:
                raise BackendError(f"model {self.model_id}'s server at {self.base_url} returned no top-k log-probs "
                                   f"(score_top_k: {self.score_top_k}), so vocab_stats: {self.vocab_stats} can't be "
                                   "computed; set vocab_stats: none (Min-K%++ is then unavailable)")
            m, s = topk_renormalized_stats(tops[j])
            mean.append(m)
            std.append(s)
        return TokenScores(ids, logprobs, mean, std)

    def _no_logprobs(self, how: str) -> BackendError:
        return BackendError(f"model {self.model_id}'s server at {self.base_url} returned no prompt log-probs for "
                            f"{how} (can_score: {self.can_score}): {_MIA_UNAVAILABLE}; set can_score: false in its "
                            "preset, or use an hf backend or a server with echo+logprobs (llama-cpp-python with "
                            "--logits_all true, vLLM)")

    def _misaligned(self, why: str) -> BackendError:
        return BackendError(f"model {self.model_id}'s server at {self.base_url} returned misaligned prompt log-probs "
                            f"({why}; llama-cpp-python shifts echo log-probs by one "
                            "for a GGUF that adds no BOS; start it with --kv_overrides "
                            "tokenizer.ggml.add_bos_token=bool:true, or use vLLM with can_score: prompt_logprobs)")

    def _bos_mismatch(self, bos_added: bool) -> ConfigError:
        where = f"model {self.model_id}'s server at {self.base_url}"
        if bos_added:
            return ConfigError(f"{where} prepends a BOS to every prompt, but score_bos: tokenizer scores the "
                               "tokenizer's ids alone; set model.score_bos=prepend (the llama-cpp preset's value)")
        return ConfigError(f"{where} shows no BOS before the prompt, but score_bos: prepend needs one; start "
                           "llama-cpp-python with --kv_overrides tokenizer.ggml.add_bos_token=bool:true (its "
                           "/extras/tokenize then lists the BOS), or set model.score_bos=tokenizer")

    def _parse_echo(self, text: str, choice: Any, usage: Any) -> tuple[list[int], list, list]:
        lp = getattr(choice, "logprobs", None)
        tokens = list(getattr(lp, "tokens", None) or [])
        token_lps = getattr(lp, "token_logprobs", None)
        if not tokens or token_lps is None or len(token_lps) != len(tokens):
            raise self._no_logprobs("echo: true + logprobs")
        # echo lists the prompt tokens, then the generated one(s): drop those
        n_gen = getattr(usage, "completion_tokens", None)
        n = len(tokens) - (1 if n_gen is None else max(0, int(n_gen)))
        all_tokens, tokens, token_lps = tokens, tokens[:n], list(token_lps[:n])
        tops_raw = list(getattr(lp, "top_logprobs", None) or [])[:n]
        tops_raw += [None] * (n - len(tops_raw))
        parsed = [_TOKEN_ID.fullmatch(str(t)) for t in tokens]
        if not all(parsed) and "".join(map(str, all_tokens)) == text and "".join(map(str, tokens)) != text:
            # every entry is a prompt token, none the generated one: each log-prob sits one position off
            raise self._misaligned(f"its {len(all_tokens)} echo entries spell the prompt alone, no generated token")
        bos_added = False
        if tokens and all(parsed):
            ids = [int(m.group(1)) for m in parsed]  # type: ignore[union-attr]
        else:
            ids = self._server_token_ids(text)
            if ids is None:
                raise BackendError(f"model {self.model_id}'s server at {self.base_url} returned token strings but "
                                   "no token ids, and has no tokenize endpoint (/extras/tokenize, /tokenize)")
            if len(ids) == n + 1 and n >= 0:  # a BOS the server's echo leaves out (llama-cpp-python)
                ids, bos_added = ids[1:], True
        if len(ids) != n:
            raise self._misaligned(f"{n} echoed log-probs for {len(ids)} prompt tokens")
        if bos_added != (self.score_bos == "prepend"):
            raise self._bos_mismatch(bos_added)
        tops: list[list[float]] = []
        for tok, own, top in zip(tokens, token_lps, tops_raw):
            vals = dict(top or {})
            if own is not None and str(tok) not in vals:
                vals[str(tok)] = own  # the text's own token belongs to the set S
            tops.append([float(v) for v in vals.values() if v is not None])
        return ids, token_lps, tops

    def _parse_prompt_logprobs(self, text: str, choice: Any) -> tuple[list[int], list, list]:
        extra = getattr(choice, "model_extra", None) or {}
        plp = getattr(choice, "prompt_logprobs", None) or extra.get("prompt_logprobs")
        if not plp:
            raise self._no_logprobs("prompt_logprobs")
        ids = getattr(choice, "prompt_token_ids", None) or extra.get("prompt_token_ids")
        if not ids:
            ids = self._server_token_ids(text)
            if ids is None:
                raise BackendError(f"model {self.model_id}'s server at {self.base_url} returned prompt_logprobs "
                                   "without prompt_token_ids and has no /tokenize endpoint")
        ids = [int(t) for t in ids]
        if len(ids) != len(plp):
            raise self._misaligned(f"{len(plp)} prompt_logprobs for {len(ids)} prompt tokens")
        lps: list = [None]
        tops: list[list[float]] = [[]]
        for j in range(1, len(ids)):
            entry = plp[j] or {}
            own = entry.get(str(ids[j]), entry.get(ids[j])) if isinstance(entry, dict) else None
            if own is None:
                raise self._no_logprobs("prompt_logprobs (no entry for the prompt's own token)")
            lps.append(_logprob_value(own))
            tops.append([_logprob_value(v) for v in entry.values()])
        return ids, lps, tops

    def _server_token_ids(self, text: str) -> list[int] | None:
        """Token ids of ``text`` from the server's own tokenizer (llama-cpp-python, vLLM), or None."""
        import httpx

        root = self.base_url.rstrip("/")
        root = root[:-3] if root.endswith("/v1") else root
        routes = [self._tokenize_route] if self._tokenize_route else ["/extras/tokenize", "/tokenize"]
        for route in routes:
            body = ({"input": text, "model": self.model_name} if route == "/extras/tokenize"
                    else {"model": self.model_name, "prompt": text})
            try:
                r = httpx.post(root + route, json=body, timeout=self.timeout)
                toks = r.json().get("tokens") if r.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError):
                toks = None
            if isinstance(toks, list) and all(isinstance(t, int) for t in toks):
                self._tokenize_route = route
                return toks
        return None

    def close(self) -> None:
        self.client.close()

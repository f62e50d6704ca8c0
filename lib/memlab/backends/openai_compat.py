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

Config keys (``conf/model/<name>.yaml``): name, backend: openai, base_url, api_key_env (the NAME of the
variable holding the key; null for local servers), model_id (the provider's model string), chat, concurrency
(parallel calls), max_retries, timeout (s per call), price_in_per_mtok, price_out_per_mtok; optional
backoff_base (s, default 1; the k-th retry waits backoff_base·2^k, at most backoff_max = 60 s),
max_tokens_param (max_tokens | max_completion_tokens, for APIs that renamed it), revision (defaults to
model_id; set it to a dated model snapshot so the cache key pins the weights).
"""

from __future__ import annotations

import os
import threading
import time
import json
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Mapping, Sequence

from tqdm.auto import tqdm

from memlab.backends.base import Sample, TokenScores, Usage
from memlab.backends.jobs import OnDone, PerSampleBackend, SampleJob, SampleResult, api_seed, truncate_at_stop
from memlab.errors import BackendError, ConfigError, MemlabError

_RETRY_STATUS = {408, 409, 429}


def _first_line(err: BaseException, limit: int = 200) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:limit]


class OpenAICompatBackend(PerSampleBackend):
    """A model behind an OpenAI-compatible HTTP API."""

    def __init__(self, *, base_url: str, model_id: str, api_key_env: str | None = None, name: str | None = None,
                 chat: bool = True, concurrency: int = 4, max_retries: int = 5, timeout: float = 60.0,
                 price_in_per_mtok: float = 0.0, price_out_per_mtok: float = 0.0, backoff_base: float = 1.0,
                 backoff_max: float = 60.0, max_tokens_param: str = "max_tokens", revision: str | None = None):
        super().__init__()
        import openai

        if not base_url:
            raise ConfigError("model.base_url is required for backend: openai")
        if not model_id:
            raise ConfigError("model.model_id is required for backend: openai (the provider's model string)")
        if api_key_env:
            key = os.environ.get(str(api_key_env))
            if not key:
                raise MemlabError(f"environment variable {api_key_env} is not set; export {api_key_env}=<your API "
                                  f"key> (model.api_key_env names the variable that holds the key)")
        else:
            key = "EMPTY"  # local servers (vLLM, transformers serve) take any key; the SDK needs a string
        if int(concurrency) < 1 or int(max_retries) < 0:
            raise ConfigError("model.concurrency must be >= 1 and model.max_retries >= 0")
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ConfigError("model.max_tokens_param must be max_tokens or max_completion_tokens")
        self.base_url, self.model_name, self.chat = str(base_url), str(model_id), bool(chat)
        self.model_id = str(name or model_id)
        self.revision = str(revision or model_id)
        self.concurrency, self.max_retries = int(concurrency), int(max_retries)
        self.backoff_base, self.backoff_max = float(backoff_base), float(backoff_max)
        self.price_in, self.price_out = float(price_in_per_mtok or 0.0), float(price_out_per_mtok or 0.0)
        self.max_tokens_param = max_tokens_param
        self.retries = 0  # how many retries were needed (rate limits, 5xx, timeouts)
        self._openai = openai
        # the SDK's own retries are off: ours below log, back off and fail with one line
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0, timeout=float(timeout))
        self._lock = threading.Lock()
        self._reached = False

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "OpenAICompatBackend":
        keys = ("base_url", "model_id", "api_key_env", "name", "chat", "concurrency", "max_retries", "timeout",
                "price_in_per_mtok", "price_out_per_mtok", "backoff_base", "backoff_max", "max_tokens_param",
                "revision")
        kwargs = {k: cfg[k] for k in keys if cfg.get(k) is not None}
        return cls(**kwargs)

    # ---- generation ----------------------------------------------------------------------------------------
    def generate_samples(self, jobs: Sequence[SampleJob], *, progress: bool = False,
                         on_done: OnDone | None = None) -> list[SampleResult]:
        out: list[SampleResult | None] = [None] * len(jobs)
        bar = tqdm(total=len(jobs), desc=f"generate {self.model_id}", unit="sample", disable=not progress)
        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        try:
            pending = {pool.submit(self._call, job): k for k, job in enumerate(jobs)}
            while pending:
                # FIRST_COMPLETED: hand each sample to on_done (the cache commits it) the moment it finishes, so a
                # run killed mid-batch loses only the requests in flight (FIRST_EXCEPTION waited for the batch)
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    k = pending.pop(fut)
                    res = fut.result()  # re-raises a worker's BackendError here, in the caller's thread
                    out[k] = res
                    if on_done is not None:
                        on_done(k, res)
                    bar.update(1)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
        return out  # type: ignore[return-value]

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
            if self.chat:
                raise MemlabError(f"model {self.model_id} is chat-only (chat: true): send text, not prompt_token_ids")
            params["prompt"] = list(rq.prompt_token_ids)
            params.pop("max_completion_tokens", None)
            params["max_tokens"] = rq.max_new_tokens
            return "completion", params
        if self.chat:
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

    def score(self, texts: Sequence[str], *, progress: bool = False) -> list[TokenScores]:
        raise NotImplementedError(
            "the OpenAI-compatible backend cannot score texts: chat APIs do not return log-probs of the prompt "
            "tokens (teacher forcing); use an hf backend for per-token log-probs")

    def close(self) -> None:
        self.client.close()


class _BadAnswer(Exception):
    """The server answered 200 with something that is not a usable completion (never cached)."""


def _answer(kind: str, resp: Any) -> tuple[Any, str]:
    """(choice, text) of a completion response, or _BadAnswer saying what the server sent instead."""
    if isinstance(resp, (str, bytes)):  # the SDK hands back the raw body when it is not JSON (e.g. an HTML page)
        body = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp
        raise _BadAnswer(f"a non-JSON body ({' '.join(body.split())[:60]!r})")
    choices = getattr(resp, "choices", None)
    if not choices:
        raise _BadAnswer("a response with no choices")
    choice = choices[0]
    text = getattr(getattr(choice, "message", None), "content", None) if kind == "chat" else getattr(choice, "text", None)
    if not isinstance(text, str):
        raise _BadAnswer(f"a choice whose {'message.content' if kind == 'chat' else 'text'} is {text!r}")
    return choice, text


def _retry_after(err) -> float | None:
    try:
        value = err.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None

"""RECAP benchmark: pipeline throughput on the micro GPT-NeoX, and what the response cache saves on a rerun.

``run(quick)`` returns flat numbers: events/s cold, events/s when every target call is a cache hit (a
resumed or repeated run), their ratio, target requests per event, and the agents' own time share.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


TARGET = "tiny-neox-kjv"  # the ground-truth target of conf/method/recap.yaml (plain prompts, a tiny GPT-NeoX)


def run(quick: bool = False) -> dict:
    import torch

    torch.set_num_threads(1)
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "tests"))
    from conftest import build_micro_family  # the shared micro model (cached)

    from memlab.backends.cache import CachedBackend
    from memlab.backends.factory import build_backend
    from memlab.data.echotrace import book_from_documents
    from memlab.methods.recap.pipeline import RecapRunner, ResultStore, Target
    from memlab.methods.recap.study import build_agents, extraction_agent, segment_books
    from memlab.schema import method_config

    # conf/method/recap.yaml as the studies get it; the bench only shortens events and outputs, and lets the
    # micro model's own context cap the prompt (it is not the zoo model the target names)
    method = method_config("recap", ["method.summary.target_words=60", f"method.targets.{TARGET}.max_new_tokens=32",
                                     f"method.targets.{TARGET}.max_context_tokens=null"])
    target = method.targets[TARGET]
    summary = build_agents(method)[0]

    fam = build_micro_family()
    docs = fam.members[:2] + fam.nonmembers[:2]
    t0 = time.perf_counter()
    books = [book_from_documents([d], book_id=d.id, title=d.meta.get("book", "KJV"), category="public_domain")
             for d in docs]
    segment_books(books, summary, 2 if quick else 6)
    t_segment = time.perf_counter() - t0
    n_events = sum(len(b.events) for b in books)
    hf = build_backend(fam.model_cfg, None)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        cached = CachedBackend(hf, Path(tmp) / "c.sqlite")

        def once(store_name: str) -> float:
            ex = extraction_agent(method, target, cached, summary.prompts)
            runner = RecapRunner(Target(TARGET, ex, target.price_in, target.price_out, None), build_agents(method)[1],
                                 method.recap,
                                 ResultStore(Path(tmp) / store_name))
            t = time.perf_counter()
            runner.run(books, progress=False)
            return time.perf_counter() - t

        cold = once("a.jsonl")
        requests = cached.misses
        warm = once("b.jsonl")  # new result store, same cache: every target call is a hit
        out.update(events=n_events, segment_s=t_segment, cold_s=cold, warm_s=warm,
                   events_per_s_cold=n_events / cold, events_per_s_cached=n_events / warm,
                   cache_speedup=cold / warm if warm else float("inf"),
                   target_requests_per_event=requests / n_events, warm_cache_misses=cached.misses - requests)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))

"""Run by tests/core/test_numerics_vendors.py as one process under qemu-user playing another CPU (qemu-user emulates
only the process it starts, so everything happens here: no kernels, no worker processes).

Trains a small zoo family (tiny GPT-NeoX on two KJV chapters: tokenizer, AdamW, checkpoints), generates from it
(greedy and seeded sampling), scores texts (per-token log-probs, the MIA scores), runs the metrics' numpy/scipy code
(ROUGE-L, NCD, a bootstrap interval, an exact binomial interval) and the torch ops that reach MKL (sgemm of odd
sizes, batched sgemm, exp, log, sqrt, erf, tanh), and writes the sha256 of every result as JSON:

    python tests/core/vendor_probe.py OUT.json WORKDIR [--mkl-checks-vendor]

``--mkl-checks-vendor`` is the pinned path as it was before the vendor answer (memlab._mkl_vendor): the pinned
profile's variables, but MKL asks the CPU for its vendor. The test runs it as the control that shows the
comparison can fail on the machine it runs on.
"""

import hashlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

if "--mkl-checks-vendor" in sys.argv[3:]:
    import yaml

    pinned = yaml.safe_load((ROOT / "conf/numerics/pinned.yaml").read_text())
    os.environ.update({k: str(v) for k, v in pinned["env"].items()})
    os.environ["MEMLAB_NUMERICS"] = "native"   # leaves the variables above as set, and MKL's vendor check alone

sys.path[:0] = [str(TESTS)]
import memlab  # noqa: E402,F401  (first: pins the numeric path before torch loads)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from conftest import build_test_zoo  # noqa: E402

from memlab.backends.base import GenerationRequest  # noqa: E402
from memlab.backends.factory import build_backend  # noqa: E402
from memlab.metrics import bootstrap, intervals, mia, ncd, rouge  # noqa: E402
from memlab.zoo_layout import checkpoint_dir  # noqa: E402

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
# tiny: qemu computes float vector ops in software (a few M multiply-adds per second here); the ops below take
# the sizes where MKL's sgemm differs between vendors, and AdamW's sqrt reaches MKL's vector math at any size
SIZE = {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}
FAMILY = {"name": "vendor", "description": "two-vendor probe", "members": [{**KJV, "ids": ["kjv/chapter/Ruth/1"]}],
          "nonmembers": [{**KJV, "ids": ["kjv/chapter/Jonah/1"]}], "sizes": {"m": SIZE},
          "train": {"epochs": 1, "seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0,
                    "weight_decay": 0.01}}
TEXTS = ["Now it came to pass in the days when the judges ruled, that there was a famine in the land.",
         "Now the word of the LORD came unto Jonah the son of Amittai, saying,"]


def sha(x) -> str:
    if isinstance(x, bytes):
        return hashlib.sha256(x).hexdigest()
    if isinstance(x, torch.Tensor):
        x = x.detach().contiguous().numpy()
    if isinstance(x, np.ndarray):
        return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
    return hashlib.sha256(json.dumps(x, sort_keys=True, default=float).encode()).hexdigest()


def ops() -> dict:
    g = torch.Generator().manual_seed(0)
    a, b, x = torch.randn(300, 257, generator=g), torch.randn(257, 129, generator=g), torch.randn(20000, generator=g)
    pos = x.abs() + 0.1
    out = {"torch.mm 300x257@257x129": sha(a @ b),
           "torch.bmm 8x100x65@8x65x33": sha(torch.bmm(torch.randn(8, 100, 65, generator=g),
                                                        torch.randn(8, 65, 33, generator=g)))}
    for name, t in (("exp", x), ("log", pos), ("sqrt", pos), ("erf", x), ("tanh", x)):
        out[f"torch.{name}"] = sha(getattr(torch, name)(t))
    out["grouped attention"] = sha(grouped_step(g))
    # the scoring's float64 statistics (Min-K%++'s mean and sd of log p(v), backends/hf.py): torch's float64 sqrt gave
    # other bits on an AVX-512 Intel Xeon than on the AMD EPYCs and under qemu (stop 70)
    from memlab.backends.hf import position_stats

    logits = torch.randn(200, 2048, generator=g) * 4
    out["position_stats float64"] = sha(list(position_stats(logits, torch.randint(0, 2048, (200,), generator=g))))
    out["numpy float64 exp/log"] = sha(np.log1p(np.exp(x.double().numpy())))
    out["numpy float32 matmul"] = sha(a.numpy() @ b.numpy())
    return out


def grouped_step(g: torch.Generator) -> torch.Tensor:
    """One decoding step of the zoo's grouped KV cache (backends/hf_grouped.py) at a PEARL-like shape: 7 prompts
    of 300 positions shared by 61 rows, 40 generated positions, 4 heads of 48."""
    from memlab.backends.hf_grouped import GroupedKV, attention

    rows_of = [torch.arange(i, 61, 7) for i in range(7)]
    prefix = [torch.randn(4, 300, 48, generator=g) for _ in rows_of]
    values = [torch.randn(4, 300, 48, generator=g) for _ in rows_of]
    gen_k, gen_v = torch.randn(61, 4, 40, 48, generator=g), torch.randn(61, 4, 40, 48, generator=g)
    out, _ = attention(None, torch.randn(61, 4, 1, 48, generator=g), GroupedKV(prefix, gen_k, rows_of),
                       GroupedKV(values, gen_v, rows_of), None, scaling=48 ** -0.5)
    return out


def metrics(samples: list[str]) -> dict:
    r = [rouge.rouge_l(TEXTS[0], s, stem=True) for s in samples]
    values = np.array([v.recall for v in r] + [ncd.ncd(TEXTS[1], s) for s in samples])
    boot = bootstrap.bootstrap_mean(values, n_resamples=500, seed=0)
    return {"rouge_l+ncd": sha([asdict(v) for v in r] + values.tolist()),
            "bootstrap_mean": sha(repr(boot)), "clopper_pearson": sha(intervals.clopper_pearson(3, 17))}


def main(out: Path, work: Path) -> None:
    zoo = build_test_zoo(work, FAMILY)
    result = {"weights": {}}
    models = zoo / "models"
    for f in sorted(models.rglob("*.safetensors")):
        result["weights"][str(f.relative_to(models))] = sha(f.read_bytes())
    path = checkpoint_dir(models, "vendor", "m", "final")
    backend = build_backend({"name": "vendor-probe", "backend": "hf", "path": str(path), "gguf_file": None,
                             "revision": "auto", "device": "cpu", "dtype": "float32", "threads": 1,
                             "batch_size": 4, "score_batch_size": 4, "kv_cache": "grouped", "chat_template": "auto",
                             "trust_remote_code": False, "score_bos": "tokenizer"})
    requests = [GenerationRequest(prompt=t[:40], max_new_tokens=24) for t in TEXTS]
    requests += [GenerationRequest(prompt=t[:40], max_new_tokens=24, temperature=1.0, n=2, seed=3) for t in TEXTS]
    generations = backend.generate(requests)
    samples = [s for gen in generations for s in gen.texts]
    scores = backend.score(TEXTS + samples)
    result["generations"] = sha(samples)
    result["logprobs"] = sha([s.logprobs for s in scores])
    result["mia"] = sha([dict(mia.member_scores(s, t, {"min_k": 0.2})) for s, t in zip(scores, TEXTS + samples)])
    result["metrics"] = metrics(samples)
    result["ops"] = ops()
    # (a checkout before the vendor answer has no such function: the test then fails on its bytes, not here)
    result["mkl_vendor_answered"] = getattr(memlab.numerics, "mkl_vendor_answered", lambda: False)()
    out.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

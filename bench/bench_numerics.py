"""What the pinned numeric path costs (conf/numerics/): the same work under ``numerics=pinned`` and ``native``.

Each measurement runs in its own process (the kernels are chosen when torch loads), alternating pinned / native
rounds so the machine's noise hits both alike. The work: training steps and greedy decoding of a tiny GPT-NeoX of
the zoo's size (hidden 256, 4 layers, vocab 4096) in float32 on one thread. On an AVX2-only CPU both paths run the
same kernels (ratio ≈ 1); on an AVX-512/AMX CPU the ratio is what pinning gives up there.

A third variant, ``pinned_vendor_check``, is the pinned path without the vendor answer (memlab._mkl_vendor): the
same variables, MKL left to check the CPU vendor (the default path before issue 46). pinned / pinned_vendor_check
is what answering "Intel" costs: nothing on an Intel CPU (MKL gets the answer the CPU gives); on an AMD CPU, the
Intel branch's speed against MKL's own AMD kernels.

``run(quick=False) -> dict``: seconds per round for each path, and the median ratio pinned / native.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

WORK = r"""
import json, sys, time
import memlab  # pins (or not) the numeric path before torch loads
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

steps, new_tokens = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = GPTNeoXConfig(vocab_size=4096, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                    intermediate_size=1024, rotary_pct=0.25, max_position_embeddings=2048)
model = GPTNeoXForCausalLM(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, 4096, (16, 256))
t0 = time.perf_counter()
for _ in range(steps):
    loss = model(input_ids=x, labels=x).loss
    opt.zero_grad(); loss.backward(); opt.step()
train = time.perf_counter() - t0
model.eval()
t0 = time.perf_counter()
with torch.no_grad():
    out = model.generate(x[:8, :32], max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
decode = time.perf_counter() - t0
print(json.dumps({"train_s": train, "decode_s": decode, "capability": torch.backends.cpu.get_cpu_capability(),
                  "final_loss": float(loss)}))
"""


VARIANTS = ("pinned", "native", "pinned_vendor_check")


def _once(variant: str, steps: int, new_tokens: int) -> dict:
    from memlab.numerics import PROFILE_ENV, child_environ

    # native: the caller's own settings, not those this process pinned; pinned_vendor_check: the pinned variables
    # under a profile that loads no vendor answer
    env = child_environ("pinned" if variant == "pinned_vendor_check" else variant)
    if variant == "pinned_vendor_check":
        env[PROFILE_ENV] = "native"
    r = subprocess.run([sys.executable, "-c", WORK, str(steps), str(new_tokens)], env=env, capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict:
    rounds, steps, new_tokens = (1, 1, 4) if quick else (3, 8, 48)
    seen: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            seen[variant].append(_once(variant, steps, new_tokens))
    out: dict = {"rounds": rounds, "train_steps": steps, "decode_tokens": new_tokens}
    for profile, runs in seen.items():
        out[profile] = {"train_s": [round(r["train_s"], 3) for r in runs],
                        "decode_s": [round(r["decode_s"], 3) for r in runs],
                        "torch_capability": runs[0]["capability"], "final_loss": runs[0]["final_loss"]}
    for part in ("train_s", "decode_s"):
        ratios = [p[part] / n[part] for p, n in zip(seen["pinned"], seen["native"])]
        out[f"ratio_pinned_over_native_{part.removesuffix('_s')}"] = round(statistics.median(ratios), 3)
        ratios = [p[part] / n[part] for p, n in zip(seen["pinned"], seen["pinned_vendor_check"])]
        out[f"ratio_pinned_over_vendor_check_{part.removesuffix('_s')}"] = round(statistics.median(ratios), 3)
    out["same_loss_bits"] = seen["pinned"][0]["final_loss"] == seen["native"][0]["final_loss"]
    return out

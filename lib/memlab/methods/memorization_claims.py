"""The rule that judges the demo's claim (conf/paper/003_pearl.yaml, ``demo_members_extractable``)."""

from __future__ import annotations

from memlab.comparison import Claim, Finding, rule
from memlab.metrics.bootstrap import bootstrap_mean


@rule("demo_members_extractable")
def members_extractable(res, c: Claim) -> Finding:
    """Last epoch, largest size: reproduced iff members' exact-continuation rate is above 0 with its 95 % bootstrap
    interval (over probes) above 0, and no non-member probe is reproduced. Our value: the members' rate."""
    df = res.tables["continuation_rate"]
    last = df[df.epoch == df.epoch.max()]
    size = list(dict.fromkeys(df["size"]))[-1]
    row = {r.split: r for r in last[last["size"] == size].itertuples()}
    mem, non = row["member"], row["nonmember"]
    hits = [1.0] * int(mem.exact) + [0.0] * (int(mem.n) - int(mem.exact))
    r = bootstrap_mean(hits, n_resamples=1000, seed=0)
    ok = r.ci_low > 0 and int(non.exact) == 0
    return Finding(float(mem.rate), (r.ci_low, r.ci_high), f"tiny GPT-NeoX size {size}, epoch {int(mem.epoch)}, "
                   f"{int(mem.n)} probes per split", "reproduced" if ok else "not reproduced",
                   f"members {int(mem.exact)}/{int(mem.n)}, non-members {int(non.exact)}/{int(non.n)} reproduced exactly")

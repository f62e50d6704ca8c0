"""The demo's sanity check (conf/paper/003_pearl.yaml, ``demo_members_extractable``, ``kind: sanity``)."""

from __future__ import annotations

from memlab.comparison import Check, Claim, rule
from memlab.metrics.intervals import wilson


@rule("demo_members_extractable")
def members_extractable(res, c: Claim) -> Check:
    """Sanity: at the last epoch of the largest size, members are extractable (the Wilson 95 % interval of their
    exact-continuation rate lies above 0) and no non-member probe (the control) is reproduced."""
    df = res.tables["continuation_rate"]
    last = df[df.epoch == df.epoch.max()]
    size = list(dict.fromkeys(df["size"]))[-1]
    row = {r.split: r for r in last[last["size"] == size].itertuples()}
    mem, non = row["member"], row["nonmember"]
    lo, hi = wilson(int(mem.exact), int(mem.n))
    return Check(float(mem.rate), "share of non-member probes reproduced exactly", float(non.rate),
                 lo > 0 and int(non.exact) == 0,
                 f"size {size}, epoch {int(mem.epoch)}: members {int(mem.exact)}/{int(mem.n)} [{lo:.2f}, {hi:.2f}], "
                 f"non-members {int(non.exact)}/{int(non.n)}")

"""PEARL's claim about whole sensitivity distributions (issue 49: tested nowhere before): the Mann–Whitney difference
in the wild (001 §4.5, Fig. 9; 003 §5, Fig. 6). Registered with the other PEARL rules (:mod:`memlab.methods.pearl.claims`
imports this module)."""

from __future__ import annotations

from dataclasses import dataclass

from memlab.comparison import Claim, Finding, claim_level, combine, full_command, rule, untestable
from memlab.metrics.intervals import rank_sum_n_to_decide

SEEN = "humaneval"   # the likely-seen source the papers single out (a key of pearl_wild's params.sources)


@dataclass(frozen=True)
class RankTest:
    """One model's Mann–Whitney U test of one task: the common-language effect P(seen > unseen) + ½ P(tie) =
    U/(n₁n₂), the one-sided p of 'greater' and of 'less', and the verdict at a two-sided level (reproduced iff
    'greater' is significant at (1 − level)/2, contradicted iff 'less' is)."""

    effect: float
    p_greater: float
    p_less: float
    verdict: str
    n_seen: int
    n_unseen: int

    def text(self, unseen: str) -> str:
        return (f"P(HumanEval > {unseen}) {self.effect:.2f} (n {self.n_seen} vs {self.n_unseen}), one-sided p "
                f"{self.p_greater:.3g} greater / {self.p_less:.3g} less")


def _pair(scores, task: str, model: str, unseen: str, score: str, level: float) -> RankTest | None:
    """HumanEval vs ``unseen`` on one model and task (scipy's Mann–Whitney U: exact without ties, else the
    tie-corrected normal approximation); None when either side has no score."""
    from scipy.stats import mannwhitneyu

    d = scores[(scores.task_kind == task) & (scores.model == model)]
    seen, other = d[d.source == SEEN][score].dropna().to_numpy(), d[d.source == unseen][score].dropna().to_numpy()
    if not len(seen) or not len(other):
        return None
    greater = mannwhitneyu(seen, other, alternative="greater")
    less = float(mannwhitneyu(seen, other, alternative="less").pvalue)
    side = (1 - level) / 2
    verdict = "reproduced" if greater.pvalue < side else "contradicted" if less < side else "inconclusive"
    return RankTest(float(greater.statistic) / (len(seen) * len(other)), float(greater.pvalue), less, verdict,
                    len(seen), len(other))


@rule("pearl_wild_code_median_difference")
def code_median_difference(res, c: Claim) -> Finding:
    """Hypothesis: on completion, HumanEval's PEARL scores (the run's decision score) lie above those of code released
    after the model (its domain's known-unseen source; the paper compares HumanEval with NYT, which this run does not
    have). One two-sided Mann–Whitney U test per model, at a Bonferroni level over the models: reproduced iff every
    model's HumanEval lies significantly above, contradicted iff one model's lies significantly below. No threshold
    is fitted, so the known-unseen source's calibration and evaluation halves both count. Summarization's test is
    reported beside it, not judged (the paper's "no longer significant" is an absence a test cannot show). Our value:
    the common-language effect P(HumanEval > unseen) + ½ P(tie), the mean over models."""
    p, score = res.params, res.method.decision_score
    scores = res.tables.get("pearl_scores")
    if SEEN not in p.sources or scores is None:
        return untestable("no HumanEval source", "the run scored no HumanEval documents", full_command("pearl_wild"))
    unseen = p.calibration_sources[p.sources[SEEN].domain]
    comp = scores[scores.task_kind == "completion"]
    models = sorted(set(comp[comp.source == SEEN].model))
    if not models:
        return untestable("no completion of HumanEval", "the run did not complete code (params.tasks)",
                          full_command("pearl_wild"))
    level = claim_level(c, len(models))
    out = {m: _pair(scores, "completion", m, unseen, score, level) for m in models}
    if any(t is None for t in out.values()):
        return untestable("no known-unseen code", f"a model completed no {unseen} document",
                          full_command("pearl_wild"))
    summ = {m: _pair(scores, "summarization", m, unseen, score, level) for m in models}
    verdict = combine([t.verdict for t in out.values()])
    needs = [rank_sum_n_to_decide(t.effect, level) for t in out.values() if t.verdict == "inconclusive"]
    reason = "; ".join(f"{m}: completion {t.text(unseen)}" + (f"; summarization {summ[m].text(unseen)}"
                                                              if summ[m] else "") for m, t in out.items())
    return Finding(sum(t.effect for t in out.values()) / len(out), None,
                   f"{', '.join(models)}; completion, {score}; HumanEval vs {unseen}", verdict, reason,
                   statistic=f"P(HumanEval > {unseen}) + ½ P(tie), mean over models; decided per model on the "
                   f"two-sided Mann–Whitney U test at level {level:.4g}; n = HumanEval documents per model",
                   p_value=min(t.p_greater for t in out.values()), our_n=min(t.n_seen for t in out.values()),
                   n_needed=(None if verdict != "inconclusive" or None in needs else max(needs, default=None)))

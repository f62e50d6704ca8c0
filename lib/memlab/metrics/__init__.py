"""Every measurement memlab reports, defined once, named exactly, cross-checked (issue 3).

* :mod:`~memlab.metrics.rouge`     ROUGE-L P/R/F1 (rouge-score-exact word tokens, or token ids); book ROUGE-L
                                   (seed 000 eq. 2)
* :mod:`~memlab.metrics.ncd`       NCD (zlib/lzma) and PEARL's completion score 1 − NCD
* :mod:`~memlab.metrics.passages`  RECAP 40-token passage matching with a mismatch budget (seed 000 §4.1, App. T)
* :mod:`~memlab.metrics.bootstrap` book-level bootstrap (seeded, vectorized) and its paired variant
* :mod:`~memlab.metrics.embedding` cosine of all-MiniLM-L6-v2 embeddings (seed 000 App. H)
* :mod:`~memlab.metrics.intervals` intervals and exact tests the claim rules decide on (Wilson, MOVER, McNemar…)
* :mod:`~memlab.metrics.paired`    change in a share on the same items with an interval that never collapses, and
                                   its equivalence verdict against a margin (a share "stays stable")
* :mod:`~memlab.metrics.detection` ROC/AUC (+ CI), TPR@FPR, threshold at a target FPR, Youden J
* :mod:`~memlab.metrics.low_fpr`   TPR at a target FPR (realized FPR, exact interval, resolvable at 1/n), held-out
                                   calibration, exact ROC and AUC interval from member / non-member scores
* :mod:`~memlab.metrics.extraction_probability`  exact probability p_z that a sampler (temperature, top-k, top-p)
                                   emits a suffix, and (n, p)-discoverable extraction rates (Hayes et al. 2024)
* :mod:`~memlab.metrics.mia`       loss, perplexity, zlib ratio, Min-K%, Min-K%++ from TokenScores, and the
                                   registry of MIA scores (a new one: a module in :mod:`~memlab.metrics.mia_scores`)

Submodules are imported explicitly (``from memlab.metrics.rouge import rouge_l``) so that importing one
metric never loads torch or sentence-transformers.
"""

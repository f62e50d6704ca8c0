"""PEARL: memorization detection by input-perturbation sensitivity (seeds 001 and 003).

Modules (each documents its definitions and the paper equation it implements):

* :mod:`.perturb` — seeded, nested perturbations σ(k): bit flips (intensity on UTF-8 bytes or bits) and
  WordNet synonym substitution (:mod:`.wordnet` reads Debian's wordnet-base through nltk).
* :mod:`.tasks` — text/code completion (80/20 word split, 1 − NCD) and summarization (ROUGE-L against the
  model's greedy unperturbed output); prompts in ``prompts/pearl/``.
* :mod:`.scores` — per-level performance X_k (001 eq. 2), sensitivity (001 eq. 3), GFD (003 eq. 3), decision.
* :mod:`.calibration` — FPR vs threshold on known non-members, α at a target FPR.
* :mod:`.engine` — :class:`~.engine.PearlConfig` and :func:`~.engine.run_pearl` (all prompts batched).
* :mod:`.tables` — the papers' tables from per-document rows; :mod:`.plots` — their figures.
* :mod:`.study` — one function per experiment (the five notebooks ``notebooks/pearl_*.ipynb`` only show them).
"""

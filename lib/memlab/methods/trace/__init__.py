"""SimpleTrace + PROPME (seed 002): trace generations back to a training corpus, measure memorization
capability (prefix attacks) against propensity (ordinary prompts).

Modules: ``index`` (suffix-array and infini-gram token indexes), ``simpletrace`` (steps 1–4),
``metrics`` (App. H + App. F metrics), ``propme`` (prompt sets, propensity transformation),
``experiments`` (library side of the trace_* notebooks).
"""

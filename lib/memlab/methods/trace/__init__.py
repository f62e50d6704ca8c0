"""SimpleTrace + PROPME (seed 002): trace generations back to a training corpus, measure memorization
capability (prefix attacks) against propensity (ordinary prompts).

Modules: ``index`` (suffix-array and infini-gram token indexes), ``simpletrace`` (steps 1–4),
``metrics`` (App. H + App. F metrics), ``propme`` (prompt sets, propensity transformation),
``study`` (one function per trace_* notebook), ``generation``, ``validation``, ``stages``, ``plots``.
"""

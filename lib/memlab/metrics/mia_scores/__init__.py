"""Membership-inference scores beyond the built-ins of :mod:`memlab.metrics.mia`, one module each.

:func:`memlab.metrics.mia.registered` imports every module of this package (by name order); a module registers
its score with :func:`memlab.metrics.mia.mia_score`, and the per-document MIA tables, pearl_mia and the audit pick
it up from there. A sketch (its docstring states the score's definition exactly)::

    from memlab.metrics.mia import loss, mia_score

    @mia_score("my_score", lower_is_member=True, needs_vocab=False, judged=True, settings=())
    def my_score(ts, text, settings):
        \"\"\"<the definition>\"\"\"
        return ...

A score that needs a setting names its key in ``settings=(...)`` and reads ``settings[key]``; the key goes beside
``min_k`` in the experiment's MIA settings (``params`` of pearl_mia, ``params.mia`` of the audit), and, since
those nodes are typed, as a field of their schemas (``memlab.methods.pearl.study.MiaParams``,
``memlab.audit.study.MiaSpec``).
"""

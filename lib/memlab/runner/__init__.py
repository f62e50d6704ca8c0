"""The runner: one run point composed once and resolved into a plan (:mod:`.plan`), its run key and the sweep
folder rule (:mod:`.keys`), the override check (:mod:`.known_keys`), the pre-flight before any model loads
(:mod:`.preflight`), the notebook's execution and its results (:mod:`.execute`, one run at a time per key:
:mod:`.run_lock`), and a sweep's summary (:mod:`.sweeps`, :mod:`.sweep_effects`). The command is
``python -m memlab.run`` (:mod:`memlab.run`)."""

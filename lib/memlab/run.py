"""The runner's command, ``python -m memlab.run experiment=<name> [overrides]`` (``-m`` for a sweep): the code is
:mod:`memlab.runner.execute`; this module only keeps the command short and stable."""

from memlab.runner.execute import main

if __name__ == "__main__":
    main()

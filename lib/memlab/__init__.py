"""memlab: a reproducible lab for measuring what language models memorized."""

__version__ = "0.1.0"

# Before anything loads torch or numpy: the numeric path of conf/numerics/ (memlab.numerics explains why).
from memlab import numerics as _numerics  # noqa: E402

_numerics.pin()

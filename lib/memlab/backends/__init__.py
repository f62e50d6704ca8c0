"""Model backends behind one batched interface (see base.py); build one with :func:`build_backend`."""

from memlab.backends.base import (  # noqa: F401
    Backend, Generation, GenerationRequest, Message, Sample, TokenScores, Usage, as_messages, render_plain_chat,
)
from memlab.backends.factory import build_backend  # noqa: F401

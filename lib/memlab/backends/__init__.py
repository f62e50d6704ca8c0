"""Model backends behind one batched interface (see base.py)."""

from memlab.backends.base import (  # noqa: F401
    Backend, Generation, GenerationRequest, Message, Sample, TokenScores, Usage, as_messages, render_plain_chat,
)

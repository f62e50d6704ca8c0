"""A KV cache that is written in place (``model.kv_cache: dynamic``): each layer's keys and values live in one
buffer sized for the batch's prompt and new tokens, and attention reads the filled part as a view.

transformers' ``DynamicCache`` grows by concatenation, copying the whole cache at every decoding step: for a small
model and a batch of distinct ~500-token prompts that copy was 59 % of decoding (pearl/m's shape, 64 greedy rows
× 128 tokens: 11.7 of 19.7 s, bench/bench_backends.py). Here the step writes one position. Attention sees the same
tensors (the same values, shapes and order of operations; only the memory they sit in differs), so the tokens are
the growing cache's, byte for byte (tests/backends/test_hf_kv.py compares them on a real tiny model).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class PreallocatedLayer(DynamicLayer):
    """One layer: keys and values in a buffer of ``capacity`` positions, filled left to right."""

    is_croppable = False

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.filled = capacity, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        rows, heads, _, _ = key_states.shape
        self.key_buffer = key_states.new_zeros((rows, heads, self.capacity, key_states.shape[3]))
        self.value_buffer = value_states.new_zeros((rows, heads, self.capacity, value_states.shape[3]))
        self.keys, self.values = self.key_buffer[:, :, :0], self.value_buffer[:, :, :0]
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if self.filled + n > self.capacity:
            raise RuntimeError(f"KV buffer of {self.capacity} positions is full ({self.filled} + {n})")
        self.key_buffer[:, :, self.filled:self.filled + n] = key_states
        self.value_buffer[:, :, self.filled:self.filled + n] = value_states
        self.filled += n
        self.keys, self.values = self.key_buffer[:, :, :self.filled], self.value_buffer[:, :, :self.filled]
        return self.keys, self.values


class PreallocatedCache(Cache):
    """The batch's cache: one :class:`PreallocatedLayer` of ``capacity`` positions per model layer."""

    def __init__(self, n_layers: int, capacity: int):
        super().__init__(layers=[PreallocatedLayer(capacity) for _ in range(n_layers)])

"""Grouped-prompt decoding (``model.kv_cache: grouped``): rows of a batch that share their whole prompt share
one copy of its keys and values.

PEARL asks i samples per perturbation level, so a batch of 64 rows holds ~7 distinct prompts of ~500 tokens. A
padded KV cache stores each prompt once per row, and a decoding step of a small model is then bound by reading
those copies: on the PEARL zoo model (m) attention took 54 % of decoding, almost all of it memory traffic. Here
the prompt part of the cache is kept once per distinct prompt context (each row's prompt but its last token,
unpadded) and the generated part once per row; one step's attention for a row is the softmax over both parts,
merged exactly (a shared maximum, one denominator). Padding never enters: a group's prefix has no padding and
every generated position is real.

The answers are the padded cache's up to float rounding (another summation order), so the backend keys them
apart (``numerics`` ends in ``/grouped-kv``) and they are byte-stable on every CPU under the pinned numerics, as
every other kernel here: the same matmul and exp kernels, a fixed order of operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

NAME = "memlab_grouped"


@dataclass
class GroupedKV:
    """What one layer's cache hands the attention function instead of a padded tensor: the per-group prompt part
    and the per-row generated part of either keys or values."""

    prefix: list[torch.Tensor]          # per group: (kv_heads, prompt length of the group, head_dim)
    generated: torch.Tensor             # (rows, kv_heads, generated so far, head_dim)
    rows_of: list[torch.Tensor]         # per group: the row indices (long) whose prompt context it is


class GroupedLayer(CacheLayerMixin):
    """One layer: prompt keys/values once per group, generated ones per row in a preallocated buffer."""

    is_compileable = False
    is_sliding = False
    is_croppable = False

    def __init__(self, prefix_k: list[torch.Tensor], prefix_v: list[torch.Tensor], rows_of: list[torch.Tensor],
                 n_rows: int, padded_prompt: int, max_new: int):
        super().__init__()
        self.prefix_k, self.prefix_v, self.rows_of = prefix_k, prefix_v, rows_of
        self.n_rows, self.padded_prompt, self.max_new = n_rows, padded_prompt, max_new
        self.filled = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        shape = (self.n_rows, key_states.shape[1], self.max_new + 1, key_states.shape[3])
        self.keys = key_states.new_zeros(shape)
        self.values = value_states.new_zeros((*shape[:3], value_states.shape[3]))
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        self.keys[:, :, self.filled:self.filled + n] = key_states
        self.values[:, :, self.filled:self.filled + n] = value_states
        self.filled += n
        return (GroupedKV(self.prefix_k, self.keys[:, :, :self.filled], self.rows_of),
                GroupedKV(self.prefix_v, self.values[:, :, :self.filled], self.rows_of))

    def get_seq_length(self) -> int:
        return self.padded_prompt + self.filled

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_max_length(self) -> int:
        return self.padded_prompt + self.max_new + 1


class GroupedCache(Cache):
    """The batch's cache: one :class:`GroupedLayer` per model layer."""

    def __init__(self, layers: list[GroupedLayer]):
        super().__init__(layers=layers)


def grouped_cache(contexts: list[list[int]], kv_of: list[list[tuple[torch.Tensor, torch.Tensor]]],
                  padded_prompt: int, max_new: int) -> GroupedCache:
    """The cache of a batch whose row r has prompt context ``contexts[r]`` with per-layer (K, V) of shape
    (1, kv_heads, len, head_dim) in ``kv_of[r]``; rows with the same context form one group (first row's copy)."""
    first: dict[tuple[int, ...], int] = {}
    members: dict[tuple[int, ...], list[int]] = {}
    for r, ctx in enumerate(contexts):
        key = tuple(ctx)
        first.setdefault(key, r)
        members.setdefault(key, []).append(r)
    order = list(first)   # groups in order of first appearance: a fixed order of operations
    rows_of = [torch.tensor(members[key], dtype=torch.long) for key in order]
    layers = []
    for i in range(len(kv_of[0])):
        prefix_k = [kv_of[first[key]][i][0][0] for key in order]
        prefix_v = [kv_of[first[key]][i][1][0] for key in order]
        layers.append(GroupedLayer(prefix_k, prefix_v, rows_of, len(contexts), padded_prompt, max_new))
    return GroupedCache(layers)


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function registered as ``memlab_grouped``: grouped when the cache hands it
    :class:`GroupedKV` (one query position per row), sdpa otherwise (prefill, scoring)."""
    if not isinstance(key, GroupedKV):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    rows, heads, q_len, dim = query.shape
    if q_len != 1:
        raise RuntimeError(f"grouped KV cache decodes one position per step, got {q_len}")
    kv_heads = key.generated.shape[1]
    rep = heads // kv_heads
    scale = scaling if scaling is not None else dim ** -0.5
    q = query.reshape(rows, kv_heads, rep, dim).float()                        # (rows, kv_heads, rep, dim)
    gen_scores = torch.matmul(q, key.generated.transpose(-1, -2).float()) * scale   # (rows, kv_heads, rep, t)
    best = gen_scores.amax(dim=-1, keepdim=True)
    prefix_scores = []
    for k_g, idx in zip(key.prefix, key.rows_of):
        q_g = q.index_select(0, idx).permute(1, 0, 2, 3).reshape(kv_heads, -1, dim)   # (kv_heads, n·rep, dim)
        s = torch.matmul(q_g, k_g.transpose(-1, -2).float()) * scale                   # (kv_heads, n·rep, P)
        prefix_scores.append(s)
        s_max = s.amax(dim=-1).reshape(kv_heads, len(idx), rep).permute(1, 0, 2).unsqueeze(-1)
        best[idx] = torch.maximum(best[idx], s_max)
    gen_w = torch.exp(gen_scores - best)
    total = gen_w.sum(dim=-1, keepdim=True)
    out = torch.matmul(gen_w, value.generated.float())                         # (rows, kv_heads, rep, dim)
    for s, v_g, idx in zip(prefix_scores, value.prefix, value.rows_of):
        b = best.index_select(0, idx).permute(1, 0, 2, 3).reshape(kv_heads, -1, 1)
        w = torch.exp(s - b)
        part_sum = w.sum(dim=-1).reshape(kv_heads, len(idx), rep).permute(1, 0, 2).unsqueeze(-1)
        part_out = torch.matmul(w, v_g.float()).reshape(kv_heads, len(idx), rep, -1).permute(1, 0, 2, 3)
        total[idx] += part_sum
        out[idx] += part_out
    out = (out / total).to(query.dtype).reshape(rows, heads, 1, -1)
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make ``memlab_grouped`` a transformers attention implementation (its masks are sdpa's)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(NAME, attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)

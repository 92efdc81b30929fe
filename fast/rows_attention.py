"""A decoding step's attention over each row's own slots: optional, part of the fast engine (fast/__init__.py),
used by the static decoder (fast/decoder.py) on a GPU; the CPU runs PyTorch's attention over the whole window.

PyTorch's fused attention reads every slot of the window for every row: the left padding before a row's
first token, the padding of replies that stopped early, and the rows that stopped writing this turn. A
decoding step's time is mostly that read (docs/performance.md), and in a reasoning model's rollout most rows
stop long before the longest reply of the turn. This kernel reads, for each row still writing, only the slots
from its first real token to the current one, and of those only the real tokens' keys and values (its loads
are masked by the cache's mask); for the other rows it reads nothing (their output is zero: what they compute
is never used).

The scheme is split-K decoding ("flash decoding"): the slots of a row are cut into SPLITS parts, each program
computes a softmax over its part for the query heads of one key/value head (grouped-query attention: the keys and
values are read once for the heads sharing them) and keeps its maximum score and its sum of exponentials;
fast.decoder.merge weighs the parts into the softmax over all the slots.

Proved by tests/test_fast.py on a GPU: its output equals PyTorch's attention over the same visible slots,
and greedy rollouts with it equal `generate`'s token for token.
"""
import torch
import triton
import triton.language as tl

from fast.decoder import merge

# Launch parameters, the fastest of `python bench/rows_attention.py --sweep` in the SmolLM2 preset's shape
BLOCK = 64   # slots read at once by a program
SPLITS = 2   # programs per row and key/value head: more programs when few rows are still writing
WARPS = 2    # each program's warps
STAGES = 3   # blocks whose loads are under way at once in a program's loop


@triton.jit
def rows_attention_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, writing_ptr, first_ptr, slot_ptr,
                          part_ptr, top_ptr, total_ptr, scale,
                          q_row, q_head, k_row, k_head, k_slot, mask_row,
                          GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, D: tl.constexpr,
                          BLOCK: tl.constexpr, SPLITS: tl.constexpr, PRECISION: tl.constexpr):
    """Program (row b, key/value head g, part s): the part's softmax numerator (GROUP, D), maximum score and
    sum of exponentials (GROUP,) for the query heads g*GROUP ... g*GROUP + GROUP - 1."""
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    heads = tl.arange(0, GROUP_PAD)  # tl.dot needs 16 rows at least: the extra ones are zero and not stored
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + b * q_row + (g * GROUP + heads)[:, None] * q_head + dims[None, :],
                mask=heads[:, None] < GROUP, other=0.0)                     # (GROUP_PAD, D)
    end = tl.load(slot_ptr) + 1
    start = tl.where(tl.load(writing_ptr + b) != 0, tl.load(first_ptr + b), end)  # an empty range if stopped
    per_part = tl.cdiv(tl.cdiv(end - start, SPLITS), BLOCK) * BLOCK
    lo = start + s * per_part
    hi = tl.minimum(lo + per_part, end)
    top = tl.full((GROUP_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((GROUP_PAD,), tl.float32)
    acc = tl.zeros((GROUP_PAD, D), tl.float32)
    k_start = k_ptr + b * k_row + g * k_head  # values have the keys' shape and strides
    v_start = v_ptr + b * k_row + g * k_head
    for first in range(lo, hi, BLOCK):
        slots = first + tl.arange(0, BLOCK)
        real = tl.load(mask_ptr + b * mask_row + slots, mask=slots < hi, other=0) != 0  # (BLOCK,)
        offsets = slots[:, None] * k_slot + dims[None, :]
        k = tl.load(k_start + offsets, mask=real[:, None], other=0.0)  # (BLOCK, D)
        v = tl.load(v_start + offsets, mask=real[:, None], other=0.0)
        scores = (tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale).to(tl.float32)  # (GROUP_PAD, BLOCK)
        scores = tl.where(real[None, :], scores, float("-inf"))
        new_top = tl.maximum(top, tl.max(scores, 1))
        shift = tl.where(new_top == float("-inf"), 0.0, new_top)  # no real slot yet: exp(-inf) = 0, not NaN
        p = tl.exp(scores - shift[:, None])
        rescale = tl.exp(top - shift)
        total = total * rescale + tl.sum(p, 1)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        top = new_top
    out = (b * tl.num_programs(1) * GROUP + g * GROUP + heads) * SPLITS + s  # (GROUP_PAD,) in (B, H, SPLITS)
    stored = heads < GROUP
    tl.store(top_ptr + out, top, mask=stored)
    tl.store(total_ptr + out, total, mask=stored)
    tl.store(part_ptr + out[:, None] * D + dims[None, :], acc, mask=stored[:, None])


def rows_attention(q, keys, values, rows, scale):
    """q (B, H, 1, d); keys, values (B, G, L, d) the layer's cache, its last dimension contiguous; rows: a
    fast.decoder.Rows (its window is not needed: each row's slots end at rows.slot).
    -> (B, 1, H*d), zero for the rows not writing."""
    B, H, _, d = q.shape
    G = keys.shape[1]
    group = H // G
    q = q.reshape(B, H, d)
    part = torch.empty((B, H, SPLITS, d), dtype=torch.float32, device=q.device)
    top = torch.empty((B, H, SPLITS), dtype=torch.float32, device=q.device)
    total = torch.empty((B, H, SPLITS), dtype=torch.float32, device=q.device)
    rows_attention_kernel[(B, G, SPLITS)](
        q, keys, values, rows.mask, rows.writing, rows.first, rows.slot, part, top, total, scale,
        q.stride(0), q.stride(1), keys.stride(0), keys.stride(1), keys.stride(2), rows.mask.stride(0),
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), D=d, BLOCK=BLOCK, SPLITS=SPLITS,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # float32 products exact, not TF32's
        num_warps=WARPS, num_stages=STAGES)
    return merge(part, top, total).to(q.dtype).reshape(B, 1, H * d)

"""A decoding step's attention in the SmolLM2 preset's shape (256 rows, 9 query heads, 3 key/value heads of 64,
bfloat16, a cache of 2,305 slots): PyTorch's fused attention over the whole window against the rows' kernel
(fast/rows_attention.py), each compiled and replayed from a CUDA graph as the decoder runs them, for windows of
512 to 2,048 slots, all rows writing or 30% of them, with no padding or with stretches of 70 padding slots
after every 70 real ones (replies that stopped early). Prints microseconds per call and the largest
difference on the writing rows.

    python bench/rows_attention.py            # the comparison
    python bench/rows_attention.py --sweep    # the kernel alone for each BLOCK, SPLITS, warps and stages
"""
import argparse
import itertools
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import fast.decoder as decoder  # noqa: E402
import fast.rows_attention as rows_attention  # noqa: E402
from attention_windows import graphed, microseconds  # noqa: E402  (bench/, this script's folder)

B, H, G, d, L = 256, 9, 3, 64, 2048 + 256 + 1


def rows_of(window, writing_share, padding):
    """A decoding step's Rows at the window's last slot: every slot real, or 70 padding after 70 real ones."""
    mask = torch.ones(B, L, dtype=torch.long, device="cuda")
    mask[:, window:] = 0
    if padding:
        mask[:, (torch.arange(L, device="cuda") % 140) >= 70] = 0
        mask[:, window - 1] = 1
    writing = torch.rand(B, device="cuda") < writing_share
    return decoder.Rows(mask, writing, mask.argmax(1), torch.tensor([window - 1], device="cuda"), window)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="time the kernel for each launch parameter")
    args = parser.parse_args()
    torch.manual_seed(0)
    keys, values = (torch.randn(B, G, L, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    q = torch.randn(B, H, 1, d, device="cuda", dtype=torch.bfloat16)
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, flush=True)
    if args.sweep:
        flat = q.reshape(B, H, d)
        for share, padding in ((1.0, False), (0.3, True)):
            rows, times = rows_of(1536, share, padding), []
            for block, splits, warps, stages in itertools.product((64, 128), (1, 2, 4), (2, 4, 8), (1, 2, 3, 4)):
                part = torch.empty((B, H, splits, d), device="cuda")
                top, total = torch.empty((B, H, splits), device="cuda"), torch.empty((B, H, splits), device="cuda")

                def kernel():
                    rows_attention.rows_attention_kernel[(B, G, splits)](
                        flat, keys, values, rows.mask, rows.writing, rows.first, rows.slot, part, top, total,
                        0.125, flat.stride(0), flat.stride(1), keys.stride(0), keys.stride(1), keys.stride(2),
                        rows.mask.stride(0), GROUP=H // G, GROUP_PAD=16, D=d, BLOCK=block, SPLITS=splits,
                        PRECISION="tf32", num_warps=warps, num_stages=stages)
                times.append((microseconds(graphed(kernel)), block, splits, warps, stages))
            for us, block, splits, warps, stages in sorted(times)[:10]:
                print(f"window 1536, writing {share}, padding {padding}: {us:.1f} us with BLOCK {block} "
                      f"SPLITS {splits} warps {warps} stages {stages}", flush=True)
        return
    fused = torch.compile(lambda visible: decoder.attention(q, keys, values, visible, 0.125))
    ours = torch.compile(lambda rows: rows_attention.rows_attention(q, keys, values, rows, 0.125))
    for window in (512, 1024, 1536, 2048):
        for share, padding in ((1.0, False), (1.0, True), (0.3, False), (0.3, True)):
            rows = rows_of(window, share, padding)
            visible = decoder.visible_slots(rows.mask, rows.slot, window)
            gap = (ours(rows).float() - fused(visible).float())[rows.writing].abs().max().item()
            print(f"window {window}, writing {share}, padding {padding}: PyTorch's attention "
                  f"{microseconds(graphed(lambda: fused(visible))):.1f} us, the rows' kernel "
                  f"{microseconds(graphed(lambda: ours(rows))):.1f} us, largest difference {gap:.1e}", flush=True)


if __name__ == "__main__":
    main()

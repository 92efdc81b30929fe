"""starpo.compute_gae (the readable loop over the tokens) against the fast engine's fast.compute_gae (the same
loop on CPU copies, over each row's time steps packed to the left), at two kept batches: the tiny preset's, 256 rows of 870 tokens, about
7% of them sampled; the SmolLM2 preset's while it thinks, 64 rows of 1,500 tokens, about 65% sampled.
Best of 5 each, on the CPU and, where there is one, on the GPU, and the largest difference of the numbers.

    python bench/gae_time.py
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import fast  # noqa: E402
import starpo  # noqa: E402


def best_of_5(gae, *args):
    times = []
    for _ in range(5):
        if args[0].is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = gae(*args, 1.0, 0.95)
        if args[0].is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times), out


torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for name, (B, T, share) in {"tiny": (256, 870, 0.07), "smollm2": (64, 1500, 0.65)}.items():
    mask = (torch.rand(B, T) < share).float()  # (B, T)
    rewards, values = torch.zeros(B, T), torch.randn(B, T)
    rewards[:, -1] = torch.randn(B)
    for device in devices:
        args = [x.to(device) for x in (rewards, values, mask)]
        loop_s, (loop_adv, _) = best_of_5(starpo.compute_gae, *args)
        fast_s, (fast_adv, _) = best_of_5(fast.compute_gae, *args)
        print(f"{name} batch ({B} x {T}, {int(mask.sum(1).max())} steps at most) on {device}: compute_gae "
              f"{loop_s * 1e3:.1f} ms, fast.compute_gae {fast_s * 1e3:.1f} ms; largest difference of the "
              f"advantages {float((loop_adv - fast_adv).abs().max()):.1e}", flush=True)

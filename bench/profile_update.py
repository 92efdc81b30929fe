"""Where does the update's time go? One iteration of the benchmark setup (`--bench`), then a second one
whose scoring (step 3) and update (step 5) run under torch.profiler; prints the kernels that take the
most GPU time.

    python bench/profile_update.py [section.key=value ...]     # e.g. algo.micro_batch_size=8
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
import starpo  # noqa: E402
from config import load_config  # noqa: E402

overrides = ["model.name=random-qwen2.5-0.5b", "rollout.max_new_tokens=128", "rollout.min_new_tokens=128",
             "eval.every=0", "checkpoint.every=0", "run_dir=/tmp/profile_update"] + sys.argv[1:]
run = ragen_mini.setup(load_config(None, overrides), None)
cfg, P, N = run.cfg, run.cfg.rollout.groups, run.cfg.rollout.group_size
for label in ("warm-up", "profiled"):
    seeds = run.seed_rng.integers(0, cfg.eval.seed_offset, size=P)
    policy = rollout.LLMPolicy(run.sampler, run.chat, cfg, cfg.rollout.temperature, run.decoder)
    trajectories = rollout.play_episodes(policy, run.chat, cfg, np.repeat(seeds, N), np.repeat(np.arange(P), N))
    rewards, group_ids = torch.tensor([t.reward for t in trajectories]), torch.tensor([t.group for t in trajectories])
    keep = starpo.select_groups_by_reward_std(rewards, group_ids, cfg.algo.filter_ratio, cfg.algo.filter_largest)
    batch = ragen_mini.collate([t for t, k in zip(trajectories, keep.tolist()) if k], run.chat.pad_id, run.device)
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
    torch.cuda.synchronize()
    if label == "profiled":
        profiler.start()
    start = time.perf_counter()
    ragen_mini.old_logprobs_and_values(batch, run.actor, run.critic, run.reference, cfg, run.device)
    torch.cuda.synchronize()
    scored = time.perf_counter()
    ragen_mini.compute_advantages(batch, cfg)
    ragen_mini.update(batch, run.actor, run.critic, run.optimizers["actor"], run.optimizers.get("critic"), cfg,
                      run.device, run.generator)
    torch.cuda.synchronize()
    if label == "profiled":
        profiler.stop()
    print(f"{label}: {len(batch.rewards)} trajectories of up to {batch.input_ids.shape[1]} tokens, "
          f"{int(batch.response_mask.sum())} sampled; scoring {scored - start:.2f} s, update {time.perf_counter() - scored:.2f} s")
print(profiler.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))

"""Where does the time of scoring (step 3) and the update (step 5) go on a GPU? Builds a batch of the benchmark's
shape, runs scoring, advantages and update on it `--repeats` times (the first compiles), profiles the last
with torch.profiler, and prints the kernels that take the most GPU time, the operations that take the most host
time, and how busy the GPU was.

    python bench/profile_update.py [section.key=value ...]                # the batch of a real rollout
    python bench/profile_update.py --synthetic bench --repeats 5          # random tokens of the same shape
    python bench/profile_update.py --synthetic tiny --repeats 6 --config configs/tiny-gpu.yaml env.name=sokoban

--synthetic skips the rollout and the decoder's compilation (SHAPES below). Every repeat scores and trains
on the same batch, so its widths repeat, where a real run's change every iteration.
"""
import argparse
import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
import starpo  # noqa: E402
from config import load_config  # noqa: E402


def real_trajectories(run):
    """One rollout of the run's policy, filtered as in training."""
    cfg, P, N = run.cfg, run.cfg.rollout.groups, run.cfg.rollout.group_size
    seeds = run.seed_rng.integers(0, cfg.eval.seed_offset, size=P)
    policy = rollout.LLMPolicy(run.sampler, cfg, cfg.rollout.temperature)
    trajectories = rollout.play_episodes(policy, run.chat, cfg, np.repeat(seeds, N), np.repeat(np.arange(P), N))
    rewards, group_ids = torch.tensor([t.reward for t in trajectories]), torch.tensor([t.group for t in trajectories])
    keep = starpo.select_groups_by_reward_std(rewards, group_ids, cfg.algo.filter_ratio, cfg.algo.filter_largest)
    return [t for t, k in zip(trajectories, keep.tolist()) if k]


SHAPES = {  # rows, prompt tokens, sampled tokens per turn (or a range to draw from), env tokens between turns
    "bench": (32, 300, 128, 120),  # the benchmark's 32 kept rows of about 1,420 tokens
    "tiny": (256, 220, (8, 16), 120),     # configs/tiny-gpu.yaml's 256 kept rows, answers of about 12 tokens
}


def synthetic_trajectories(shape, vocab_size, group_size, turns=5):
    """Random tokens in the shape of a multi-turn rollout: a prompt of about `prompt` tokens, then `turns`
    answers, with 80-160 env tokens between them."""
    rows, prompt, sampled, env_tokens = SHAPES[shape]
    rng = np.random.default_rng(0)
    trajectories = []
    for i in range(rows):
        ids = rng.integers(10, vocab_size - 10, prompt + rng.integers(-20, 20)).tolist()
        mask = [0] * len(ids)
        for turn in range(turns):
            n = sampled if isinstance(sampled, int) else int(rng.integers(*sampled))
            ids += rng.integers(10, vocab_size - 10, n).tolist()
            mask += [1] * n
            if turn < turns - 1:
                n = int(rng.integers(env_tokens - 40, env_tokens + 40))
                ids += rng.integers(10, vocab_size - 10, n).tolist()
                mask += [0] * n
        trajectories.append(SimpleNamespace(ids=ids, sampled=mask, reward=float(rng.normal()), group=i // group_size))
    return trajectories


def gpu_busy(profiler):
    """-> (ms the GPU ran kernels, ms from the first to the last event): the union of the kernels' intervals."""
    kernels = sorted((e.time_range.start, e.time_range.end) for e in profiler.events()
                     if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, end = 0, float("-inf")
    for s, e in kernels:  # in order of start: each kernel adds the part of it after the latest end so far
        busy += max(0, e - max(s, end))
        end = max(end, e)
    events = profiler.events()
    window = max(e.time_range.end for e in events) - min(e.time_range.start for e in events)
    return busy / 1e3, window / 1e3


parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--config", help="YAML file laid over config.yaml (default: the benchmark's model on config.yaml)")
parser.add_argument("--synthetic", choices=SHAPES, help="random tokens of this shape instead of a rollout")
parser.add_argument("--repeats", type=int, default=2, help="scoring + update runs; the last one is profiled")
parser.add_argument("overrides", nargs="*")
args = parser.parse_args()
overrides = ([] if args.config else ["model.name=random-qwen2.5-0.5b", "rollout.max_new_tokens=128",
                                     "rollout.min_new_tokens=128"])
overrides += ["eval.every=0", "checkpoint.every=0", "run_dir=/tmp/profile_update", "overwrite=true"]
overrides += ["warmup.steps=0", "rollout.cache=dynamic"] if args.synthetic else []  # no sampling at all
run = ragen_mini.setup(load_config(args.config, overrides + args.overrides), None)
cfg = run.cfg
if args.synthetic:
    trajectories = synthetic_trajectories(args.synthetic, run.actor.config.vocab_size, cfg.rollout.group_size)
for repeat in range(args.repeats):
    profiled = repeat == args.repeats - 1
    if not args.synthetic:
        trajectories = real_trajectories(run)
    batch = ragen_mini.collate(trajectories, run.chat.pad_id, run.device)
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
    torch.cuda.synchronize()
    if profiled:
        profiler.start()
    start = time.perf_counter()
    ragen_mini.old_logprobs_and_values(batch, run.actor, run.critic, run.reference, cfg, run.device)
    torch.cuda.synchronize()
    scored = time.perf_counter()
    ragen_mini.compute_advantages(batch, cfg)
    torch.cuda.synchronize()
    advantaged = time.perf_counter()
    ragen_mini.update(batch, run.actor, run.critic, run.optimizers["actor"], run.optimizers.get("critic"), cfg,
                      run.device, run.generator)
    torch.cuda.synchronize()
    if profiled:
        profiler.stop()
    print(f"{'profiled' if profiled else f'repeat {repeat}'}: {len(batch.rewards)} trajectories of up to "
          f"{batch.input_ids.shape[1]} tokens, {int(batch.response_mask.sum())} sampled; scoring {scored - start:.2f} s, "
          f"advantages {advantaged - scored:.2f} s, update {time.perf_counter() - advantaged:.2f} s, peak reserved {torch.cuda.max_memory_reserved() / 2**30:.1f} GiB",
          flush=True)
print(profiler.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))
print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70))  # the host's
busy, window = gpu_busy(profiler)
print(f"the GPU ran kernels {busy:.0f} ms of the profiled {window:.0f} ms")

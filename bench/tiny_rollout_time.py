"""How long does one tiny-model FrozenLake rollout take (10 turns x 1 action, 128 x 8 trajectories, the
setting of the tiny model's FrozenLake runs in docs/results.md), and where does the time go? Samples
with a fresh tiny model after the runs' format warm-up (fewer steps: WARMUP_STEPS), whose answers have
the runs' format.

    python bench/tiny_rollout_time.py [--profile] [section.key=value ...]

Prints, best of REPEATS each: the rollout's time and the part of it inside the decoder (the rest is
host work: envs, tokenizer, parsing); the left padding of one turn's contexts with a torch.tensor per row
and with rollout.left_pad (rows filled in numpy); with --profile, the kernels that take the most GPU time.
"""
import os
import sys
import time
import timeit

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repository's modules
import models  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
from config import load_config, namespace  # noqa: E402

REPEATS, WARMUP_STEPS = 3, 200
profile = "--profile" in sys.argv
overrides = ["run_dir=", "env.name=frozenlake", "env.max_turns=10", "env.max_actions_per_turn=1",
             "rollout.max_context=1280", "rollout.groups=128", "rollout.cache=static", f"warmup.steps={WARMUP_STEPS}",
             "warmup.batch_size=64", "warmup.env_text=true", "algo.mini_batch_size=64", "algo.micro_batch_size=64",
             "algo.micro_batch_tokens=0",
             *[a for a in sys.argv[1:] if a != "--profile"]]
cfg = namespace(load_config(os.path.join(ROOT, "configs", "tiny.yaml"), overrides))
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
tokenizer, actor = models.load_models(cfg, device)
chat = rollout.chat_format(tokenizer, actor.generation_config)
start = time.perf_counter()
warmup_loss = ragen_mini.format_warmup(actor, rollout.Sampler(actor, chat), cfg, device)
print(f"format warm-up: {cfg.warmup.steps} steps in {time.perf_counter() - start:.0f} s, final loss {warmup_loss:.3f}")
sampler = models.build_sampler(actor, chat, cfg, device)
decoder = sampler.decoder
sampler.model.eval()
P, N = cfg.rollout.groups, cfg.rollout.group_size
seeds, groups = np.repeat(np.arange(P), N), np.repeat(np.arange(P), N)


def timed_rollout():
    policy = rollout.LLMPolicy(sampler, cfg, cfg.rollout.temperature)
    start = time.perf_counter()
    trajectories = rollout.play_episodes(policy, chat, cfg, seeds, groups)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, policy.generate_s, trajectories


def per_row_pad(contexts, pad_id):  # a torch.tensor per row, to compare with rollout.left_pad
    width = max(map(len, contexts))
    input_ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for i, context in enumerate(contexts):
        input_ids[i, width - len(context):] = torch.tensor(context)
        attention_mask[i, width - len(context):] = 1
    return input_ids, attention_mask


timed_rollout()  # compiles the decoder (once per batch size) and warms the caches
runs = [timed_rollout() for _ in range(REPEATS)]
total, generate, trajectories = min(runs, key=lambda run: run[0])
lengths = [len(t.ids) for t in trajectories]
answer_tokens = sum(t.response_tokens for t in trajectories) / sum(len(t.turns) for t in trajectories)
print(f"{device}: {P * N} trajectories, {np.mean([len(t.turns) for t in trajectories]):.1f} turns, context "
      f"{np.mean(lengths):.0f} tokens (max {max(lengths)}), {answer_tokens:.1f} answer tokens per turn, "
      f"max_new_tokens {cfg.rollout.max_new_tokens}")
print(f"rollout {total:.2f} s, of which generate {generate:.2f} s (best of {REPEATS}; all: "
      f"{', '.join(f'{run[0]:.2f}' for run in runs)})")
contexts = [t.ids for t in trajectories]  # the last turn's width: the widest padding of the rollout
for label, pad in (("torch.tensor per row", per_row_pad), ("rollout.left_pad", rollout.left_pad)):
    best = min(timeit.repeat(lambda: pad(contexts, chat.pad_id), number=1, repeat=REPEATS))
    print(f"left padding of {len(contexts)} contexts, {label}: {best * 1000:.0f} ms (best of {REPEATS})")
if profile:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        timed_rollout()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20, max_name_column_width=60))

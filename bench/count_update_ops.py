"""How many PyTorch operations one update step issues, counted on the CPU with torch.profiler (on a GPU
each one that computes is a kernel launch): the tiny model's actor micro-batch, forward and backward,
and one actor step with its critic step as ragen_mini.update runs them. Counts top-level aten operations.

    python bench/count_update_ops.py [section.key=value ...]
"""
import collections
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repository root
import ragen_mini  # noqa: E402
from config import load_config  # noqa: E402

B, T = 64, 870  # the tiny GPU preset's micro-batch: 64 trajectories of up to ~870 tokens
overrides = ["model.name=tiny", "eval.every=0", "checkpoint.every=0", "run_dir=/tmp/count_update_ops", "overwrite=true",
             "warmup.steps=0", "env.name=sokoban", f"algo.mini_batch_size={B}", f"algo.micro_batch_size={B}", "algo.ppo_epochs=1",
             *sys.argv[1:]]
run = ragen_mini.setup(load_config(os.path.join(ROOT, "configs", "tiny-gpu.yaml"), overrides), None)
for name, model in (("actor", run.actor), ("critic", run.critic)):  # fused AdamW, as on a GPU
    run.optimizers[name] = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
generator = torch.Generator().manual_seed(0)
input_ids = torch.randint(0, run.actor.config.vocab_size, (B, T), generator=generator)
attention_mask = torch.ones(B, T, dtype=torch.long)
response_mask = (torch.rand(B, T - 1, generator=generator) > 0.9).float()
batch = ragen_mini.Batch(input_ids=input_ids, attention_mask=attention_mask, response_mask=response_mask,
                         rewards=torch.rand(B), group_ids=torch.arange(B) // 8)


def count(label, work):
    work()  # once before counting: first calls set things up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        work()
    names = collections.Counter(e.name for e in profiler.events() if e.name.startswith("aten::")
                                and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))
    print(f"{label}: {sum(names.values())} operations; most frequent: {names.most_common(6)}")


def actor_micro_batch():
    logp, _ = ragen_mini.token_logprobs(run.actor, input_ids, response_mask, run.cfg, True, 1.0)
    logp.sum().backward()


count("actor micro-batch, forward and backward", actor_micro_batch)
ragen_mini.old_logprobs_and_values(batch, run.actor, run.critic, None, run.cfg, run.device)  # what update() needs
ragen_mini.compute_advantages(batch, run.cfg)
count("one actor step and its critic step (ragen_mini.update)",
      lambda: ragen_mini.update(batch, run.actor, run.critic, run.optimizers["actor"], run.optimizers["critic"],
                                run.cfg, run.device, generator))

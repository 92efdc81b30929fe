"""Vanilla PPO's step 3 (scoring: actor, critic, reference) and step 5 (update: actor and critic) on one
synthetic kept batch shaped like the SmolLM2 preset's (256 rows of 700-1,500 tokens, 10 replies of 23 tokens
each, about 59k trained tokens), with a random model of SmolLM2-135M's shape, at several micro-batch sizes;
then a kernel profile of one update at the first size. Three repetitions each (the first compiles).
Writes OUT/results.json, OUT/profile_update.txt and OUT/profile_score.txt.

    python bench/update_micro_batches.py OUT      # on a GPU, with the fast engine
    python bench/update_micro_batches.py OUT --sizes 32768x32 --whole
        # only these (micro_batch_tokens x micro_batch_size) sizes, and each backbone compiled as one graph
        # (torch.compile of its whole forward) instead of layer by layer: fewer Python calls a pass

What it shows: a 135M model's micro-batch costs the host (launching 30 compiled layers forward and backward)
more time than the GPU, so fewer, larger micro-batches are faster until the GPU is the bound.
"""
import copy
import functools
import json
import os
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM, LlamaConfig

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import config  # noqa: E402
import fast.compile  # noqa: E402
import models  # noqa: E402
import ragen_mini  # noqa: E402

VANILLA_PPO = ["algo.filter_ratio=1.0", "algo.kl_coef=0.001", "algo.clip_high=0.2"]
# (algo.micro_batch_tokens, algo.micro_batch_size) of each measurement
SIZES = [(16384, 16), (32768, 16), (65536, 32), (16384, 32), (131072, 32)]
SMOLLM2_SHAPE = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                            num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                            rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)


def synthetic_batch(device, rows=256, seed=0):
    """A kept batch of random tokens: row lengths 700-1,499, ten 23-token replies after a 270-token prompt."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(700, 1500, rows)  # (B,)
    ids = rng.integers(5, 49000, (rows, lengths.max()))  # (B, T)
    sampled = np.zeros(ids.shape, np.float32)  # (B, T)
    for i, length in enumerate(lengths):
        ids[i, length:] = 0
        for turn in range(10):
            start = 270 + int((length - 300) * turn / 10)
            sampled[i, start:start + 23] = 1
    attention = (np.arange(ids.shape[1])[None] < lengths[:, None]).astype(np.int64)
    return ragen_mini.Batch(input_ids=torch.from_numpy(ids).to(device),
                            attention_mask=torch.from_numpy(attention).to(device),
                            loss_mask=torch.from_numpy(sampled[:, 1:]).to(device),
                            rewards=torch.randn(rows, device=device),
                            group_ids=torch.arange(rows, device=device) // 8)


def seconds(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def compile_whole(backbone):
    """fast.compile.compile_backbone's variant for --whole: the backbone's whole forward is one compiled graph
    (all its layers unrolled), still behind padded_forward's widths in multiples of 8 and flash attention."""
    whole = torch.compile(type(backbone).forward.__get__(backbone), dynamic=True)
    backbone.forward = functools.partial(fast.compile.padded_forward, whole)


def main(out, sizes, whole):
    os.makedirs(out, exist_ok=True)
    device = torch.device("cuda")
    cfg = config.namespace(config.load_config("configs/smollm2.yaml", VANILLA_PPO))
    torch.manual_seed(0)
    actor = AutoModelForCausalLM.from_config(SMOLLM2_SHAPE).to(device).train()
    engine = models.choose_engine(cfg, actor, device)
    critic = models.build_critic(cfg, actor, device)
    reference = copy.deepcopy(actor).eval().requires_grad_(False)
    for model in (actor, reference):
        model.logprob_and_entropy = engine.logprob_and_entropy
    if engine.fast and whole:
        for backbone in (actor.base_model, critic.backbone, reference.base_model):
            compile_whole(backbone)
    elif engine.fast:
        engine.fast.compile_for_training(actor.base_model, critic.backbone, reference.base_model)
    actor_opt, critic_opt = (torch.optim.AdamW(m.parameters(), lr=1e-6, fused=True) for m in (actor, critic))
    generator = torch.Generator().manual_seed(0)
    shape = synthetic_batch(device)
    print(f"engine {engine.name}{', whole backbones compiled' if whole else ''}; {len(shape.rewards)} rows, {int(shape.attention_mask.sum())} tokens, "
          f"{int(shape.loss_mask.sum())} trained", flush=True)

    def scored(sized):
        batch = synthetic_batch(device)
        score_s = seconds(lambda: ragen_mini.old_logprobs_and_values(batch, actor, critic, reference, sized,
                                                                     device))
        ragen_mini.compute_advantages(batch, sized, engine.compute_gae)
        return batch, score_s

    results = []
    for tokens, rows in sizes:
        sized = copy.deepcopy(cfg)
        sized.algo.micro_batch_tokens, sized.algo.micro_batch_size = tokens, rows
        for repetition in range(3):
            batch, score_s = scored(sized)
            update_s = seconds(lambda: ragen_mini.update(batch, actor, critic, actor_opt, critic_opt, sized,
                                                         device, generator))
            results.append(dict(micro_batch_tokens=tokens, micro_batch_size=rows, repetition=repetition,
                                score_s=round(score_s, 3), update_s=round(update_s, 3),
                                peak_reserved_gib=round(torch.cuda.max_memory_reserved() / 2**30, 2)))
            print(json.dumps(results[-1]), flush=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    sized = copy.deepcopy(cfg)
    sized.algo.micro_batch_tokens, sized.algo.micro_batch_size = sizes[0]
    batch, _ = scored(sized)
    for name, fn in (("update", lambda: ragen_mini.update(batch, actor, critic, actor_opt, critic_opt, sized,
                                                          device, generator)),
                     ("score", lambda: ragen_mini.old_logprobs_and_values(batch, actor, critic, reference,
                                                                          sized, device))):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        with open(os.path.join(out, f"profile_{name}.txt"), "w") as f:
            f.write(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=45,
                                              max_name_column_width=90))


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = args[args.index("--sizes") + 1] if "--sizes" in args else None
    main(args[0], [tuple(int(n) for n in size.split("x")) for size in chosen.split(",")] if chosen else SIZES,
         "--whole" in args)

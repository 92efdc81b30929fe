"""Where a multi-turn rollout's generation goes in the static decoder's cache: plays rollouts of a preset with
its model as loaded (no format warm-up, so every reply runs to rollout.max_new_tokens), two untimed (the
compilation, the CUDA graphs), then three timed, and prints per rollout the generation time, the decoding
steps, the prefills' time and tokens (rows x width), how often the cache started afresh (the first turn
always does) and the decoding steps run at each attention window.

    python bench/rollout_slots.py --config configs/smollm2.yaml [section.key=value ...]

Run it in a checkout of older code to compare (it reads only the decoder's feed, place and run_block).
"""
import argparse
import collections
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
import launch  # noqa: E402
import rollout  # noqa: E402
from config import load_config, namespace  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--config", required=True)
parser.add_argument("overrides", nargs="*")
args = parser.parse_args()
cfg = namespace(load_config(args.config, args.overrides))
device, actor, rollout_model, _ = launch.load_policy(cfg)  # as a run loads them
decoder = rollout_model.decoder
if decoder is None:
    raise SystemExit("this setting samples with generate(), not the static decoder: pass rollout.engine=fast")
stats = collections.Counter()
feed, place, run_block = decoder.feed, decoder.place, decoder.run_block


def timed_feed(new):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = feed(new)
    torch.cuda.synchronize()
    stats["prefill_s"] += time.perf_counter() - start
    stats["prefill_tokens"] += len(new) * decoder.width(new)
    return out


def counted_place(contexts, reuse):
    rows, new = place(contexts, reuse)
    stats["afresh"] += decoder.next_slot == 0
    return rows, new


def counted_block(window, greedy, size):
    stats[f"window {window}"] += size
    return run_block(window, greedy, size)


decoder.feed, decoder.place, decoder.run_block = timed_feed, counted_place, counted_block
P, N = cfg.rollout.groups, cfg.rollout.group_size
for i, label in enumerate(("untimed", "untimed", "timed", "timed", "timed")):
    stats.clear()
    seeds, groups = np.repeat(np.arange(P) + 100 * i, N), np.repeat(np.arange(P), N)
    policy = rollout.LLMPolicy(rollout_model, cfg, cfg.rollout.temperature)
    start = time.perf_counter()
    trajectories = rollout.play_episodes(policy, rollout_model.chat, cfg, seeds, groups)
    torch.cuda.synchronize()
    windows = {key.split()[1]: n for key, n in sorted(stats.items(), key=lambda kv: len(kv[0])) if " " in key}
    print(f"{label}: rollout {time.perf_counter() - start:.2f} s, generation {policy.generate_s:.2f} s, "
          f"{policy.decode_steps} steps ({policy.generate_s / policy.decode_steps * 1000:.2f} ms each), "
          f"{policy.calls} turns, context {np.mean([len(t.ids) for t in trajectories]):.0f} tokens; prefills "
          f"{stats['prefill_s']:.2f} s, {stats['prefill_tokens']} tokens; afresh {stats['afresh']}; "
          f"steps per window {windows}", flush=True)

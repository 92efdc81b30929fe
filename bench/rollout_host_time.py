"""Host time of one rollout of the tiny model's GPU runs' shape (128 groups x 8, tiny tokenizer), without a
model: envs, prompts, parsing and tokenizer, the part of perf/rollout_s that is not perf/generate_s.
Answers are uniformly random ones, tokenized ahead of time, so the policy itself costs nothing.

    python bench/rollout_host_time.py [section.key=value ...]     # e.g. env.name=frozenlake
    python bench/rollout_host_time.py --profile                   # then one more rollout under cProfile
"""
import cProfile
import gc
import itertools
import os
import pstats
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repository's modules
import rollout  # noqa: E402
import tiny  # noqa: E402
from config import load_config, namespace, new_env  # noqa: E402

profile = "--profile" in sys.argv
overrides = [arg for arg in sys.argv[1:] if arg != "--profile"]
cfg = namespace(load_config(os.path.join(ROOT, "configs", "tiny.yaml"), ["env.name=sokoban", *overrides]))
tokenizer = tiny.build_tokenizer(tiny.env_corpus(cfg), cfg.model.tokenizer_vocab)
chat = rollout.chat_format(tokenizer)
actions = new_env(cfg).actions
answers = [tokenizer(f"</think><answer>{' || '.join(a)}</answer>", add_special_tokens=False)["input_ids"]
           + [chat.end_of_turn_id] for k in range(1, cfg.env.max_actions_per_turn + 1)
           for a in itertools.product(actions, repeat=k)]
rng = random.Random(0)
seeds = [seed for seed in rng.sample(range(cfg.eval.seed_offset), 128) for _ in range(8)]


def policy(contexts):
    return [rng.choice(answers) for _ in contexts]


times = []
for _ in range(3):
    start = time.perf_counter()
    trajectories = rollout.play_episodes(policy, chat, cfg, seeds, seeds)
    times.append(time.perf_counter() - start)
print(f"{cfg.env.name}: {len(seeds)} trajectories, host time per rollout {min(times):.2f} s (best of 3), "
      f"{sum(len(t.ids) for t in trajectories)} tokens")
if profile:  # where the host time goes: the functions that spend the most time in their own code
    # as the fast engine does after iteration 1: else a full pass of the cycle collector lands in whichever
    # function was allocating at the time
    gc.freeze()
    profiler = cProfile.Profile()
    profiler.runcall(rollout.play_episodes, policy, chat, cfg, seeds, seeds)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(10)

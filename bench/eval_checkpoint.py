"""Evaluate a saved actor on the evaluation seeds, here, on any device: a run's final eval/success
recomputed (the GPU samples with a bf16 copy, the CPU in float32), or the same policy on more seeds
for a tighter estimate (256 seeds leave a standard error of about 0.03 on a success rate near 0.5).

    python bench/eval_checkpoint.py bench/learn/sokoban-lam95 eval.num_seeds=1024

RUN_DIR holds the run's config.yaml and its actor, in RUN_DIR/actor or RUN_DIR/checkpoint/actor.
Prints one JSON line: the run's eval metrics for these seeds.
"""
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, ".")
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
from config import load_config, namespace  # noqa: E402

run_dir, overrides = sys.argv[1], sys.argv[2:]
actor_dirs = [d for d in (os.path.join(run_dir, "actor"), os.path.join(run_dir, "checkpoint", "actor")) if os.path.isdir(d)]
if not actor_dirs or not os.path.isfile(os.path.join(run_dir, "config.yaml")):
    raise SystemExit(f"error: {run_dir} needs config.yaml and an actor/ or checkpoint/actor/ folder")
actor_dir = actor_dirs[0]
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# transformers' generate on every device: the static decoder is GPU-only and tuned for the bf16 sampler
cfg = namespace(load_config(os.path.join(run_dir, "config.yaml"), ["run_dir=", "rollout.cache=dynamic", *overrides]))
torch.manual_seed(cfg.seed)
tokenizer, actor = ragen_mini.load_models(cfg, device, actor_dir)
chat = rollout.chat_format(tokenizer, actor.generation_config)
with tempfile.TemporaryDirectory() as scratch:  # evaluate() appends sample transcripts there
    metrics = ragen_mini.evaluate(actor.eval(), chat, cfg, "Evaluation", scratch)
print(json.dumps({"actor": actor_dir, "num_seeds": cfg.eval.num_seeds, **metrics}))

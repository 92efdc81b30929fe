"""Can an in-process model read a FrozenLake grid at all? A supervised probe, not RL: from the turn-1
prompt, predict the first step towards the goal (vertical first: "Down" if the goal is below the player,
then "Up", "Right", "Left"), a function of where P and G sit in the grid. Accuracy on the 256 evaluation
seeds is printed every 100 steps, beside the share of the most common answer (what a model that ignores
the grid reaches). If the probe learns, the architecture can see the grid and a flat RL curve is a
problem of the reward signal; if not, no RL setting will help.

    python tools/perception_probe.py --layers 4 --hidden 128 --steps 2000   # the tiny model's shape

Output for the tiny model's shape (and 256 wide): results/perception_probe/.
"""
import argparse
import collections
import os
import random
import sys
import time

import torch
from transformers import AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the repository's modules
import rollout  # noqa: E402
import tiny  # noqa: E402
from config import load_config, namespace, new_env  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
cfg = namespace(load_config(os.path.join(ROOT, "configs", "tiny.yaml"), ["env.name=frozenlake"]))
tokenizer = tiny.build_tokenizer(tiny.env_corpus(cfg), cfg.model.tokenizer_vocab)
config = tiny.model_config("tiny", len(tokenizer))
config.num_hidden_layers, config.hidden_size, config.intermediate_size = args.layers, args.hidden, 4 * args.hidden
config.layer_types = ["full_attention"] * args.layers  # one entry per layer (transformers 5 reads it per layer)
model = AutoModelForCausalLM.from_config(config).to(device)
action_ids = torch.tensor([tokenizer(a, add_special_tokens=False)["input_ids"][0] for a in new_env(cfg).actions])


def example(seed):
    """(prompt ids up to "<answer>", index of the step towards the goal in env.actions)"""
    env = new_env(cfg)
    observation, _ = env.reset(seed)
    (row, col), (goal_row, goal_col) = env.player, env.goal
    step = "Down" if goal_row > row else "Up" if goal_row < row else "Right" if goal_col > col else "Left"
    prompt = rollout.first_prompt(env, observation, tokenizer, cfg) + "</think><answer>"
    return tokenizer(prompt, add_special_tokens=False)["input_ids"], env.actions.index(step)


def batch(examples):
    input_ids, attention_mask = rollout.left_pad([ids for ids, _ in examples], tokenizer.pad_token_id)  # (B, T)
    return input_ids.to(device), attention_mask.to(device), torch.tensor([label for _, label in examples], device=device)


def action_logits(input_ids, attention_mask):
    return model(input_ids=input_ids, attention_mask=attention_mask).logits[:, -1, action_ids.to(device)]  # (B, 4)


test = [example(cfg.eval.seed_offset + i) for i in range(cfg.eval.num_seeds)]
majority = max(collections.Counter(label for _, label in test).values()) / len(test)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
rng, started = random.Random(0), time.time()
for step in range(args.steps + 1):
    if step % 100 == 0:
        with torch.no_grad():
            input_ids, attention_mask, labels = batch(test)
            accuracy = (action_logits(input_ids, attention_mask).argmax(-1) == labels).float().mean()
        print(f"layers {args.layers} hidden {args.hidden} step {step}: accuracy {accuracy:.3f} "
              f"(most common answer {majority:.3f}), {time.time() - started:.0f} s", flush=True)
    input_ids, attention_mask, labels = batch([example(rng.randrange(cfg.eval.seed_offset)) for _ in range(args.batch)])
    loss = torch.nn.functional.cross_entropy(action_logits(input_ids, attention_mask), labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()

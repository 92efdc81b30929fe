"""ragen-mini: multi-turn RL for LLM agents (RAGEN / StarPO) on one GPU; the trainer, read top to bottom.

    python ragen_mini.py --config config.yaml                      # the paper's StarPO-S setup
    python ragen_mini.py --config configs/tiny.yaml env.name=bandit # offline, on a laptop CPU

One iteration of StarPO (the paper's Figure 2), top to bottom in `train()`:
  1. ROLLOUT   P prompts (env seeds) x N samples; each trajectory is a multi-turn conversation: the model
               answers `<think>..</think><answer>a || b</answer>`, the env executes the actions and
               the reward and next state come back as the next user message.        -> rollout.rollout()
  2. FILTER    StarPO-S keeps the groups whose N rewards disagree most.             -> starpo.select_groups_by_reward_std
  3. SCORE     log-probs of the sampled tokens, critic values, the reference.       -> score_batch()
  4. ADVANTAGE GAE over the whole conversation (PPO) or group-normalised (GRPO).    -> compute_advantages()
  5. UPDATE    clipped policy loss + value loss over mini-batches.                  -> update()
The algorithms live in starpo.py, the environments in envs.py; this file is the plumbing around them.
config.py reads and checks the config, models.py loads the LLM, rollout.py plays the multi-turn
conversations, fast_decode.py is the GPU fast path of the rollout, tiny.py the in-process model, plots.py
the plots, bookkeeping.py the run folder, resume, summary and Ctrl-C.
"""
import argparse
import copy
import json
import os
import random
import resource
import shutil
import time
import warnings

import numpy as np
import torch
import transformers
import yaml
from tqdm import tqdm
from transformers import AutoModelForCausalLM

import plots
import starpo
import tiny
from bookkeeping import (CtrlC, RunError, check_finite_weights, check_resumable, describe_os_error, drop_after_checkpoint,
                         load_state, new_run_dir, run_summary, save_failed)
from config import ConfigError, load_config, namespace
from models import load_models
from rollout import chat_format, llm_policy, random_policy, rollout


# ======================================================================================================
# Models: the actor (the LLM), the critic (a second copy of the base model with a scalar value head) and,
# only when a KL coefficient is set, a frozen reference.
# ======================================================================================================
class Critic(torch.nn.Module):
    """V(prefix) for every position: the base transformer's last hidden state -> one number."""

    def __init__(self, backbone, hidden_size):
        super().__init__()
        self.backbone = backbone
        self.value_head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.value_head.weight)  # start at V = 0: no made-up baseline at iteration 0
        torch.nn.init.zeros_(self.value_head.bias)


def build_critic(cfg, actor, device):
    if not cfg.model.critic or cfg.algo.estimator != "gae":
        return None
    # The paper's critic starts from the same base model as the actor: copy the actor's transformer (no
    # second download; when resuming, the critic's own weights are loaded over it).
    return Critic(copy.deepcopy(actor.base_model), actor.config.hidden_size).to(device).train()


def copy_weights(actor, sampler):
    """Bring the bf16 sampler up to date with the trained actor, in place: the compiled decoder keeps
    pointing at the same buffers. Nothing to do where the actor samples itself (the CPU)."""
    if sampler is not actor:
        with torch.no_grad():
            for sampled_param, param in zip(sampler.parameters(), actor.parameters()):
                sampled_param.copy_(param)


def bf16_sampler(actor):
    """The GPU samples from a bf16 copy (half the bytes per decoding step) while float32 weights train.
    Parameters only: a bf16 RoPE inv_freq buffer would shift every position's angle."""
    sampler = copy.deepcopy(actor).eval()
    for param in sampler.parameters():
        param.data = param.data.to(torch.bfloat16)
    return sampler


# ======================================================================================================
# Scoring: per-token log-probs, entropies and values by forward passes over the exact token ids.
# Shapes: B trajectories, T tokens; per-token quantities live on the (B, T-1) grid of "next tokens"
# because the logits at position t predict token t+1 (REFERENCE.md §7.4).
# ======================================================================================================
def collate(trajectories, pad_id, device):
    """Right-pad the kept trajectories into tensors."""
    width = max(len(t["ids"]) for t in trajectories)
    input_ids = torch.full((len(trajectories), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(trajectories), width), dtype=torch.long)
    sampled = torch.zeros((len(trajectories), width))
    for i, t in enumerate(trajectories):
        input_ids[i, :len(t["ids"])] = torch.tensor(t["ids"])
        attention_mask[i, :len(t["ids"])] = 1
        sampled[i, :len(t["ids"])] = torch.tensor(t["mask"], dtype=torch.float)
    return dict(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                response_mask=sampled[:, 1:].to(device),  # (B, T-1): 1 where token t+1 was sampled
                scores=torch.tensor([t["reward"] for t in trajectories], device=device),  # (B,)
                group_ids=torch.tensor([t["group"] for t in trajectories], device=device))  # (B,)


def hidden_states(backbone, input_ids, attention_mask):
    """(b, T, H) last hidden states. Position ids are passed explicitly (REFERENCE.md §7.3)."""
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).last_hidden_state


def token_logprobs(actor, input_ids, attention_mask, response_mask, temperature, with_entropy, chunk=1024):
    """log pi(token t+1 | tokens <= t) and the entropy at t, at response positions only. -> two (b, T-1).

    The logits are the largest tensor of training (151,936 floats per token for Qwen): they are made
    only for response tokens, chunk by chunk, and with gradients the chunk is recomputed in backward
    (checkpoint) instead of stored, so memory holds the hidden states alone (REFERENCE.md §7.11).
    The temperature is the sampler's: the ratio must compare the very distribution that sampled.
    """
    hidden = hidden_states(actor.base_model, input_ids, attention_mask)[:, :-1]  # (b, T-1, H)
    at = response_mask.bool()
    flat_hidden, targets = hidden[at], input_ids[:, 1:][at]  # (n, H), (n,)
    lm_head = actor.get_output_embeddings()

    def chunk_fn(h, y):
        logits = lm_head(h).float() / temperature  # (c, V)
        logp = logits.gather(-1, y[:, None]).squeeze(-1) - logits.logsumexp(-1)
        return logp, (starpo.entropy_from_logits(logits) if with_entropy else torch.zeros_like(logp))

    pieces = []
    for start in range(0, len(targets), chunk):
        args = (flat_hidden[start:start + chunk], targets[start:start + chunk])
        pieces.append(torch.utils.checkpoint.checkpoint(chunk_fn, *args, use_reentrant=False)
                      if torch.is_grad_enabled() else chunk_fn(*args))
    logp = torch.zeros(response_mask.shape, device=hidden.device)
    entropy = torch.zeros(response_mask.shape, device=hidden.device)
    if pieces:
        logp = logp.masked_scatter(at, torch.cat([p[0] for p in pieces]))
        entropy = entropy.masked_scatter(at, torch.cat([p[1] for p in pieces]))
    return logp, entropy


def token_values(critic, input_ids, attention_mask, response_mask):
    """V at every response position -> (b, T-1): the value of the state before token t+1 is sampled."""
    hidden = hidden_states(critic.backbone, input_ids, attention_mask)[:, :-1]
    values = critic.value_head(hidden[response_mask.bool()]).squeeze(-1).float()  # (n,)
    return torch.zeros(response_mask.shape, device=hidden.device).masked_scatter(response_mask.bool(), values)


def micro_batches(batch, indices, size):
    """Slices of the batch, each trimmed to its own longest row (right padding makes this a crop)."""
    for start in range(0, len(indices), size):
        rows = indices[start:start + size]
        width = int(batch["attention_mask"][rows].sum(-1).max())
        yield rows, batch["input_ids"][rows, :width], batch["attention_mask"][rows, :width], \
            batch["response_mask"][rows, :width - 1]


def autocast(device):
    """bf16 matmuls on the GPU, float32 weights and losses (tiny updates like 1e-6 survive in float32)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)


@torch.no_grad()
def score_batch(batch, actor, critic, reference, cfg, device):
    """Adds old_logp, values and ref_logp (B, T-1) to the batch: the rollout policy's numbers."""
    B, width = batch["response_mask"].shape
    for name in ("old_logp", "values", "ref_logp"):
        batch[name] = torch.zeros((B, width), device=device)
    for rows, ids, attention, mask in micro_batches(batch, torch.arange(B), cfg.algo.micro_batch_size):
        with autocast(device):
            batch["old_logp"][rows, :mask.shape[1]] = token_logprobs(actor, ids, attention, mask, cfg.rollout.temperature, False)[0]
            if critic is not None:
                batch["values"][rows, :mask.shape[1]] = token_values(critic, ids, attention, mask)
            if reference is not None:
                batch["ref_logp"][rows, :mask.shape[1]] = token_logprobs(reference, ids, attention, mask, cfg.rollout.temperature, False)[0]


# ======================================================================================================
# Advantages (paper section 3.2): the trajectory's summed reward sits on its last generated token.
# PPO: GAE over the whole multi-turn token sequence, skipping observation tokens, then whitening.
# GRPO: the trajectory's reward normalised within its group, on every one of its tokens.
# ======================================================================================================
def compute_advantages(batch, cfg):
    mask = batch["response_mask"]  # (B, T-1)
    last = (mask * torch.arange(mask.shape[1], device=mask.device)).argmax(-1)  # (B,) last sampled token
    token_rewards = torch.zeros_like(mask)
    token_rewards[torch.arange(len(last)), last] = batch["scores"]
    kl = starpo.kl_estimate(batch["old_logp"], batch["ref_logp"], "k1") * mask if cfg.algo.kl_coef > 0 else None
    if cfg.algo.estimator == "gae":
        if kl is not None:  # PPO puts the KL penalty inside the reward (k1), never also in the loss
            token_rewards = token_rewards - cfg.algo.kl_coef * kl
        advantages, returns = starpo.compute_gae(token_rewards, batch["values"], mask, cfg.algo.gamma, cfg.algo.lam)
        batch["advantages"] = starpo.masked_whiten(advantages, mask)
        batch["returns"] = returns
    else:
        per_trajectory = starpo.compute_grpo_advantages(batch["scores"], batch["group_ids"],
                                                        normalize_by_std=cfg.algo.grpo_std_normalize)  # (B,)
        batch["advantages"] = per_trajectory[:, None] * mask
        batch["returns"] = torch.zeros_like(mask)
    return {} if kl is None else {"train/kl_ref": float(starpo.masked_mean(kl, mask))}


# ======================================================================================================
# Update: PPO epochs over mini-batches; each mini-batch is accumulated over micro-batches whose losses
# are normalised by the mini-batch's token count, so their sum is exactly the mini-batch token mean
# (REFERENCE.md §7.8). Actor and critic have their own optimisers and gradient clipping.
# ======================================================================================================
def update(batch, actor, critic, actor_opt, critic_opt, cfg, device, generator):
    B = batch["response_mask"].shape[0]
    sums, counts = {}, {}

    def log(name, value):  # tensors stay on the device; one host transfer at the end
        sums[name] = sums.get(name, 0.0) + (value.detach() if torch.is_tensor(value) else value)
        counts[name] = counts.get(name, 0) + 1

    def take(name, rows, mask):  # the micro-batch's rows of a stored (B, T-1) tensor, cropped like `mask`
        return batch[name][rows, :mask.shape[1]]

    def actor_loss(rows, ids, attention, mask, num_tokens):
        with autocast(device):
            logp, entropy = token_logprobs(actor, ids, attention, mask, cfg.rollout.temperature, True)
        pg_loss, pg_metrics = starpo.policy_loss(logp, take("old_logp", rows, mask), take("advantages", rows, mask),
                                                 mask, cfg.algo.clip_low, cfg.algo.clip_high,
                                                 dual_clip=cfg.algo.dual_clip or None, loss_normalizer=num_tokens)
        loss = pg_loss
        if cfg.algo.entropy_coef > 0:  # entropy bonus: a brake on the collapse of exploration
            loss = loss - cfg.algo.entropy_coef * (entropy * mask).sum() / num_tokens
        if cfg.algo.kl_coef > 0 and cfg.algo.estimator == "grpo":  # GRPO: k3 inside the loss
            kl = starpo.kl_estimate(logp, take("ref_logp", rows, mask), "k3")
            loss = loss + cfg.algo.kl_coef * (kl * mask).sum() / num_tokens
        log("train/entropy", starpo.masked_mean(entropy.detach(), mask))
        for key, value in pg_metrics.items():
            log(f"train/{key}", value)
        return loss, pg_loss

    def critic_loss(rows, ids, attention, mask, num_tokens):
        with autocast(device):
            values = token_values(critic, ids, attention, mask)
        loss, v_metrics = starpo.value_loss(values, take("values", rows, mask), take("returns", rows, mask), mask, cfg.algo.value_clip,
                                            loss_normalizer=num_tokens)
        log("train/vf_clipfrac", v_metrics["vf_clipfrac"])
        return loss, loss

    for _ in range(cfg.algo.ppo_epochs):
        order = torch.randperm(B, generator=generator).to(device)
        for start in range(0, B, cfg.algo.mini_batch_size):
            mini = order[start:start + cfg.algo.mini_batch_size]
            num_tokens = batch["response_mask"][mini].sum().clamp(min=1)  # the loss normaliser
            # Actor, then critic: one model's gradients in memory at a time.
            for name, model, optimizer, loss_fn in (("actor", actor, actor_opt, actor_loss),
                                                    ("critic", critic, critic_opt, critic_loss)):
                if model is None:
                    continue
                optimizer.zero_grad(set_to_none=True)
                step_loss = 0.0  # the micro-batch losses add up to the mini-batch's token mean
                for rows, ids, attention, mask in micro_batches(batch, mini, cfg.algo.micro_batch_size):
                    loss, reported = loss_fn(rows, ids, attention, mask, num_tokens)
                    loss.backward()
                    step_loss = step_loss + reported.detach()
                log("train/policy_loss" if name == "actor" else "train/value_loss", step_loss)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.algo.grad_clip)
                if torch.isfinite(grad_norm):  # a NaN/inf loss shows here: skip the step, keep the weights
                    optimizer.step()
                else:
                    warnings.warn(f"non-finite {name} gradient norm: update skipped")
                    log(f"train/{name}_skipped_updates", 1)
                optimizer.zero_grad(set_to_none=True)  # free the gradients before the next model's pass
                log("train/grad_norm" if name == "actor" else "train/critic_grad_norm", grad_norm)
    metrics = {name: float(sums[name]) / counts[name] for name in sums}
    for name in ("train/actor_skipped_updates", "train/critic_skipped_updates"):
        if name in sums:
            metrics[name] = float(sums[name])
    if critic is not None:  # how much of the return's variance the critic explains (1 = all, <0 = worse than 0)
        mask = batch["response_mask"]
        residual = starpo.masked_mean((batch["returns"] - batch["values"]) ** 2, mask) - \
            starpo.masked_mean(batch["returns"] - batch["values"], mask) ** 2
        variance = starpo.masked_mean(batch["returns"] ** 2, mask) - starpo.masked_mean(batch["returns"], mask) ** 2
        metrics["train/explained_variance"] = float(1 - residual / variance.clamp(min=1e-8))
    return metrics


# ======================================================================================================
# Metrics, evaluation, samples, checkpoints: what the user sees.
# ======================================================================================================
def rollout_metrics(trajectories, prefix):
    rewards = np.array([t["reward"] for t in trajectories])
    turns = [turn for t in trajectories for turn in t["turns"]]
    groups = {}
    for t in trajectories:  # echo-trap detector: do the N samples of one prompt still say different things?
        groups.setdefault(t["group"], []).append(tuple((turn["think"], tuple(turn["actions"])) for turn in t["turns"]))
    return {f"{prefix}/success": float(np.mean([t["success"] for t in trajectories])),
            f"{prefix}/reward_mean": float(rewards.mean()),
            f"{prefix}/reward_std": float(rewards.std()),
            f"{prefix}/actions_mean": float(np.mean([t["num_actions"] for t in trajectories])),
            f"{prefix}/response_tokens": float(np.mean([t["response_tokens"] for t in trajectories])),
            f"{prefix}/think_tokens": float(np.mean([t["think_tokens"] for t in trajectories])),
            f"{prefix}/valid_action_frac": float(np.mean([turn["format_ok"] for turn in turns])) if turns else 0.0,
            f"{prefix}/effective_action_frac": sum(t["num_effective"] for t in trajectories)
            / max(1, sum(t["num_actions"] for t in trajectories)),
            f"{prefix}/distinct_response_frac": float(np.mean([len(set(g)) / len(g) for g in groups.values()]))}


def report_zero_signal(metrics, since):
    """Say it once when a stretch of iterations begins in which no group's rewards differ: then every
    advantage is the critic's noise, or zero under GRPO, and the policy learns nothing. Returns the
    iteration the current stretch began at (None while there is signal)."""
    iteration = metrics["iteration"]
    if metrics["rollout/zero_signal"] and since is None:
        tqdm.write(f"iteration {iteration}: within every group all rewards are equal (valid-answer fraction "
                   f"{metrics['rollout/valid_action_frac']:.2f}): nothing to learn from. If the model never answers "
                   "in the format, give it a format warm-up (warmup.steps).")
        return iteration
    if not metrics["rollout/zero_signal"] and since is not None:
        stretch = iteration - since
        tqdm.write(f"iteration {iteration}: rewards differ within groups again, after {stretch} "
                   f"iteration{'s' * (stretch != 1)} without a learning signal")
        return None
    return since


def group_reward_std(scores, group_ids):
    """Mean over groups of the in-group reward std: the paper's uncertainty signal (it drops before a collapse)."""
    return float(starpo.group_stats(scores, group_ids)[2].mean())  # the filter's own (Bessel) std


def evaluate(model, chat, cfg, title, run_dir):
    """One rollout per fixed evaluation seed, in chunks of the training batch: no more memory than a
    training rollout, and the static decoder's cache of that batch size is reused. `title` heads the
    samples written to samples.md ("Evaluation at iteration 10")."""
    seeds = list(range(cfg.eval.seed_offset, cfg.eval.seed_offset + cfg.eval.num_seeds))
    chunk = cfg.rollout.groups * cfg.rollout.group_size
    trajectories = []
    # Sample from a copy of the random state: an evaluation added or left out (the last iteration of a run
    # that is later extended) never shifts the training's random stream, so resuming equals not stopping.
    with torch.random.fork_rng():
        for start in range(0, len(seeds), chunk):
            part = seeds[start:start + chunk]
            trajectories += rollout(llm_policy(model, chat, cfg, cfg.eval.temperature, batch_size=chunk),
                                    chat, cfg, part, part)
    with open(os.path.join(run_dir, "samples.md"), "a") as f:  # read these to see the echo trap happen
        f.write(f"\n# {title}\n")
        for t in trajectories[:cfg.eval.samples]:
            f.write(f"\n## seed {t['seed']}: reward {t['reward']:g}, success {t['success']}\n")
            for k, turn in enumerate(t["turns"], 1):
                f.write(f"- turn {k}: think {turn['think'][:200]!r} -> actions {turn['actions']} "
                        f"(format ok: {turn['format_ok']}), reward {turn['reward']:g}\n")
            f.write(f"\n```\n{chat.tokenizer.decode(t['ids'])}\n```\n")
    metrics = rollout_metrics(trajectories, "eval")
    return {k: metrics[k] for k in ("eval/success", "eval/reward_mean", "eval/actions_mean", "eval/valid_action_frac")}


def save_checkpoint(path, iteration, models, optimizers, seed_rng, generator):
    """actor/ (from_pretrained-loadable, with the tokenizer), reference/, and state.pt with the rest."""
    tmp, old = path + ".tmp", path + ".old"
    for leftover in (tmp, old):  # from a run that crashed while saving
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        models["actor"].save_pretrained(os.path.join(tmp, "actor"))
        models["tokenizer"].save_pretrained(os.path.join(tmp, "actor"))
        if models["reference"] is not None:
            models["reference"].save_pretrained(os.path.join(tmp, "reference"))
        torch.save(dict(iteration=iteration,
                        critic=models["critic"].state_dict() if models["critic"] is not None else None,
                        optimizers={name: opt.state_dict() for name, opt in optimizers.items()},
                        rng=dict(numpy=seed_rng.bit_generator.state, torch=torch.get_rng_state(),
                                 cuda=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                                 generator=generator.get_state())), os.path.join(tmp, "state.pt"))
    except Exception as error:  # a full disk: OSError, torch.save's RuntimeError or safetensors' own error
        shutil.rmtree(tmp, ignore_errors=True)
        raise save_failed(os.path.dirname(path), tmp, error) from None
    if os.path.isdir(path):  # swap in only a complete checkpoint
        os.rename(path, old)
    os.rename(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def format_warmup(actor, chat, cfg, device):
    """Supervised warm-up on transcripts of the answer format (the "cold start" of many RL recipes), for
    models that cannot follow it yet: the in-process models' random weights, and small pretrained models
    that echo the prompt's placeholders instead of answering. The transcripts' actions are uniformly
    random: it teaches the format, not the game, so RL starts at random-policy skill (compare eval/success
    at iteration 0 with baselines.py).

    With warmup.env_text it also learns to predict the environment's replies (the reward, the next
    grid): the tiny model's stand-in for what Qwen brings from pre-training. To predict the grid after
    "Up" it must find the player and know how moves work, the very features a policy needs; which
    action is good is still left to RL, since the transcripts' actions are random."""
    rng = random.Random(cfg.seed)
    optimizer = torch.optim.AdamW(actor.parameters(), lr=cfg.warmup.lr)
    total = torch.tensor(float("nan"))
    for _ in tqdm(range(cfg.warmup.steps), desc="format warm-up", leave=False):
        seeds = [rng.randrange(cfg.eval.seed_offset) for _ in range(cfg.warmup.batch_size)]
        batch = collate(rollout(random_policy(chat, cfg, rng), chat, cfg, seeds, seeds), chat.pad_id, device)
        if cfg.warmup.env_text:  # the targets: the answers and every token after the first one (B, T-1)
            batch["response_mask"] = batch["response_mask"].cummax(dim=1).values * batch["attention_mask"][:, 1:]
        num_tokens = batch["response_mask"].sum()
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _, ids, attention, mask in micro_batches(batch, torch.arange(len(seeds)), cfg.algo.micro_batch_size):
            with autocast(device):
                logp, _ = token_logprobs(actor, ids, attention, mask, 1.0, False)
            loss = -(logp * mask).sum() / num_tokens  # summed over micro-batches: the batch's token mean
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), cfg.algo.grad_clip)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(total)


# ======================================================================================================
# The training loop: rollout -> filter -> score -> advantages -> update, and the bookkeeping around it.
# ======================================================================================================
def train(cfg_dict, resume_dir=None, bench=False, ctrl_c=None):
    cfg = namespace(cfg_dict)
    device = torch.device("cuda" if cfg.train.device == "cuda" or (cfg.train.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    torch.manual_seed(cfg.seed)  # sampling; env seeds come from seed_rng below, puzzles from their seeds

    # --- models -------------------------------------------------------------------------------------
    tokenizer, actor = load_models(cfg, device, os.path.join(resume_dir, "checkpoint", "actor") if resume_dir else None)
    chat = chat_format(tokenizer, actor.generation_config)  # end-of-turn and stop ids, from the model's own template
    # The run folder is made once the model has loaded: a start that fails there leaves nothing behind.
    run_dir = resume_dir or cfg.run_dir or new_run_dir(cfg.env.name)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg_dict, f, sort_keys=False)
    checkpoint = os.path.join(run_dir, "checkpoint")
    sampler = bf16_sampler(actor) if device.type == "cuda" else actor  # the CPU samples with the actor
    first_metrics = {"iteration": 0}  # what happened before iteration 1, written with the first evaluation
    if not resume_dir and cfg.warmup.steps > 0:
        if cfg.model.name not in tiny.IN_PROCESS_MODELS and cfg.eval.every > 0:  # a real model's own starting point
            before = evaluate(sampler, chat, cfg, "Evaluation before the format warm-up", run_dir)
            first_metrics.update({key.replace("eval/", "pre_warmup/"): value for key, value in before.items()})
        warmup_start = time.time()
        first_metrics["warmup/loss"] = format_warmup(actor, chat, cfg, device)
        first_metrics["perf/warmup_s"] = time.time() - warmup_start
        copy_weights(actor, sampler)
        tqdm.write(f"format warm-up: {cfg.warmup.steps} steps in {first_metrics['perf/warmup_s']:.0f} s, "
                   f"final loss {first_metrics['warmup/loss']:.3f}")
    critic = build_critic(cfg, actor, device)
    reference = None
    if cfg.algo.kl_coef > 0:  # frozen copy of the starting policy, only when a KL term needs it
        reference = (AutoModelForCausalLM.from_pretrained(os.path.join(checkpoint, "reference"), dtype=torch.float32).to(device)
                     if resume_dir else copy.deepcopy(actor)).eval().requires_grad_(False)
    if cfg.model.gradient_checkpointing:  # after the sampler's copy: the sampler never runs backward
        actor.gradient_checkpointing_enable()
        if critic is not None:
            critic.backbone.gradient_checkpointing_enable()
    optimizers = {"actor": torch.optim.AdamW(actor.parameters(), lr=cfg.algo.actor_lr, weight_decay=cfg.algo.weight_decay)}
    if critic is not None:
        optimizers["critic"] = torch.optim.AdamW(critic.parameters(), lr=cfg.algo.critic_lr, weight_decay=cfg.algo.weight_decay)
    seed_rng = np.random.default_rng(cfg.seed)  # training seeds, drawn below eval.seed_offset
    generator = torch.Generator().manual_seed(cfg.seed)  # mini-batch order
    start = 1
    if resume_dir:
        check_finite_weights(actor, os.path.join(checkpoint, "actor"))
        state = load_state(run_dir)
        start = state["iteration"] + 1
        if critic is not None:
            critic.load_state_dict(state["critic"])
        for name, optimizer in optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        seed_rng.bit_generator.state = state["rng"]["numpy"]
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        generator.set_state(state["rng"]["generator"])
        drop_after_checkpoint(run_dir, state["iteration"])
    elif os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        os.remove(os.path.join(run_dir, "metrics.jsonl"))
    models = dict(actor=actor, tokenizer=tokenizer, critic=critic, reference=reference)

    def write(metrics):
        with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps(metrics) + "\n")

    P, N = cfg.rollout.groups, cfg.rollout.group_size
    started, zero_signal_since, last_eval = time.time(), None, None
    if start > cfg.train.iterations:
        tqdm.write(f"{run_dir} already has its {cfg.train.iterations} iterations: to train on, raise them, "
                   f"e.g. python ragen_mini.py --resume {run_dir} train.iterations={2 * cfg.train.iterations}")
    if start == 1 and cfg.eval.every > 0:
        write({**first_metrics, **evaluate(sampler, chat, cfg, "Evaluation at iteration 0", run_dir)})
    progress = tqdm(range(start, cfg.train.iterations + 1), desc="train", initial=start - 1,
                    total=cfg.train.iterations, disable=bench)
    for iteration in progress:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        clock = [time.perf_counter()]

        def lap():  # phase timings: wait for the GPU at phase boundaries only
            if device.type == "cuda":
                torch.cuda.synchronize()
            clock.append(time.perf_counter())
            return clock[-1] - clock[-2]

        # 1. ROLLOUT: P seeds x N samples; the N samples of a seed form one group
        seeds = seed_rng.integers(0, cfg.eval.seed_offset, size=P)
        policy = llm_policy(sampler, chat, cfg, cfg.rollout.temperature, batch_size=P * N)
        trajectories = rollout(policy, chat, cfg, np.repeat(seeds, N), np.repeat(np.arange(P), N))
        metrics = {"iteration": iteration, **rollout_metrics(trajectories, "rollout")}
        metrics["perf/rollout_s"] = lap()
        metrics["perf/generate_s"] = policy.generate_s
        # 2. FILTER (StarPO-S): keep the groups whose rewards disagree most; the rest carry no signal
        scores = torch.tensor([t["reward"] for t in trajectories])
        group_ids = torch.tensor([t["group"] for t in trajectories])
        keep = starpo.select_groups_by_reward_std(scores, group_ids, cfg.algo.filter_ratio, cfg.algo.filter_largest)
        kept = [t for t, k in zip(trajectories, keep.tolist()) if k]
        metrics["rollout/group_reward_std_all"] = group_reward_std(scores, group_ids)
        metrics["rollout/group_reward_std_kept"] = group_reward_std(scores[keep], group_ids[keep])
        metrics["rollout/zero_signal"] = float(metrics["rollout/group_reward_std_all"] == 0)
        zero_signal_since = report_zero_signal(metrics, zero_signal_since)
        # 3. SCORE: the rollout policy's log-probs, the critic's values, the reference's log-probs
        batch = collate(kept, chat.pad_id, device)
        score_batch(batch, actor, critic, reference, cfg, device)
        metrics["perf/logprob_s"] = lap()
        # 4. ADVANTAGES: GAE over each whole conversation (PPO), or group-normalised scores (GRPO)
        metrics.update(compute_advantages(batch, cfg))
        # 5. UPDATE: clipped policy loss and value loss, mini-batch by mini-batch
        metrics.update(update(batch, actor, critic, optimizers["actor"], optimizers.get("critic"), cfg, device, generator))
        copy_weights(actor, sampler)
        metrics["perf/update_s"] = lap()
        metrics["perf/iteration_s"] = clock[-1] - clock[0]
        metrics["perf/gen_tokens_per_s"] = sum(t["response_tokens"] for t in trajectories) / metrics["perf/rollout_s"]
        metrics["perf/trained_tokens"] = int(batch["response_mask"].sum())
        if device.type == "cuda":
            metrics["perf/peak_reserved_gb"] = torch.cuda.max_memory_reserved() / 2**30
        metrics["perf/peak_mem_gb"] = (torch.cuda.max_memory_allocated() if device.type == "cuda" else
                                       resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**30
        interrupted = ctrl_c is not None and ctrl_c.pressed
        last = iteration == cfg.train.iterations or interrupted or (
            cfg.train.time_limit_min > 0 and time.time() - started > 60 * cfg.train.time_limit_min)
        if cfg.eval.every > 0 and (iteration % cfg.eval.every == 0 or last) and not interrupted:
            metrics.update(evaluate(sampler, chat, cfg, f"Evaluation at iteration {iteration}", run_dir))
        write(metrics)
        if bench:
            print(json.dumps({k: v for k, v in metrics.items() if k.startswith("perf/") or k == "iteration"}), flush=True)
        elif iteration % 10 == 0 or last:  # a page of plots costs about a second: not every iteration
            plots.plot_run(run_dir)
        if (cfg.checkpoint.every > 0 and (iteration % cfg.checkpoint.every == 0 or last)) or interrupted:
            save_checkpoint(checkpoint, iteration, models, optimizers, seed_rng, generator)
        last_eval = metrics.get("eval/success", last_eval)
        progress.set_postfix(rollout_success=f"{metrics['rollout/success']:.2f}",
                             eval_success="-" if last_eval is None else f"{last_eval:.2f}",
                             entropy=f"{metrics['train/entropy']:.2f}")
        if last and iteration < cfg.train.iterations:  # time limit or Ctrl-C (the bar ends by itself otherwise)
            break
    progress.close()
    if not bench:
        print(run_summary(run_dir, time.time() - started))
    return run_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML file laid over config.yaml (default: config.yaml alone)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from RUN_DIR/checkpoint")
    parser.add_argument("--bench", type=int, metavar="K", default=0,
                        help="speed benchmark: K iterations of a random-weight Qwen2.5-0.5B-shaped model, "
                             "fixed tokens per turn, one JSON line of timings per iteration")
    parser.add_argument("--bench-tokens", type=int, default=128, help="new tokens per turn in --bench")
    parser.add_argument("overrides", nargs="*", help="section.key=value, e.g. env.name=frozenlake")
    args = parser.parse_args(argv)
    if args.resume and args.config:
        parser.error(f"--config {args.config} with --resume: a resumed run keeps its own {args.resume}/config.yaml; "
                     "give changes as section.key=value overrides")
    transformers.utils.logging.disable_progress_bar()  # its loading and saving bars would break into ours
    overrides = list(args.overrides)
    if args.bench:
        if not any(o.startswith("model.name=") for o in overrides):
            overrides.insert(0, "model.name=random-qwen2.5-0.5b")
        overrides += [f"rollout.max_new_tokens={args.bench_tokens}", f"rollout.min_new_tokens={args.bench_tokens}",
                      "eval.every=0", "checkpoint.every=0", f"train.iterations={args.bench}"]
    try:
        if args.resume:
            check_resumable(args.resume)
        config_path = os.path.join(args.resume, "config.yaml") if args.resume else args.config
        cfg = load_config(config_path, overrides)
        with CtrlC() as ctrl_c:
            run_dir = train(cfg, resume_dir=args.resume, bench=bool(args.bench), ctrl_c=ctrl_c)
        if ctrl_c.pressed:
            raise SystemExit(130)  # the shell's code for "stopped by Ctrl-C"; the summary says how to resume
        return run_dir
    except ConfigError as error:
        raise SystemExit(f"config error: {error}") from None
    except RunError as error:
        raise SystemExit(f"error: {error}") from None
    except OSError as error:  # a file the run could not write: a full disk, a folder it may not write
        raise SystemExit(describe_os_error(error)) from None
    except torch.OutOfMemoryError:
        raise SystemExit("error: the GPU ran out of memory. Lower algo.micro_batch_size, set "
                         "model.gradient_checkpointing=true, or lower rollout.max_new_tokens / rollout.groups.") from None


if __name__ == "__main__":
    main()

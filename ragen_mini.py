"""ragen-mini: multi-turn RL for LLM agents (RAGEN / StarPO) on one GPU; the trainer, read top to bottom.

    python ragen_mini.py --config config.yaml          # the paper's StarPO-S setup
    python ragen_mini.py --config configs/bandit.yaml  # offline, on a laptop CPU
    python ragen_mini.py --eval RUN_DIR eval.k=4       # a saved actor on the evaluation seeds, with pass@4
    python ragen_mini.py --export ragen RUN_DIR        # the RAGEN command that reruns its settings on
                                                         more GPUs

One iteration of StarPO (the paper's Figure 2), top to bottom in `train()`:
  1. ROLLOUT    P prompts (env seeds) x N samples; each trajectory is a multi-turn conversation: the model
                answers `<think>..</think><answer>a || b</answer>`, the env executes the actions and the
                reward and next state come back as the next user message.    -> rollout.play_episodes()
  2. FILTER     StarPO-S keeps the groups whose N rewards disagree most.
                -> starpo.select_groups_by_reward_std
  3. SCORE      log-probs of the sampled tokens, critic values, the reference. -> old_logprobs_and_values()
  4. ADVANTAGES GAE over the whole conversation (PPO) or group-normalised (GRPO). -> compute_advantages()
  5. UPDATE     clipped policy loss + value loss over mini-batches.            -> update()
This file reads in that order: train(), then each step's functions, then a marked section a reader may skip
(setup, the format warm-up, evaluation and checkpoints, the command line). The algorithms live in starpo.py,
the environments in envs.py. config.py reads and checks the config, models.py loads the LLM and builds the
critic and the sampler, rollout.py plays the multi-turn conversations, tiny.py the in-process model, plots.py
the plots, bookkeeping.py the metrics, evaluation, checkpoints, run folder and resume. The optional package
fast/ computes the same numbers faster on a GPU (rollout.engine); every function here reads without it.
"""
import argparse
import copy
import json
import os
import random
import resource
import time
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import torch
import transformers
import yaml
from tqdm import tqdm
from transformers import AutoModelForCausalLM

import export
import plots
import run_log
import starpo
import tiny
from bookkeeping import (CtrlC, RunError, Stopped, Watchdog, check_finite_weights, check_no_links,
                         check_resumable, describe_os_error, discard_start, drop_after_checkpoint, evaluate,
                         group_reward_std, load_state, open_run_folder, release_lock, report_zero_signal,
                         rollout_metrics, run_summary, save_checkpoint, write_file, write_metrics)
from config import ConfigError, load_config, load_run_config, namespace
from models import (Critic, build_critic, build_sampler, copy_weights, fast_engine, load_models,
                    resolve_engine, train_device, use_cpu_threads)
from rollout import (ChatFormat, LLMPolicy, Sampler, Trajectory, chat_format, own_thoughts_policy,
                     play_episodes, random_policy, reply_spans, thought_length, without_thoughts)


# ======================================================================================================
# The training loop: one StarPO iteration is five steps, each a function below, in the order they run.
# ======================================================================================================
def train(cfg_dict, resume_dir=None, bench=False, ctrl_c=None, watchdog=None):
    beat = watchdog.beat if watchdog else (lambda doing: None)  # a run that stops moving ends (Watchdog)
    run = setup(cfg_dict, resume_dir, beat)
    cfg, P, N = run.cfg, run.cfg.rollout.groups, run.cfg.rollout.group_size
    engine = fast_engine(cfg)  # the fast package (fast/) with rollout.engine=fast, else None
    progress = tqdm(range(run.start, cfg.train.iterations + 1), desc="train", initial=run.start - 1,
                    total=cfg.train.iterations, disable=bench)
    if ctrl_c is not None:
        ctrl_c.training = True  # from here on a signal lets the iteration finish and saves a checkpoint
    for iteration in progress:
        beat(f"in iteration {iteration}")
        clock = Clock(run.device)

        # 1. ROLLOUT: P seeds x N samples; the N samples of a seed form one group
        seeds = run.seed_rng.integers(0, cfg.eval.seed_offset, size=P)
        policy = LLMPolicy(run.sampler, cfg, cfg.rollout.temperature)
        trajectories = play_episodes(policy, run.chat, cfg, np.repeat(seeds, N), np.repeat(np.arange(P), N))
        metrics = {"iteration": iteration, **rollout_metrics(trajectories, "rollout"),
                   "perf/rollout_s": clock.lap(), "perf/generate_s": policy.generate_s,
                   "perf/decode_steps": policy.decode_steps}
        if cfg.rollout.mi_groups > 0:  # do the thoughts still depend on the state (the Echo Trap's template)?
            metrics.update(measure_thought_mi(run.actor, run.chat, trajectories, cfg, run.device))
            metrics["perf/thought_mi_s"] = clock.lap()

        # 2. FILTER (StarPO-S): keep the groups whose rewards disagree most; the rest carry no signal
        rewards = torch.tensor([t.reward for t in trajectories])  # (P*N,)
        group_ids = torch.tensor([t.group for t in trajectories])  # (P*N,)
        keep = starpo.select_groups_by_reward_std(rewards, group_ids, cfg.algo.filter_ratio,
                                                  cfg.algo.filter_largest)
        kept = [t for t, k in zip(trajectories, keep.tolist()) if k]
        metrics["rollout/group_reward_std_all"] = group_reward_std(rewards, group_ids)
        metrics["rollout/group_reward_std_kept"] = group_reward_std(rewards[keep], group_ids[keep])
        metrics["rollout/zero_signal"] = float(metrics["rollout/group_reward_std_all"] == 0)

        # 3. SCORE: the rollout policy's log-probs, the critic's values, the reference's log-probs
        # the paper's code trains on every token after the system message and the user turn's first token
        # (§9.1)
        train_from = run.chat.system_length + 1 if cfg.algo.train_tokens == "after_system" else None
        batch = collate(kept, run.chat.pad_id, run.device, train_from)
        old_logprobs_and_values(batch, run.actor, run.critic, run.reference, cfg, run.device)
        metrics["perf/logprob_s"] = clock.lap()

        # 4. ADVANTAGES: GAE over each whole conversation (PPO), or group-normalised rewards (GRPO)
        metrics.update(compute_advantages(batch, cfg))

        # 5. UPDATE: clipped policy loss and value loss, mini-batch by mini-batch
        metrics.update(update(batch, run.actor, run.critic, run.optimizers["actor"],
                              run.optimizers.get("critic"), cfg, run.device, run.generator))
        copy_weights(run.actor, run.sampler.model)
        metrics["perf/update_s"] = clock.lap()
        if iteration == run.start and engine:
            engine.freeze_collector()  # what lives to the end leaves the cycle collector's passes
        if end_of_iteration(run, metrics, trajectories, batch, clock, progress, ctrl_c, bench):
            break
    progress.close()
    run_log.close_logger(run.logger)
    release_lock(run.run_dir)
    if engine:
        engine.release_collector()
    if not bench:
        print(run_summary(run.run_dir, time.time() - run.started))
    return run.run_dir


# ======================================================================================================
# 1. ROLLOUT (rollout.play_episodes), and a measure of the thoughts: do they still depend on the state?
# ======================================================================================================
@torch.no_grad()
def measure_thought_mi(actor, chat, trajectories, cfg, device):
    """rollout/thought_mi (starpo.thought_mutual_information): the first thought of one trajectory in each of
    the first rollout.mi_groups groups (all groups when there are fewer), scored under every one of those
    groups' first prompts, M x M rows. The thought is the reply's tokens before its closing tag
    (rollout.thought_length), as sampled, whether or not the reply kept the format. Nothing without
    rollout.think or with one group."""
    firsts = {}
    for t in trajectories:
        firsts.setdefault(t.group, t)
    firsts = list(firsts.values())[:cfg.rollout.mi_groups]
    if len(firsts) < 2 or not cfg.rollout.think:
        return {}
    prompts, thoughts = [], []
    for t in firsts:
        start, end = reply_spans(t.sampled)[0]  # the first reply, after the first prompt
        prompts.append(t.ids[:start])
        thoughts.append(t.ids[start:start + thought_length(t.ids[start:end], chat.tokenizer)])
    pairs = [Trajectory(seed=0, group=0, ids=prompt + thought, sampled=[0] * len(prompt) + [1] * len(thought))
             for prompt in prompts for thought in thoughts]  # row i * M + j: thought j after prompt i
    batch = collate(pairs, chat.pad_id, device)
    summed = torch.zeros(len(pairs), device=device)  # (M*M,) log p(thought j | prompt i)
    for rows, ids, mask in micro_batches(batch, torch.arange(len(pairs)), cfg):
        logp = token_logprobs(actor, ids, mask, cfg)[0]
        summed[rows.to(device)] = (logp * mask).sum(-1)
    return {"rollout/thought_mi":
            float(starpo.thought_mutual_information(summed.view(len(firsts), len(firsts))))}


# ======================================================================================================
# 2. FILTER: starpo.select_groups_by_reward_std, called from train() above.
# 3. SCORE: per-token log-probs, entropies and values by forward passes over the exact token ids.
# Shapes: B trajectories, T tokens; per-token quantities live on the (B, T-1) grid of "next tokens"
# because the logits at position t predict token t+1 (docs/paper.md §7.4).
# ======================================================================================================
@dataclass
class Batch:
    """The kept trajectories as right-padded tensors: B rows of T tokens. Per-token quantities live on the
    (B, T-1) grid of next tokens: column t belongs to token t+1, the one the logits at t predict."""
    input_ids: torch.Tensor        # (B, T)
    attention_mask: torch.Tensor   # (B, T) 1 on real tokens, 0 on padding
    response_mask: torch.Tensor    # (B, T-1) 1 where token t+1 was sampled: Trajectory.sampled[1:]
    rewards: torch.Tensor          # (B,) the trajectories' rewards
    group_ids: torch.Tensor        # (B,)
    old_logp: torch.Tensor = None  # (B, T-1) the rollout policy's log-probs      } set by step 3,
    values: torch.Tensor = None    # (B, T-1) the critic's values (GAE only)      } SCORE
    ref_logp: torch.Tensor = None  # (B, T-1) the reference's log-probs (KL only) }
    advantages: torch.Tensor = None  # (B, T-1)                                    } set by step 4,
    returns: torch.Tensor = None     # (B, T-1) the critic's targets (GAE only)    } ADVANTAGES


def collate(trajectories, pad_id, device, train_from=None):
    """Right-pad the kept trajectories into a Batch, filled in numpy (as rollout.left_pad; a torch.tensor per
    row is several times slower). train_from=k (the paper's code, algo.train_tokens=after_system,
    docs/paper.md §9.1): the losses cover every token from index k on, not only the sampled ones."""
    lengths = np.array([len(t.ids) for t in trajectories])  # (B,)
    input_ids = np.full((len(trajectories), lengths.max()), pad_id, dtype=np.int64)  # (B, T)
    sampled = np.zeros(input_ids.shape, dtype=np.float32)  # (B, T)
    for i, t in enumerate(trajectories):
        input_ids[i, :len(t.ids)], sampled[i, :len(t.ids)] = t.ids, t.sampled
        if train_from is not None:
            sampled[i, train_from:len(t.ids)] = 1.0
    attention_mask = np.arange(input_ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
    return Batch(input_ids=torch.from_numpy(input_ids).to(device),
                 attention_mask=torch.from_numpy(attention_mask.astype(np.int64)).to(device),
                 response_mask=torch.from_numpy(sampled[:, 1:]).to(device),
                 rewards=torch.tensor([t.reward for t in trajectories], device=device),
                 group_ids=torch.tensor([t.group for t in trajectories], device=device))


@torch.no_grad()
def old_logprobs_and_values(batch, actor, critic, reference, cfg, device):
    """Sets batch.old_logp, .values and .ref_logp (B, T-1): the rollout policy's numbers, before the
    update."""
    B, width = batch.response_mask.shape
    batch.old_logp, batch.values, batch.ref_logp = (torch.zeros((B, width), device=device) for _ in range(3))
    for rows, ids, mask in micro_batches(batch, torch.arange(B), cfg):
        cols = slice(0, mask.shape[1])
        batch.old_logp[rows, cols] = token_logprobs(actor, ids, mask, cfg)[0]
        if critic is not None:
            batch.values[rows, cols] = token_values(critic, ids, configured_gae_steps(mask, cfg))
        if reference is not None:
            batch.ref_logp[rows, cols] = token_logprobs(reference, ids, mask, cfg)[0]


def micro_batches(batch, indices, cfg):
    """Consecutive slices of `indices`, each trimmed to its longest row (a crop, thanks to right padding):
    -> list of (rows, (b, t) ids, (b, t-1) mask). A slice takes rows while it has
    fewer than algo.micro_batch_size and, with algo.micro_batch_tokens > 0, while rows x width, what its
    activations scale with, stays within it: long contexts get fewer rows, and memory stays bounded. A longer
    row goes alone.
    Rows of 1000, 900, 1200 and 800 tokens, size 4, max_tokens 2500: [1000, 900] 1000 wide, then
    [1200, 800]."""
    size, max_tokens = cfg.algo.micro_batch_size, cfg.algo.micro_batch_tokens
    lengths = batch.attention_mask[indices].sum(-1).tolist()  # one host transfer
    slices, start = [], 0
    while start < len(indices):
        end, width = start + 1, lengths[start]
        while end < len(indices) and end - start < size and (
                max_tokens == 0 or (end - start + 1) * max(width, lengths[end]) <= max_tokens):
            width, end = max(width, lengths[end]), end + 1
        rows = indices[start:end]
        slices.append((rows, batch.input_ids[rows, :width], batch.response_mask[rows, :width - 1]))
        start = end
    return slices


def token_logprobs(actor, input_ids, response_mask, cfg, with_entropy=False, temperature=None):
    """log pi(token t+1 | tokens <= t) and the entropy at t, at response positions only, at the sampler's
    temperature (rollout.temperature) unless another is given. -> two (b, T-1), 0 off the response positions.
    The last hidden state at position t (hidden_states(actor.base_model, input_ids): (b, T, H)) predicts token
    t+1, so column t of the (b, T-1) grid pairs the state at t with token t+1, and response_mask[:, t] = 1
    says that token t+1 was sampled. flat_hidden (n, H) holds the states of the response columns, row by
    row, and targets (n,) the tokens they predict; starpo.logprob_and_entropy scores the LM head's logits.

    The logits are the largest tensor of training (151,936 floats per token for Qwen): they are made
    only for response tokens, `chunk` at a time (algo.logits_chunk), and with gradients the chunk is
    recomputed in backward (checkpoint) instead of stored, so memory holds the hidden states alone
    (docs/paper.md §7.11). Op by op, a chunk's float32 logits, softmax and their gradients take about
    five chunk x V x 4 bytes at once: 3 GB for 1,024 of Qwen's tokens, in some twenty passes over them (the
    fast engine compiles them into a few, fast/compile.py).
    """
    temperature, chunk = (cfg.rollout.temperature if temperature is None else temperature,
                          cfg.algo.logits_chunk)
    with autocast(input_ids.device):  # checkpoint's recomputation in backward runs under it too
        # BEGIN SOLUTION ex10-logprobs
        hidden = hidden_states(actor.base_model, input_ids)[:, :-1]  # (b, T-1, H)
        at = response_mask.bool()
        flat_hidden, targets = hidden[at], input_ids[:, 1:][at]  # (n, H), (n,)
        # END SOLUTION
        lm_head = actor.get_output_embeddings()
        engine = fast_engine(cfg)
        logprob_and_entropy = engine.logprob_and_entropy if engine else starpo.logprob_and_entropy

        def chunk_fn(h, y):
            return logprob_and_entropy(lm_head(h), y, temperature, with_entropy)  # logits (c, V) -> two (c,)

        pieces = []
        for start in range(0, len(targets), chunk):
            args = (flat_hidden[start:start + chunk], targets[start:start + chunk])
            pieces.append(torch.utils.checkpoint.checkpoint(chunk_fn, *args, use_reentrant=False)
                          if torch.is_grad_enabled() else chunk_fn(*args))
        logp, entropy = (torch.zeros(response_mask.shape, device=hidden.device)
                         for _ in range(2))  # (b, T-1) each
        if pieces:
            logp = logp.masked_scatter(at, torch.cat([p[0] for p in pieces]))
            entropy = entropy.masked_scatter(at, torch.cat([p[1] for p in pieces]))
    return logp, entropy


def token_values(critic, input_ids, response_mask):
    """V at every response position -> (b, T-1): the value of the state before token t+1 is sampled."""
    with autocast(input_ids.device):
        hidden = hidden_states(critic.backbone, input_ids)[:, :-1]
        values = critic.value_head(hidden[response_mask.bool()]).squeeze(-1).float()  # (n,)
    return torch.zeros(response_mask.shape, device=hidden.device).masked_scatter(response_mask.bool(), values)


def hidden_states(backbone, input_ids):
    """(b, T, H) last hidden states of right-padded rows, with no attention mask: a row's pads all come after
    its last token, so causal attention alone hides them from the real tokens (the pads' own outputs are never
    read) and positions from 0 are right (the left-padded rollout needs both, docs/paper.md §7.3); a mask
    would cost the fused causal kernel. One forward over whole rows needs no KV cache."""
    return backbone(input_ids=input_ids, use_cache=False).last_hidden_state


def autocast(device):
    """bf16 matmuls on the GPU, float32 weights and losses (tiny updates like 1e-6 survive in float32)."""
    return (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
            else torch.autocast("cpu", enabled=False))


# ======================================================================================================
# 4. ADVANTAGES (paper section 3.2): the trajectory's summed reward sits on its last generated token.
# PPO: GAE over the whole multi-turn token sequence, skipping observation tokens, then whitening.
# GRPO: the trajectory's reward normalised within its group, on every one of its tokens.
# ======================================================================================================
def compute_advantages(batch, cfg):
    """Sets batch.advantages and batch.returns (B, T-1); returns the KL metric when a KL term is on."""
    mask = batch.response_mask  # (B, T-1)
    kl = starpo.kl_estimate(batch.old_logp, batch.ref_logp, "k1") * mask if cfg.algo.kl_coef > 0 else None
    if cfg.algo.estimator == "gae":
        token_rewards = starpo.token_level_rewards(batch.rewards, mask, kl, cfg.algo.kl_coef)  # (B, T-1)
        steps = configured_gae_steps(mask, cfg)  # (B, T-1) GAE's time steps
        engine = fast_engine(cfg)
        compute_gae = engine.compute_gae if engine else starpo.compute_gae  # fast/gae.py: the same numbers
        advantages, returns = compute_gae(token_rewards, batch.values, steps, cfg.algo.gamma, cfg.algo.lam)
        batch.returns = returns * mask  # the critic learns on the sampled tokens only
        batch.advantages = starpo.masked_whiten(advantages, mask)
    else:
        per_trajectory = starpo.compute_grpo_advantages(batch.rewards, batch.group_ids,
                                                        normalize_by_std=cfg.algo.grpo_std_normalize)  # (B,)
        batch.advantages = per_trajectory[:, None] * mask
        batch.returns = torch.zeros_like(mask)
    return {} if kl is None else {"train/kl_ref": float(starpo.masked_mean(kl, mask))}


def configured_gae_steps(mask, cfg):
    """Where GAE takes its time steps, and so where step 3 needs the critic's values: the sampled tokens,
    or with algo.gae_skip_observations=false (the paper's code, docs/paper.md §9.5) every token from
    the first sampled one to the last."""
    return mask if cfg.algo.gae_skip_observations else starpo.gae_steps(mask)


# ======================================================================================================
# 5. UPDATE: PPO epochs over mini-batches; each mini-batch is accumulated over micro-batches whose losses
# are normalised by the mini-batch's token count, so their sum is exactly the mini-batch token mean
# (docs/paper.md §7.8). Actor and critic have their own optimisers and gradient clipping.
# ======================================================================================================
def update(batch, actor, critic, actor_opt, critic_opt, cfg, device, generator):
    """algo.ppo_epochs passes over the batch, each in a new random order of its B rows
    (torch.randperm(B, generator=generator)) cut into mini-batches of algo.mini_batch_size rows (the last
    one may have fewer): one actor step, then (with a critic) one critic step, per mini-batch.
    - The actor step: zero the actor's gradients; for each micro-batch of the mini-batch
      (micro_batches(batch, mini, cfg) -> rows, ids, mask), token_logprobs(..., with_entropy=True), then
      starpo.actor_loss with the batch's old_logp, advantages and ref_logp cropped to it (crop) and
      loss_normaliser's number, and the loss's backward; then clipped_step(actor, actor_opt, cfg, "actor",
      logged).
    - The critic step: the same with token_values and starpo.value_loss (old values batch.values, targets
      batch.returns, algo.value_clip), then clipped_step(critic, critic_opt, cfg, "critic", logged).
    `logged` gets one value per step of train/policy_loss (the micro-batches' policy_loss metrics summed),
    train/grad_norm, train/value_loss (the micro-batches' critic losses summed, detached) and
    train/critic_grad_norm, and one value per micro-batch of actor_loss's other metrics (train/<key>) and
    of train/vf_clipfrac. Returns the train/* metrics: each one's mean, the skipped updates' counts, and
    the critic's explained variance."""
    B = batch.response_mask.shape[0]
    logged = {}  # name -> list of values; tensors stay on the device, one host transfer at the end
    # BEGIN SOLUTION ex12-update
    for _ in range(cfg.algo.ppo_epochs):
        order = torch.randperm(B, generator=generator).to(device)
        for start in range(0, B, cfg.algo.mini_batch_size):
            mini = order[start:start + cfg.algo.mini_batch_size]
            micro = micro_batches(batch, mini, cfg)

            def normaliser(mask):  # what each micro-batch's summed loss is divided by
                return loss_normaliser(batch.response_mask[mini], mask, len(micro), cfg.algo.loss_agg)
            steps = {}  # this actor step's metrics, one value per micro-batch

            # --- the actor step --------------------------------------------------------------------------
            actor_opt.zero_grad(set_to_none=True)
            for rows, ids, mask in micro:
                logp, entropy = token_logprobs(actor, ids, mask, cfg, with_entropy=True)
                loss, metrics = starpo.actor_loss(logp, entropy, crop(batch.old_logp, rows, mask),
                                                  crop(batch.advantages, rows, mask), mask, cfg.algo,
                                                  normaliser(mask), ref_logp=crop(batch.ref_logp, rows, mask))
                loss.backward()  # the micro-batch losses add up to the mini-batch's token mean
                for key, value in metrics.items():
                    steps.setdefault(f"train/{key}", []).append(value)
            logged.setdefault("train/policy_loss", []).append(sum(steps.pop("train/policy_loss")))
            for key, values in steps.items():  # token means of each micro-batch, averaged
                logged.setdefault(key, []).extend(values)
            logged.setdefault("train/grad_norm", []).append(clipped_step(actor, actor_opt, cfg, "actor",
                                                                         logged))

            # --- the critic step (PPO with GAE) ----------------------------------------------------------
            if critic is None:
                continue
            critic_opt.zero_grad(set_to_none=True)
            step_loss = 0.0
            for rows, ids, mask in micro:
                values = token_values(critic, ids, mask)
                loss, metrics = starpo.value_loss(values, crop(batch.values, rows, mask),
                                                  crop(batch.returns, rows, mask), mask, cfg.algo.value_clip,
                                                  loss_normalizer=normaliser(mask))
                loss.backward()
                step_loss = step_loss + loss.detach()
                logged.setdefault("train/vf_clipfrac", []).append(metrics["vf_clipfrac"])
            logged.setdefault("train/value_loss", []).append(step_loss)
            logged.setdefault("train/critic_grad_norm", []).append(clipped_step(critic, critic_opt, cfg,
                                                                                "critic", logged))
    # END SOLUTION
    metrics = {key: float(sum(values)) / len(values) for key, values in logged.items()}
    skipped = [key for key in ("train/actor_skipped_updates", "train/critic_skipped_updates")
               if key in logged]
    metrics.update({key: float(sum(logged[key])) for key in skipped})  # counts, not means
    if critic is not None:
        metrics["train/explained_variance"] = float(starpo.explained_variance(batch.returns, batch.values,
                                                                              batch.response_mask))
    return metrics


def loss_normaliser(mini_batch_mask, micro_batch_mask, num_micro_batches, loss_agg):
    """What a micro-batch's summed per-token loss is divided by before its backward, so that the gradients
    accumulated over the mini-batch's micro-batches are those of the mini-batch's loss. The masks are the
    (b, T-1) response masks of the whole mini-batch and of this micro-batch. loss_agg "token-mean": every
    response token of the mini-batch weighs the same, so every micro-batch divides by the mini-batch's
    token count and their sum is the mini-batch's token mean (docs/paper.md §7.8). "micro-batch-mean" (the
    paper's code, §9.3): each micro-batch divides by its own token count times the number of micro-batches,
    so the sum is the mean of the micro-batches' token means, and a token of a short micro-batch weighs
    more. A count is clamped to >= 1: an empty mask gives a zero loss, never NaN. -> a 0-dim tensor.

    A mini-batch of rows with 2, 5 and 1 response tokens, in micro-batches [2, 5] and [1]:
    token-mean divides both by 8; micro-batch-mean divides the first by 7 x 2 = 14, the second by 1 x 2 = 2.
    """
    # BEGIN SOLUTION ex11-loss-normaliser
    if loss_agg == "token-mean":
        return mini_batch_mask.sum().clamp(min=1)
    return micro_batch_mask.sum().clamp(min=1) * num_micro_batches
    # END SOLUTION


def crop(tensor, rows, mask):
    """A micro-batch's rows of a stored (B, T-1) tensor, cropped to the micro-batch's width."""
    return tensor[rows, :mask.shape[1]]


def clipped_step(model, optimizer, cfg, name, logged):
    """Clip the gradient norm of the model's parameters to algo.grad_clip (torch.nn.utils.clip_grad_norm_),
    then step; a NaN/inf norm (a broken loss) skips the step and keeps the weights, with a warning
    ("non-finite <name> gradient norm: update skipped") and a 1 appended to
    logged["train/<name>_skipped_updates"]. Either way it frees the gradients (zero_grad(set_to_none=True))
    before the next model's pass. -> the norm before clipping"""
    # BEGIN SOLUTION ex12-update
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.algo.grad_clip)
    if torch.isfinite(grad_norm):
        optimizer.step()
    else:
        warnings.warn(f"non-finite {name} gradient norm: update skipped")
        logged.setdefault(f"train/{name}_skipped_updates", []).append(1)
    optimizer.zero_grad(set_to_none=True)
    return grad_norm
    # END SOLUTION


# ======================================================================================================
# What a reader of the algorithm may skip: setup (models, format warm-up, resume), the end of an
# iteration (timings, evaluation, metrics, checkpoint) and the command line.
# ======================================================================================================
@dataclass
class Run:
    """What a run holds between iterations; setup() builds it, bookkeeping.save_checkpoint() saves it."""
    cfg: SimpleNamespace
    device: torch.device
    run_dir: str
    chat: ChatFormat
    actor: torch.nn.Module               # trained in float32
    # plays the episodes: the actor itself on the CPU, a bf16 copy on a GPU
    sampler: Sampler
    critic: Critic                       # None with GRPO
    reference: torch.nn.Module           # the frozen starting policy; None without a KL term
    optimizers: dict                     # "actor" (and "critic") -> AdamW
    seed_rng: np.random.Generator        # draws the training seeds, below eval.seed_offset
    generator: torch.Generator           # shuffles the mini-batches
    start: int                           # the first iteration to train
    started: float = field(default_factory=time.time)
    zero_signal_since: int = None        # the iteration a stretch without learning signal began at
    last_eval: float = None              # the latest eval/success, for the progress bar
    logger: object = None                # train.log_to's TensorBoard writer or W&B run (run_log); None: none


def setup(cfg_dict, resume_dir, beat):
    """The run folder (refused if it holds another run, locked against a second process), then build_run. A
    start that fails (a model that does not load, a first prompt longer than rollout.max_context, a full disk)
    leaves nothing behind."""
    run_log.check_installed(cfg_dict["train"]["log_to"])  # a missing package: one line, before any model
    run_dir, made = open_run_folder(namespace(cfg_dict), resume_dir)
    try:
        return build_run(cfg_dict, run_dir, resume_dir, beat)
    except BaseException:
        if not resume_dir:
            discard_start(run_dir, made)
        else:  # the checkpoint stays as it was, free for the next --resume
            release_lock(run_dir)
        raise


def load_policy(cfg, saved_actor=None):
    """What training and --eval both start from: the actor (from SAVED_ACTOR, a checkpoint's actor folder,
    when given), its chat format (end-of-turn and stop ids, from the model's own template) and the sampler
    that plays the episodes. Resolves rollout.engine=auto into fast or hf for this model and device.
    -> (device, actor, sampler); the chat format is sampler.chat"""
    device = train_device(cfg)
    torch.manual_seed(cfg.seed)  # sampling; env seeds come from the run's seed_rng, puzzles from their seeds
    tokenizer, actor = load_models(cfg, device, saved_actor)
    if saved_actor:
        check_finite_weights(actor, saved_actor)
    chat = chat_format(tokenizer, actor.generation_config)
    cfg.rollout.engine = resolve_engine(cfg, actor, device)  # every function that reads it sees fast or hf
    return device, actor, build_sampler(actor, chat, cfg, device)


def build_run(cfg_dict, run_dir, resume_dir, beat):
    """Models, format warm-up, critic, reference, optimisers and random states (restored from
    RUN_DIR/checkpoint on resume), and the evaluation at iteration 0 (on resume, the checkpoint's, if it is
    owed)."""
    cfg = namespace(cfg_dict)
    saved_actor = os.path.join(resume_dir, "checkpoint", "actor") if resume_dir else None
    device, actor, sampler = load_policy(cfg, saved_actor)
    write_file(os.path.join(run_dir, "config.yaml"), yaml.safe_dump(cfg_dict, sort_keys=False))
    first_metrics = {"iteration": 0}  # what happened before iteration 1, written with the first evaluation
    if not resume_dir and cfg.warmup.steps > 0:
        # a real model's own starting point
        if cfg.model.name not in tiny.IN_PROCESS_MODELS and cfg.eval.every > 0:
            before = evaluate(sampler, cfg, "Evaluation before the format warm-up",
                              os.path.join(run_dir, "samples.md"))
            first_metrics.update({key.replace("eval/", "pre_warmup/"): value
                                  for key, value in before.items()})
        warmup_start = time.time()
        first_metrics["warmup/loss"] = format_warmup(actor, sampler, cfg, device, beat)
        first_metrics["perf/warmup_s"] = time.time() - warmup_start
        copy_weights(actor, sampler.model)
        tqdm.write(f"format warm-up: {cfg.warmup.steps} steps in {first_metrics['perf/warmup_s']:.0f} s, "
                   f"final loss {first_metrics['warmup/loss']:.3f}")
    critic = build_critic(cfg, actor, device)
    reference = None
    if cfg.algo.kl_coef > 0:  # frozen copy of the starting policy, only when a KL term needs it
        reference = (AutoModelForCausalLM.from_pretrained(os.path.join(run_dir, "checkpoint", "reference"),
                                                          dtype=torch.float32).to(device)
                     if resume_dir else copy.deepcopy(actor)).eval().requires_grad_(False)
    if cfg.model.gradient_checkpointing:  # after the sampler's copy: the sampler never runs backward
        actor.gradient_checkpointing_enable()
        if critic is not None:
            critic.backbone.gradient_checkpointing_enable()
    engine = fast_engine(cfg)
    if engine:  # after every copy (a copy would share the compiled code); the sampler decodes with its own
        engine.compile_for_training(actor.base_model, critic and critic.backbone,
                                    reference and reference.base_model)
    fused = device.type == "cuda"  # one kernel for the whole AdamW step instead of one per tensor group
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.algo.weight_decay,
                                          fused=fused)
                  for name, model, lr in (("actor", actor, cfg.algo.actor_lr),
                                          ("critic", critic, cfg.algo.critic_lr))
                  if model is not None}
    run = Run(cfg=cfg, device=device, run_dir=run_dir, chat=sampler.chat, actor=actor, sampler=sampler,
              critic=critic, reference=reference, optimizers=optimizers,
              seed_rng=np.random.default_rng(cfg.seed), generator=torch.Generator().manual_seed(cfg.seed),
              start=1)
    if resume_dir:
        restore(run, load_state(run_dir))
        settle_evaluation_at_checkpoint(run)
    if run.start > cfg.train.iterations:
        tqdm.write(f"{run_dir} already has its {cfg.train.iterations} iterations: to train on, raise them, "
                   f"e.g. python ragen_mini.py --resume {run_dir} "
                   f"train.iterations={2 * cfg.train.iterations}")
    if device.type == "cuda" and engine:
        tqdm.write("the first evaluation and iteration compile the decoder and the layers "
                   "(2-3 minutes; nothing later)")
    if run.start == 1 and cfg.eval.every > 0:
        beat("evaluating at iteration 0")
        write_metrics(run_dir, {**first_metrics, **evaluate(sampler, cfg, "Evaluation at iteration 0",
                                                            os.path.join(run_dir, "samples.md"))})
    # last, once metrics.jsonl is settled: the logger starts from its rows (iteration 0, or the checkpoint's)
    run.logger = run_log.open_logger(cfg_dict, run_dir, resumed_at=run.start - 1 if resume_dir else None)
    return run


def format_warmup(actor, sampler, cfg, device, beat=lambda doing: None):
    """Supervised warm-up on transcripts of the answer format (the "cold start" of many RL recipes), for
    models that cannot follow it yet: the in-process models' random weights, and small pretrained models
    that echo the prompt's placeholders instead of answering. The transcripts' actions are uniformly
    random: it teaches the format, not the game, so RL starts at random-policy skill (compare eval/success
    at iteration 0 with baselines.py).

    What stands inside <think> is warmup.thoughts: none, an empty thought (the teacher closes the tag at
    once; RL starts from a model that does not reason), or own, the thoughts the model itself writes about
    each state when asked without the format line (rollout.own_thoughts_policy). With warmup.thought_loss
    the loss covers the thought too, so that the model learns to write, under the paper's prompt, what it
    would think unprompted; without it only the closing tag and the answer are learned.

    With warmup.env_text it also learns to predict the environment's replies (the reward, the next
    grid): the tiny model's stand-in for what Qwen brings from pre-training. To predict the grid after
    "Up" it must find the player and know how moves work, the very features a policy needs; which
    action is good is still left to RL, since the transcripts' actions are random."""
    chat, rng = sampler.chat, random.Random(cfg.seed)
    optimizer = torch.optim.AdamW(actor.parameters(), lr=cfg.warmup.lr)
    total = torch.tensor(float("nan"))
    for transcripts in tqdm(warmup_transcripts(sampler, cfg, rng), total=cfg.warmup.steps,
                            desc="format warm-up", leave=False):
        beat("in the format warm-up")
        if cfg.warmup.thoughts == "own" and cfg.rollout.think and not cfg.warmup.thought_loss:
            for t in transcripts:
                t.sampled = without_thoughts(t.ids, t.sampled, chat.tokenizer)
        batch = collate(transcripts, chat.pad_id, device)
        if cfg.warmup.env_text:  # the targets: the answers and every token after the first one (B, T-1)
            batch.response_mask = batch.response_mask.cummax(dim=1).values * batch.attention_mask[:, 1:]
        num_tokens = batch.response_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _, ids, mask in micro_batches(batch, torch.arange(len(transcripts)), cfg):
            logp, _ = token_logprobs(actor, ids, mask, cfg, temperature=1.0)
            loss = -(logp * mask).sum() / num_tokens  # summed over micro-batches: the batch's token mean
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), cfg.algo.grad_clip)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(total)


def warmup_transcripts(sampler, cfg, rng):
    """The warm-up's transcripts, one list of warmup.batch_size Trajectory per step. The random teacher plays
    each step's as it comes; the model's own thoughts are all sampled first, in chunks of the training batch,
    from the model as it is before the warm-up (on the CPU the sampler is the actor, which the warm-up
    trains)."""
    steps, size = cfg.warmup.steps, cfg.warmup.batch_size
    if cfg.warmup.thoughts == "none" or not cfg.rollout.think:
        for _ in range(steps):
            seeds = [rng.randrange(cfg.eval.seed_offset) for _ in range(size)]
            yield play_episodes(random_policy(sampler.chat, cfg, rng), sampler.chat, cfg, seeds, seeds)
        return
    seeds = [rng.randrange(cfg.eval.seed_offset) for _ in range(steps * size)]
    chunk, transcripts = cfg.rollout.groups * cfg.rollout.group_size, []
    for start in tqdm(range(0, len(seeds), chunk), desc="warm-up thoughts", leave=False):
        part = seeds[start:start + chunk]
        transcripts += play_episodes(own_thoughts_policy(sampler, cfg, rng), sampler.chat, cfg, part, part)
    for step in range(steps):
        yield transcripts[step * size:(step + 1) * size]


def restore(run, state):
    """Continue where the checkpoint stopped: weights, optimisers and every random state."""
    run.start = state["iteration"] + 1
    if run.critic is not None:
        run.critic.load_state_dict(state["critic"])
    for name, optimizer in run.optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    run.seed_rng.bit_generator.state = state["rng"]["numpy"]
    torch.set_rng_state(state["rng"]["torch"])
    if state["rng"]["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    run.generator.set_state(state["rng"]["generator"])
    drop_after_checkpoint(run.run_dir, state["iteration"])


def settle_evaluation_at_checkpoint(run):
    """On resume: the checkpoint's metrics row (and samples.jsonl) gets the evaluation that a run never stopped
    would have there, so that resuming equals not stopping, evaluations included: one on the eval.every grid,
    or at the last of train.iterations. A Ctrl-C stops without evaluating: an evaluation owed is made now,
    from the checkpoint's weights and random state, the very ones it would have seen. A run's last iteration
    and a time limit's stop evaluate off the grid: a run resumed past them forgets that evaluation, which a
    run never stopped there does not make."""
    cfg, iteration = run.cfg, run.start - 1
    rows = plots.read_metrics(run.run_dir)
    if not rows or rows[-1]["iteration"] != iteration or iteration > cfg.train.iterations:
        # no row to settle (metrics.jsonl was lost), or a resume to fewer iterations, which trains nothing
        return
    owed = cfg.eval.every > 0 and (iteration % cfg.eval.every == 0 or iteration == cfg.train.iterations)
    if owed == ("eval/success" in rows[-1]):
        return
    row = {key: value for key, value in rows[-1].items() if not key.startswith("eval/")}
    # before the row is rewritten: a crash while evaluating leaves the row whole, the evaluation still owed
    if owed:
        row.update(evaluate(run.sampler, cfg, f"Evaluation at iteration {iteration}",
                            os.path.join(run.run_dir, "samples.md")))
    else:
        # that evaluation's samples go, and the row, written below
        drop_after_checkpoint(run.run_dir, iteration - 1)
    write_file(os.path.join(run.run_dir, "metrics.jsonl"),
               "".join(json.dumps(line) + "\n" for line in [*rows[:-1], row]))


class Clock:
    """Phase timings; on a GPU it waits for the queued work at phase boundaries only."""

    def __init__(self, device):
        self.device, self.times = device, [time.perf_counter()]
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()

    def lap(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        return self.times[-1] - self.times[-2]


def end_of_iteration(run, metrics, trajectories, batch, clock, progress, ctrl_c, bench):
    """Timings and memory, the zero-signal notice, the evaluation, metrics.jsonl, plots, checkpoint and
    progress bar. -> True when the run stops here (time limit or Ctrl-C)."""
    cfg, iteration = run.cfg, metrics["iteration"]
    metrics["perf/iteration_s"] = clock.times[-1] - clock.times[0]
    metrics["perf/gen_tokens_per_s"] = (sum(t.response_tokens for t in trajectories)
                                        / metrics["perf/rollout_s"])
    metrics["perf/trained_tokens"] = int(batch.response_mask.sum())
    if run.device.type == "cuda":
        metrics["perf/peak_reserved_gb"] = torch.cuda.max_memory_reserved() / 2**30
    metrics["perf/peak_mem_gb"] = (torch.cuda.max_memory_allocated() if run.device.type == "cuda" else
                                   resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**30
    run.zero_signal_since = report_zero_signal(metrics, run.zero_signal_since)
    if not bench and iteration == run.start + (run.device.type == "cuda"):  # a GPU's first iteration compiles
        left = cfg.train.iterations - iteration
        tqdm.write(f"iteration {iteration} took {metrics['perf/iteration_s']:.1f} s: at this pace the {left} "
                   f"iterations left take about {left * metrics['perf/iteration_s'] / 60:.0f} min, "
                   "evaluations apart"
                   + (f" (train.time_limit_min stops it at {cfg.train.time_limit_min:g})"
                      if cfg.train.time_limit_min > 0 else ""))
    interrupted = ctrl_c is not None and ctrl_c.pressed
    last = iteration == cfg.train.iterations or interrupted or (
        cfg.train.time_limit_min > 0 and time.time() - run.started > 60 * cfg.train.time_limit_min)
    # Ctrl-C stops at once, without evaluating. A resumed run makes the evaluation owed here, and forgets one
    # made off the eval.every grid at a stop it trains past (settle_evaluation_at_checkpoint): resuming equals
    # not stopping
    if cfg.eval.every > 0 and (iteration % cfg.eval.every == 0 or last) and not interrupted:
        metrics.update(evaluate(run.sampler, cfg, f"Evaluation at iteration {iteration}",
                                os.path.join(run.run_dir, "samples.md")))
    write_metrics(run.run_dir, metrics)
    run_log.log_row(run.logger, metrics)  # train.log_to: the same row, nothing else
    if bench:
        print(json.dumps({k: v for k, v in metrics.items() if k.startswith("perf/") or k == "iteration"}),
              flush=True)
    elif iteration % 10 == 0 or last:  # a page of plots costs about a second: not every iteration
        plots.plot_run(run.run_dir)
    if (cfg.checkpoint.every > 0 and (iteration % cfg.checkpoint.every == 0 or last)) or interrupted:
        save_checkpoint(run, iteration)
    run.last_eval = metrics.get("eval/success", run.last_eval)
    progress.set_postfix(rollout_success=f"{metrics['rollout/success']:.2f}",
                         entropy=f"{metrics['train/entropy']:.2f}",
                         eval_success="-" if run.last_eval is None else f"{run.last_eval:.2f}")
    # time limit or Ctrl-C (the bar ends by itself otherwise)
    return last and iteration < cfg.train.iterations


def evaluate_saved_actor(run_dir, overrides):
    """--eval RUN_DIR: the run's saved actor (RUN_DIR/checkpoint/actor) on the evaluation seeds, with the
    run's config and the overrides (eval.k=4 adds pass@4). Prints the metrics and appends them, with the
    checkpoint's iteration and the settings, to RUN_DIR/eval.jsonl; the samples go to
    RUN_DIR/eval_samples.jsonl (and .md)."""
    check_resumable(run_dir, flag="--eval")
    check_no_links(run_dir)
    cfg = namespace(load_run_config(run_dir, overrides))
    tqdm.write(f"loading the actor saved in {os.path.join(run_dir, 'checkpoint', 'actor')}")
    _, _, sampler = load_policy(cfg, os.path.join(run_dir, "checkpoint", "actor"))
    iteration = load_state(run_dir, "--eval")["iteration"]
    metrics = evaluate(sampler, cfg, f"Evaluation of the checkpoint at iteration {iteration}",
                       os.path.join(run_dir, "eval_samples.md"))
    line = {"iteration": iteration, "eval.k": cfg.eval.k, "eval.num_seeds": cfg.eval.num_seeds,
            "eval.temperature": cfg.eval.temperature, **metrics}
    write_file(os.path.join(run_dir, "eval.jsonl"), json.dumps(line) + "\n", "a")
    print(json.dumps(line))
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML file laid over config.yaml (default: config.yaml alone)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from RUN_DIR/checkpoint")
    parser.add_argument("--eval", metavar="RUN_DIR",
                        help="evaluate the actor saved in RUN_DIR/checkpoint (eval.k=K: pass@K)")
    parser.add_argument("--bench", type=int, metavar="K", default=0,
                        help="speed benchmark: K iterations of a random-weight Qwen2.5-0.5B-shaped model, "
                             "fixed tokens per turn, one JSON line of timings per iteration")
    parser.add_argument("--bench-tokens", type=int, default=128, help="new tokens per turn in --bench")
    parser.add_argument("--export", metavar="TARGET",
                        help="print the command that reruns a run's settings (RUN_DIR, "
                        "or --config FILE) in TARGET: ragen, RAGEN on verl for several GPUs (export.py)")
    parser.add_argument("overrides", nargs="*", help="section.key=value, e.g. env.name=frozenlake")
    args = parser.parse_args(argv)
    if args.export:  # export.py reads the run folder or the config itself
        raise SystemExit(export.main(["--to", args.export,
                                      *(["--config", args.config] if args.config else []), *args.overrides]))
    if (args.resume or args.eval) and args.config:
        parser.error(f"--config {args.config} with --resume or --eval: a run keeps its own "
                     "RUN_DIR/config.yaml; give changes as section.key=value overrides")
    if args.resume and args.eval:
        parser.error("--resume and --eval together: --resume RUN_DIR trains on, --eval RUN_DIR evaluates its "
                     "checkpoint; give one (after --resume, --eval RUN_DIR evaluates the result)")
    if args.bench < 0 or args.bench_tokens < 1:
        parser.error("--bench K needs K >= 1 iterations (0, the default, is no benchmark) and "
                     "--bench-tokens >= 1")
    transformers.utils.logging.disable_progress_bar()  # its loading and saving bars would break into ours
    overrides = list(args.overrides)
    if args.bench:
        if not any(o.startswith("model.name=") for o in overrides):
            overrides.insert(0, "model.name=random-qwen2.5-0.5b")
        overrides += [f"rollout.max_new_tokens={args.bench_tokens}",
                      f"rollout.min_new_tokens={args.bench_tokens}",
                      "eval.every=0", "checkpoint.every=0", f"train.iterations={args.bench}"]
    args.resume = args.resume and os.path.expanduser(args.resume)  # a quoted "~/runs/a": the shell left the ~
    args.eval = args.eval and os.path.expanduser(args.eval)
    try:
        if args.eval:
            check_resumable(args.eval, flag="--eval")
            use_cpu_threads(load_run_config(args.eval, overrides))
            with CtrlC() as ctrl_c:  # nothing to save: a signal stops it at once (Stopped, below)
                return evaluate_saved_actor(args.eval, overrides)
        if args.resume:
            check_resumable(args.resume)
        cfg = load_run_config(args.resume, overrides) if args.resume else load_config(args.config, overrides)
        use_cpu_threads(cfg)
        with CtrlC() as ctrl_c, Watchdog(cfg["train"]["stall_min"]) as watchdog:
            run_dir = train(cfg, resume_dir=args.resume, bench=bool(args.bench), ctrl_c=ctrl_c,
                            watchdog=watchdog)
        if ctrl_c.pressed:  # the summary says how to resume
            # the shell's code for "stopped by that signal": 130 for Ctrl-C
            raise SystemExit(128 + ctrl_c.signum)
        return run_dir
    except Stopped as stop:
        if args.eval:
            print(f"{ctrl_c.name}: the evaluation of {args.eval} stopped before its end; its result is not in "
                  f"{os.path.join(args.eval, 'eval.jsonl')}")
            raise SystemExit(128 + ctrl_c.signum) from None
        where = (f"{args.resume} keeps its checkpoint as it was" if args.resume else
                 "the run's folder was removed; start it again to train")
        print(f"{stop}: {where}")
        raise SystemExit(128 + ctrl_c.signum) from None
    except ConfigError as error:
        raise SystemExit(f"config error: {error}") from None
    except RunError as error:
        raise SystemExit(f"error: {error}") from None
    except OSError as error:  # a file the run could not write: a full disk, a folder it may not write
        raise SystemExit(describe_os_error(error)) from None
    except torch.OutOfMemoryError:
        raise SystemExit("error: the GPU ran out of memory. Lower algo.micro_batch_size (8 fits a 40 GB "
                         "card), algo.micro_batch_tokens or algo.logits_chunk, set "
                         "model.gradient_checkpointing=true, or lower rollout.max_new_tokens / "
                         "rollout.groups (README: the settings for 40 GB and 24 GB cards).") from None


if __name__ == "__main__":
    main()

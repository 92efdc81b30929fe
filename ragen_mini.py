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
This file reads in that order: train(), then each step's functions. What a run needs around them is launch.py's:
building the run (models, the format warm-up, resuming from a checkpoint), the books kept after each iteration
(evaluation, metrics, plots, checkpoint), --eval and the command line. The algorithms live in starpo.py, the
environments in envs.py. config.py reads and checks the config, models.py loads the LLM, builds the critic and
chooses the engine, rollout.py plays the multi-turn conversations, tiny.py the in-process model, plots.py the
plots, evaluation.py the evaluation and its samples, bookkeeping.py the metrics, checkpoints, run folder and
resume. The optional package fast/ computes the same numbers faster on a GPU (rollout.engine, chosen once when
the run is built: the run holds the functions it computes with); every function here reads without it.
"""
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

import starpo
from bookkeeping import Clock, group_reward_std, rollout_metrics
from models import copy_weights
from rollout import LLMPolicy, Trajectory, play_episodes, reply_spans, thought_length


# ======================================================================================================
# The training loop: one StarPO iteration is five steps, each a function below, in the order they run.
# ======================================================================================================
def train(cfg_dict, resume_dir=None, bench=False, ctrl_c=None, watchdog=None):
    """StarPO from a config (config.yaml's sections, as a dict), or on from RESUME_DIR's checkpoint.
    launch.setup builds the run (models, the format warm-up, the engine, the checkpoint's state); each
    iteration runs the five steps, then launch.end_of_iteration keeps the books (evaluation, metrics.jsonl,
    plots, checkpoint). -> the run folder"""
    import launch  # the run around the algorithm, itself built on this file's functions: imported here
    run = launch.setup(cfg_dict, resume_dir, ctrl_c, watchdog)
    cfg, P, N = run.cfg, run.cfg.rollout.groups, run.cfg.rollout.group_size
    progress = tqdm(range(run.start, cfg.train.iterations + 1), desc="train", initial=run.start - 1,
                    total=cfg.train.iterations, disable=bench)
    for iteration in progress:
        run.beat(f"in iteration {iteration}")
        clock = Clock(run.device)

        # 1. ROLLOUT: P seeds x N samples; the N samples of a seed form one group
        seeds = run.seed_rng.integers(0, cfg.eval.seed_offset, size=P)
        policy = LLMPolicy(run.rollout_model, cfg, cfg.rollout.temperature)
        trajectories = play_episodes(policy, run.chat, cfg, np.repeat(seeds, N), np.repeat(np.arange(P), N))
        metrics = {"iteration": iteration, **rollout_metrics(trajectories, "rollout"),
                   "perf/rollout_s": clock.lap(), "perf/generate_s": policy.generate_s,
                   "perf/decode_steps": policy.decode_steps}

        # Not a step: a measurement (measure_thought_mi, below the steps), taken while the actor is still the
        # policy that wrote these thoughts, before step 5 changes it
        if cfg.rollout.mi_groups > 0:
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
        metrics.update(compute_advantages(batch, cfg, run.engine.compute_gae))

        # 5. UPDATE: clipped policy loss and value loss, mini-batch by mini-batch
        metrics.update(update(batch, run.actor, run.critic, run.optimizers["actor"],
                              run.optimizers.get("critic"), cfg, run.device, run.generator))
        copy_weights(run.actor, run.rollout_model.model)
        metrics["perf/update_s"] = clock.lap()
        if launch.end_of_iteration(run, metrics, trajectories, batch, clock, progress, ctrl_c, bench):
            break
    progress.close()
    launch.finish(run, bench)
    return run.run_dir


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
    loss_mask: torch.Tensor        # (B, T-1) 1 where the losses cover token t+1: Trajectory.sampled[1:]
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
                 loss_mask=torch.from_numpy(sampled[:, 1:]).to(device),
                 rewards=torch.tensor([t.reward for t in trajectories], device=device),
                 group_ids=torch.tensor([t.group for t in trajectories], device=device))


@torch.no_grad()
def old_logprobs_and_values(batch, actor, critic, reference, cfg, device):
    """Sets batch.old_logp, .values and .ref_logp (B, T-1): the rollout policy's numbers, before the
    update."""
    B, width = batch.loss_mask.shape
    batch.old_logp, batch.values, batch.ref_logp = (torch.zeros((B, width), device=device) for _ in range(3))
    for rows, ids, mask in micro_batches(batch, torch.arange(B), cfg, scoring=True):
        cols = slice(0, mask.shape[1])
        batch.old_logp[rows, cols] = token_logprobs(actor, ids, mask, cfg)[0]
        if critic is not None:
            batch.values[rows, cols] = token_values(critic, ids, configured_gae_steps(mask, cfg))
        if reference is not None:
            batch.ref_logp[rows, cols] = token_logprobs(reference, ids, mask, cfg)[0]


def micro_batches(batch, indices, cfg, scoring=False):
    """Consecutive slices of `indices`, longest rows first (stable; in the given order under the paper code's
    algo.loss_agg=micro-batch-mean, whose loss depends on which rows share a micro-batch), each trimmed to its
    longest row (a crop, thanks to right padding):
    -> list of (rows, (b, t) ids, (b, t-1) mask). A slice takes rows while it has
    fewer than algo.micro_batch_size and, with algo.micro_batch_tokens > 0, while rows x width, what its
    activations scale with, stays within it: long contexts get fewer rows, and memory stays bounded. A longer
    row goes alone. scoring=True, for a pass without gradients, which keeps no activations: any number of
    rows within algo.score_micro_batch_tokens (fewer, larger passes).
    Rows of 1000, 900, 1200 and 800 tokens, size 4, max_tokens 2500: [1200, 1000] 1200 wide, then
    [900, 800] (in the given order: [1000, 900] 1000 wide, then [1200, 800])."""
    size, max_tokens = ((len(indices), cfg.algo.score_micro_batch_tokens) if scoring else
                        (cfg.algo.micro_batch_size, cfg.algo.micro_batch_tokens))
    lengths = batch.attention_mask[indices].sum(-1)  # (n,)
    if scoring or cfg.algo.loss_agg == "token-mean":
        # longest rows first, so rows of like length share a micro-batch and little of it is padding; which
        # rows share one changes no sum here, but micro-batch-mean's (the paper's code) keeps its order
        order = torch.argsort(lengths, descending=True, stable=True)
        indices, lengths = indices[order.to(indices.device)], lengths[order]
    lengths = lengths.tolist()  # one host transfer
    slices, start = [], 0
    while start < len(indices):
        end, width = start + 1, lengths[start]
        while end < len(indices) and end - start < size and (
                max_tokens == 0 or (end - start + 1) * max(width, lengths[end]) <= max_tokens):
            width, end = max(width, lengths[end]), end + 1
        rows = indices[start:end]
        slices.append((rows, batch.input_ids[rows, :width], batch.loss_mask[rows, :width - 1]))
        start = end
    return slices


def token_logprobs(actor, input_ids, loss_mask, cfg, with_entropy=False, temperature=None):
    """log pi(token t+1 | tokens <= t) and the entropy at t, at the loss mask's positions only, at the rollout
    model's temperature (rollout.temperature) unless another is given. -> two (b, T-1), 0 elsewhere.
    The last hidden state at position t (hidden_states(actor.base_model, input_ids): (b, T, H)) predicts token
    t+1, so column t of the (b, T-1) grid pairs the state at t with token t+1, and loss_mask[:, t] = 1
    says that the losses cover token t+1 (it was sampled). flat_hidden (n, H) holds the states of those
    columns, row by row, and targets (n,) the tokens they predict; starpo.logprob_and_entropy scores the LM
    head's logits.

    The logits are the largest tensor of training (151,936 floats per token for Qwen): they are made
    only for the loss mask's tokens, `chunk` at a time (algo.logits_chunk), and with gradients the chunk is
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
        at = loss_mask.bool()
        flat_hidden, targets = hidden[at], input_ids[:, 1:][at]  # (n, H), (n,)
        # END SOLUTION
        lm_head = actor.get_output_embeddings()
        # starpo's log-softmax, or the one a run's engine gave the models it scores when it built them
        # (launch.load_policy; the fast engine's is compiled, fast/compile.py)
        logprob_and_entropy = getattr(actor, "logprob_and_entropy", starpo.logprob_and_entropy)

        def chunk_fn(h, y):
            return logprob_and_entropy(lm_head(h), y, temperature, with_entropy)  # logits (c, V) -> two (c,)

        pieces = []
        for start in range(0, len(targets), chunk):
            args = (flat_hidden[start:start + chunk], targets[start:start + chunk])
            pieces.append(torch.utils.checkpoint.checkpoint(chunk_fn, *args, use_reentrant=False)
                          if torch.is_grad_enabled() else chunk_fn(*args))
        logp, entropy = (torch.zeros(loss_mask.shape, device=hidden.device)
                         for _ in range(2))  # (b, T-1) each
        if pieces:
            logp = logp.masked_scatter(at, torch.cat([p[0] for p in pieces]))
            entropy = entropy.masked_scatter(at, torch.cat([p[1] for p in pieces]))
    return logp, entropy


def token_values(critic, input_ids, positions):
    """V where positions (b, T-1) is 1 -> (b, T-1), 0 elsewhere: the value of the state before token t+1 is
    sampled (positions: the loss mask, or GAE's time steps when they differ, configured_gae_steps)."""
    with autocast(input_ids.device):
        hidden = hidden_states(critic.backbone, input_ids)[:, :-1]
        values = critic.value_head(hidden[positions.bool()]).squeeze(-1).float()  # (n,)
    return torch.zeros(positions.shape, device=hidden.device).masked_scatter(positions.bool(), values)


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
def compute_advantages(batch, cfg, compute_gae=starpo.compute_gae):
    """Sets batch.advantages and batch.returns (B, T-1); returns the KL metric when a KL term is on. GAE is
    compute_gae: the run's engine's (starpo.compute_gae, or the fast engine's, fast/gae.py: the same numbers)."""
    mask = batch.loss_mask  # (B, T-1)
    kl = starpo.kl_estimate(batch.old_logp, batch.ref_logp, "k1") * mask if cfg.algo.kl_coef > 0 else None
    if cfg.algo.estimator == "gae":
        token_rewards = starpo.token_level_rewards(batch.rewards, mask, kl, cfg.algo.kl_coef)  # (B, T-1)
        steps = configured_gae_steps(mask, cfg)  # (B, T-1) GAE's time steps
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
      loss_normalizer's number, and the loss's backward; then clipped_step(actor, actor_opt, cfg, "actor",
      logged).
    - The critic step: the same with token_values and starpo.value_loss (old values batch.values, targets
      batch.returns, algo.value_clip), then clipped_step(critic, critic_opt, cfg, "critic", logged).
    `logged` gets one value per step of train/policy_loss (the micro-batches' policy_loss metrics summed),
    train/grad_norm, train/value_loss (the micro-batches' critic losses summed, detached) and
    train/critic_grad_norm, and one value per micro-batch of actor_loss's other metrics (train/<key>) and
    of train/vf_clipfrac. Returns the train/* metrics: each one's mean, the skipped updates' counts, and
    the critic's explained variance."""
    B = batch.loss_mask.shape[0]
    logged = {}  # name -> list of values; tensors stay on the device, one host transfer at the end
    # BEGIN SOLUTION ex12-update
    for _ in range(cfg.algo.ppo_epochs):
        order = torch.randperm(B, generator=generator).to(device)
        for start in range(0, B, cfg.algo.mini_batch_size):
            mini = order[start:start + cfg.algo.mini_batch_size]
            micro = micro_batches(batch, mini, cfg)

            def normalizer(mask):  # what each micro-batch's summed loss is divided by
                return loss_normalizer(batch.loss_mask[mini], mask, len(micro), cfg.algo.loss_agg)
            steps = {}  # this actor step's metrics, one value per micro-batch

            # --- the actor step --------------------------------------------------------------------------
            actor_opt.zero_grad(set_to_none=True)
            for rows, ids, mask in micro:
                logp, entropy = token_logprobs(actor, ids, mask, cfg, with_entropy=True)
                loss, metrics = starpo.actor_loss(logp, entropy, crop(batch.old_logp, rows, mask),
                                                  crop(batch.advantages, rows, mask), mask, cfg.algo,
                                                  normalizer(mask), ref_logp=crop(batch.ref_logp, rows, mask))
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
                                                  loss_normalizer=normalizer(mask))
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
                                                                              batch.loss_mask))
    return metrics


def loss_normalizer(mini_batch_mask, micro_batch_mask, num_micro_batches, loss_agg):
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
    # BEGIN SOLUTION ex11-loss-normalizer
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
# Beside the steps: a measure of the thoughts, taken in train() after the rollout. Do they still depend on
# the state, or has reasoning collapsed into one template (the Echo Trap)?
# ======================================================================================================
@torch.no_grad()
def measure_thought_mi(actor, chat, trajectories, cfg, device):
    """rollout/thought_mi (starpo.thought_mutual_information): the first thoughts of the first
    rollout.mi_samples trajectories in each of the first rollout.mi_groups groups (all, when there are
    fewer), each scored under every one of those groups' first prompts (a group's trajectories share theirs):
    M prompts x K thoughts, M x K rows. The thought is the reply's tokens before its closing tag
    (rollout.thought_length), as sampled, whether or not the reply kept the format. Nothing without
    rollout.think or with one group."""
    groups = {}  # group -> its trajectories, in their order
    for t in trajectories:
        groups.setdefault(t.group, []).append(t)
    chosen = [members[:cfg.rollout.mi_samples] for members in list(groups.values())[:cfg.rollout.mi_groups]]
    if len(chosen) < 2 or not cfg.rollout.think:
        return {}
    prompts, thoughts, own = [], [], []  # own[k]: the prompt that thought k was sampled for
    for g, members in enumerate(chosen):
        start, _ = reply_spans(members[0].sampled)[0]  # the first reply, after the group's first prompt
        prompts.append(members[0].ids[:start])
        for t in members:
            start, end = reply_spans(t.sampled)[0]
            thoughts.append(t.ids[start:start + thought_length(t.ids[start:end], chat.tokenizer)])
            own.append(g)
    pairs = [Trajectory(seed=0, group=0, ids=prompt + thought, sampled=[0] * len(prompt) + [1] * len(thought))
             for prompt in prompts for thought in thoughts]  # row i * K + k: thought k after prompt i
    batch = collate(pairs, chat.pad_id, device)
    summed = torch.zeros(len(pairs), device=device)  # (M*K,) log p(thought k | prompt i)
    for rows, ids, mask in micro_batches(batch, torch.arange(len(pairs)), cfg, scoring=True):
        logp = token_logprobs(actor, ids, mask, cfg)[0]
        summed[rows.to(device)] = (logp * mask).sum(-1)
    return {"rollout/thought_mi": float(starpo.thought_mutual_information(
        summed.view(len(prompts), len(thoughts)).cpu(), torch.tensor(own)))}


def main(argv=None):
    """The command line: python ragen_mini.py --config FILE, --resume RUN_DIR, --eval RUN_DIR, --bench K,
    --export TARGET (launch.main parses it)."""
    import launch  # the run around the algorithm, itself built on this file's functions: imported here
    return launch.main(argv)


if __name__ == "__main__":
    main()

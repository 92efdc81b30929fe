"""StarPO and StarPO-S: the advantages and losses of RAGEN, one small function per idea.

RAGEN (Wang et al., 2025, arXiv:2504.20073) trains an LLM agent with StarPO, trajectory-level RL:
it maximises J_StarPO(theta) = E_{M, tau ~ pi_theta}[R(tau)], where tau = (s_0, a_0^T, r_0, s_1, ..., s_K)
is the WHOLE multi-turn interaction (observations, <think> reasoning, actions, rewards), treated as
one token sequence. Every function here works on that flattened sequence: per-token tensors are
(B, T), one row per trajectory, and `loss_mask` is 1 on the tokens the losses cover: those the model
generated, 0 on prompt, observation and padding tokens (only the model's own tokens are trained,
docs/paper.md §7.7), or with the paper code's algo.train_tokens=after_system every token after the system
message (§9.1).

Paper idea                                                   -> function
StarPO, PPO variant: critic + token-level GAE                -> compute_gae, value_loss
StarPO, GRPO variant: reward normalised within a seed's group -> compute_grpo_advantages
PPO clipped surrogate for the policy                         -> policy_loss
StarPO-S clip-higher / decoupled clipping (DAPO), Finding 5  -> policy_loss(clip_low, clip_high)
The trajectory reward on its last token (+ KL in the reward) -> token_level_rewards
StarPO-S KL removal, Finding 5 (vanilla StarPO keeps a KL)   -> kl_estimate (StarPO-S: coefficient 0)
The actor's loss: clipped term, entropy bonus, GRPO's KL     -> actor_loss
How well the critic predicts the returns                     -> explained_variance
StarPO-S uncertainty filtering, Finding 4                    -> select_groups_by_reward_std
StarPO-S critic incorporation (PPO more stable, Finding 1)   -> compute_gae + value_loss
Collapse warning sign: entropy drops first, Finding 3        -> entropy_from_logits
The log-probs the ratio compares, with the rollout's T       -> logprob_and_entropy
Token means over the whole mini-batch (docs/paper.md §7.8)    -> masked_mean, masked_whiten
Echo Trap, Finding 2: do the thoughts still depend on the state? -> thought_mutual_information
(Findings are numbered as on the RAGEN poster; formulas follow docs/paper.md §6.)

Conventions (the trainer relies on them):
- Losses are sum(L * loss_mask) / loss_normalizer, where loss_normalizer is the number of loss-mask
  tokens in the whole mini-batch; summing the losses of its micro-batches then gives exactly the
  mini-batch token mean. None means "this call's own token count". Counts are clamped to >= 1,
  so an empty mask gives 0, never NaN.
- Metrics are detached 0-dim tensors (no .item(): that would force a GPU->CPU sync per call).
- log-ratios are clamped to [-20, 20] before exp, so huge log-prob differences stay finite.
"""

import math

import torch

LOG_RATIO_CLAMP = 20.0  # exp(20) ~ 5e8: far outside any clip range, still finite in float32


def masked_mean(x, mask):
    """Mean of x over the positions where mask is 1 (docs/paper.md §6, "masked token mean").

    >>> masked_mean(torch.tensor([[1., 2., 3.]]), torch.tensor([[1., 1., 0.]]))
    tensor(1.5000)
    """
    return _masked_sum(x, mask) / mask.sum().clamp(min=1)


def _masked_sum(x, mask):
    # torch.where, not x * mask: a padded position may hold inf, and 0 * inf = nan.
    return torch.where(mask.bool(), x, 0).sum()


def _aggregate(per_token, mask, loss_normalizer):
    """sum(L * mask) / loss_normalizer (docs/paper.md §7.8): a per-micro-batch token mean would give
    a micro-batch with few tokens as much weight as one with many, biasing the accumulated gradient."""
    if loss_normalizer is None:
        n_tokens = mask.sum()
    else:
        n_tokens = torch.as_tensor(loss_normalizer, dtype=per_token.dtype, device=per_token.device)
    return _masked_sum(per_token, mask) / n_tokens.clamp(min=1)


def masked_whiten(x, mask):
    """(x - mean) / sqrt(var + 1e-8) over the masked tokens; masked-out positions become 0.

    Used on PPO advantages after GAE (docs/paper.md §6). The variance has Bessel's correction, as in
    verl's and TRL's masked_whiten. One or zero masked tokens give all zeros, not NaN.

    >>> masked_whiten(torch.tensor([[1., 3., 100.]]), torch.tensor([[1., 1., 0.]]))
    tensor([[-0.7071,  0.7071,  0.0000]])
    """
    centred = x - masked_mean(x, mask)
    var = _masked_sum(centred**2, mask) / (mask.sum() - 1).clamp(min=1)
    return torch.where(mask.bool(), centred * torch.rsqrt(var + 1e-8), 0)


@torch.no_grad()  # advantages and returns are regression/policy targets: no gradient may flow into them
def compute_gae(token_rewards, values, steps, gamma, lam):
    """Token-level GAE over a whole multi-turn trajectory, jumping over observation tokens.

    StarPO's PPO variant (docs/paper.md §6): walking t from the end,
        delta_t = r_t + gamma * V_next - V_t,     A_t = delta_t + gamma * lam * A_next,
    where V_next / A_next belong to the next time step (0 past the last one). `steps` (B, T) is 1 on
    the time steps, the sampled tokens (the trainer passes its loss mask): observation tokens were written
    by the environment, not chosen by the policy, so they are not time steps; gamma and lam discount per
    generated token. Paper setting: gamma = lam = 1, the trajectory's
    summed reward on its last generated token. returns = A + V (the critic's target).
    Positions that are no step get advantage 0 and return 0, and a reward on one of them is ignored.
    No whitening here: the caller whitens with masked_whiten.

    Worked example: token 2 is an observation token, so its value 9.0 is skipped.
    >>> adv, ret = compute_gae(torch.tensor([[0., 0., 0., 1.]]), torch.tensor([[.5, .6, 9., .8]]),
    ...                        torch.tensor([[1., 1., 0., 1.]]), gamma=1.0, lam=1.0)
    >>> adv  # t=3: 1 - .8 = .2;  t=1: (0 + .8 - .6) + .2 = .4;  t=0: (0 + .6 - .5) + .4 = .5
    tensor([[0.5000, 0.4000, 0.0000, 0.2000]])
    >>> ret  # with gamma = lam = 1 every step's return is the total reward
    tensor([[1., 1., 0., 1.]])
    """
    # BEGIN SOLUTION ex4-gae
    B, T = token_rewards.shape
    is_step = steps.bool()  # (B, T)
    advantages = torch.zeros_like(token_rewards)  # (B, T)
    next_value = token_rewards.new_zeros(B)  # (B,) V of the next step; 0 past the end
    next_adv = token_rewards.new_zeros(B)  # (B,)
    for t in reversed(range(T)):  # a Python loop over T, vectorised over the batch
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        m = is_step[:, t]
        next_value = torch.where(m, values[:, t], next_value)
        next_adv = torch.where(m, adv_t, next_adv)
        advantages[:, t] = torch.where(m, adv_t, 0)
    returns = torch.where(is_step, advantages + values, 0)
    return advantages, returns
    # END SOLUTION


def gae_steps(loss_mask):
    """The paper's code's GAE time steps (docs/paper.md §9.5): every token from a trajectory's first
    sampled token to its last, the env's tokens between them included, where compute_gae alone steps
    over sampled tokens only. Pass it as compute_gae's steps (values are then needed at every step).
    At gamma = lam = 1 both give the same advantages on the sampled tokens. (B, T) -> (B, T)

    >>> gae_steps(torch.tensor([[0., 1., 1., 0., 0., 1., 0.]]))
    tensor([[0., 1., 1., 1., 1., 1., 0.]])
    """
    seen = loss_mask.cummax(dim=1).values  # 1 from the first sampled token on
    to_come = loss_mask.flip(1).cummax(dim=1).values.flip(1)  # 1 up to the last one
    return seen * to_come


def group_stats(rewards, group_ids):
    """Index of each trajectory's group (groups sorted by id), per-group mean and Bessel std.

    Shared by GRPO, the uncertainty filter and the trainer's in-group std metric, so all see the same
    U = Std[R(tau)]. A group of one has std 0 (not NaN): its squared deviation is 0 and the Bessel
    divisor is clamped to >= 1.
    """
    ids, group = torch.unique(group_ids, return_inverse=True)  # group: (B,) in 0..G-1, any ids work
    s = rewards.double()  # (B,) is tiny: float64 costs nothing and keeps near-equal rewards' std ~0
    zeros = s.new_zeros(ids.numel())  # (G,)
    count = zeros.index_add(0, group, torch.ones_like(s))
    mean = zeros.index_add(0, group, s) / count.clamp(min=1)
    sq_dev = zeros.index_add(0, group, (s - mean[group]) ** 2)
    std = (sq_dev / (count - 1).clamp(min=1)).sqrt()
    return group, mean, std


@torch.no_grad()
def token_level_rewards(rewards, loss_mask, kl=None, kl_coef=0.0):
    """The trajectory's reward placed on its LAST sampled token, 0 elsewhere; with a KL term (vanilla
    StarPO's PPO variant), -kl_coef * KL on every sampled token (paper section 3.2: PPO puts the KL
    penalty inside the reward, never also in the loss). (B,), (B, T) -> (B, T)

    GAE then carries the reward back over every earlier answer of the conversation (observation tokens
    are skipped by their zero mask): one reward for the whole multi-turn trajectory, as StarPO's
    trajectory-level objective has it.

    >>> mask = torch.tensor([[0., 1., 1., 0., 1., 0.], [1., 1., 0., 0., 0., 0.]])  # row 0: two turns
    >>> token_level_rewards(torch.tensor([2., -1.]), mask)
    tensor([[ 0.,  0.,  0.,  0.,  2.,  0.],
            [ 0., -1.,  0.,  0.,  0.,  0.]])
    >>> token_level_rewards(torch.tensor([2., -1.]), mask, kl=torch.full((2, 6), 0.5), kl_coef=0.1)[0]
    tensor([ 0.0000, -0.0500, -0.0500,  0.0000,  1.9500,  0.0000])

    A row whose mask is all 0 (no sampled token) has no last sampled token: its reward goes on position 0
    (a masked-out token, which compute_gae ignores) and it gets no KL term.
    >>> token_level_rewards(torch.tensor([5.]), torch.zeros(1, 3), kl=torch.ones(1, 3), kl_coef=0.1)
    tensor([[5., 0., 0.]])
    """
    # BEGIN SOLUTION ex3-token-rewards
    positions = torch.arange(loss_mask.shape[1], device=loss_mask.device)  # (T,)
    last = (loss_mask * positions).argmax(-1)  # (B,) index of the last sampled token
    token_rewards = torch.zeros_like(loss_mask)
    token_rewards[torch.arange(len(last)), last] = rewards.to(token_rewards.dtype)
    if kl is not None and kl_coef > 0:
        token_rewards = token_rewards - kl_coef * kl * loss_mask
    return token_rewards
    # END SOLUTION


def actor_loss(logp, entropy, old_logp, advantages, loss_mask, cfg, loss_normalizer, ref_logp=None):
    """The actor's whole loss: the clipped policy loss (policy_loss), minus entropy_coef x the token
    entropy (a brake on the collapse of exploration, Finding 3), plus, for vanilla StarPO's GRPO variant,
    kl_coef x the KL to the reference, k3 or, as the paper's code, k1 (cfg.grpo_kl; GRPO puts the KL in
    the loss, PPO in the reward, token_level_rewards). `cfg` is the config's algo section (clip_low,
    clip_high, dual_clip, entropy_coef, kl_coef, estimator, grpo_kl). Returns (loss, metrics): metrics
    as policy_loss's, plus policy_loss (the clipped term alone) and entropy, all detached.

    One token, ratio 1, advantage 1: policy term -1, entropy bonus -0.1 x 2.
    >>> algo = type("Algo", (), dict(clip_low=0.2, clip_high=0.28, dual_clip=0, entropy_coef=0.1,
    ...                             kl_coef=0.0, estimator="gae"))
    >>> loss, m = actor_loss(torch.zeros(1, 1), torch.full((1, 1), 2.0), torch.zeros(1, 1), torch.ones(1, 1),
    ...                      torch.ones(1, 1), algo, loss_normalizer=1)
    >>> round(loss.item(), 4), round(m["policy_loss"].item(), 4), round(m["entropy"].item(), 4)
    (-1.2, -1.0, 2.0)
    """
    pg_loss, metrics = policy_loss(logp, old_logp, advantages, loss_mask, cfg.clip_low, cfg.clip_high,
                                   dual_clip=cfg.dual_clip or None, loss_normalizer=loss_normalizer)
    loss = pg_loss
    if cfg.entropy_coef > 0:
        loss = loss - cfg.entropy_coef * _aggregate(entropy, loss_mask, loss_normalizer)
    if cfg.kl_coef > 0 and cfg.estimator == "grpo":
        kl = kl_estimate(logp, ref_logp, cfg.grpo_kl)
        loss = loss + cfg.kl_coef * _aggregate(kl, loss_mask, loss_normalizer)
    metrics.update(policy_loss=pg_loss.detach(), entropy=masked_mean(entropy.detach(), loss_mask))
    return loss, metrics


def explained_variance(returns, values, loss_mask):
    """1 - Var(returns - values) / Var(returns) over the loss mask's tokens: how much of the return's
    variance the critic predicts (1 = all of it, 0 = no better than a constant, < 0 = worse). A critic
    stuck near 0 while the policy trains is StarPO's PPO variant running blind.

    >>> mask = torch.ones(1, 4)
    >>> returns, values = torch.tensor([[1., 2., 3., 4.]]), torch.tensor([[1., 2., 3., 5.]])
    >>> explained_variance(returns, values, mask)  # 1 - .1875/1.25
    tensor(0.8500)
    """
    residual = returns - values
    variance = masked_mean(returns**2, loss_mask) - masked_mean(returns, loss_mask) ** 2
    residual_variance = masked_mean(residual**2, loss_mask) - masked_mean(residual, loss_mask) ** 2
    return 1 - residual_variance / variance.clamp(min=1e-8)


def compute_grpo_advantages(rewards, group_ids, eps=1e-6, normalize_by_std=True):
    """GRPO advantage of each trajectory: its reward against the other rollouts of the same seed.

    StarPO's critic-free variant (docs/paper.md §6): A_i = (s_i - mean_g) / (std_g + eps), std with
    Bessel's correction over the N rollouts of group g (all rollouts of one prompt/seed must share
    the id, docs/paper.md §7.9). normalize_by_std=False is Dr. GRPO: mean-centred only, which does
    not up-weight near-deterministic groups. A group whose std is <= eps (a group of one, or all
    rewards equal) carries no learning signal and gets exactly 0, never NaN or float noise / eps;
    the rule holds with normalize_by_std=False too (such a group's centred rewards are only rounding
    noise, and they come out as exactly 0). Computed in float64, returned in the dtype of `rewards`
    (float32 in, float32 out). The caller puts A_i on every generated token of trajectory i.

    >>> rewards, groups = torch.tensor([1., 0., 1., 1.]), torch.tensor([0, 0, 1, 1])
    >>> compute_grpo_advantages(rewards, groups)  # group 0: mean .5, std sqrt(.5); group 1: equal
    tensor([ 0.7071, -0.7071,  0.0000,  0.0000])
    >>> compute_grpo_advantages(rewards, groups, normalize_by_std=False)
    tensor([ 0.5000, -0.5000,  0.0000,  0.0000])
    """
    # BEGIN SOLUTION ex5-grpo
    group, mean, std = group_stats(rewards, group_ids)
    centred = rewards.double() - mean[group]  # (B,)
    adv = centred / (std[group] + eps) if normalize_by_std else centred
    return torch.where(std[group] > eps, adv, 0).to(rewards.dtype)
    # END SOLUTION


def policy_loss(logp, old_logp, advantages, loss_mask, clip_low, clip_high, dual_clip=None,
                loss_normalizer=None):
    """PPO clipped surrogate with decoupled clip range (StarPO-S clip-higher) and optional dual clip.

    d = clamp(logp - old_logp, -20, 20) (LOG_RATIO_CLAMP: exp stays finite), r = exp(d);
    L = max(-A * r, -A * clip(r, 1 - clip_low, 1 + clip_high))
    (docs/paper.md §6). Finding 5: clip_high > clip_low (0.28 vs 0.2, from DAPO) lets a good
    low-probability token grow further before its gradient is cut, which keeps exploring and
    delays the Echo Trap collapse. Dual clip (A < 0 only): L = min(L, -A * dual_clip), so a token
    whose ratio exploded cannot produce an unbounded loss. Where a clip is active the gradient is 0.

    Returns (loss, metrics). metrics are detached 0-dim token means over this call's mask:
    clipfrac (clipped branch active, either side) = clipfrac_low (A < 0, r < 1 - clip_low)
    + clipfrac_high (A > 0, r > 1 + clip_high); dual_clipfrac (0 when dual_clip is None);
    approx_kl = mean(-d) = mean(-clamp(logp - old_logp, -20, 20)), the k1 estimate of KL(pi_old || pi)
    from the same clamped log-ratio as r, as in current verl's ppo_kl (logp = 60, old_logp = 0 gives
    approx_kl = -20, not -60).

    Worked example, one token per branch: inside, clipped low, clipped high, dual-clipped.
    >>> logp = torch.log(torch.tensor([[1.0, 0.5, 1.5, 4.0]]))  # ratios, since old_logp = 0
    >>> adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    >>> loss, m = policy_loss(logp, torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.28, dual_clip=3.0)
    >>> round(loss.item(), 4)  # per token: -1.0, +0.8 (not .5), -1.28 (not -1.5), +3.0 (not 4.0)
    0.38
    >>> {k: round(v.item(), 4) for k, v in m.items()}
    {'clipfrac': 0.5, 'clipfrac_low': 0.25, 'clipfrac_high': 0.25, 'approx_kl': -0.2747, 'dual_clipfrac': 0.25}
    """
    # BEGIN SOLUTION ex6-policy-loss
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    log_ratio = (logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    # ---- THE CLIP (StarPO-S clip-higher: asymmetric range [1 - clip_low, 1 + clip_high]) ----
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)  # pessimistic: the larger loss wins
    if dual_clip is None:
        dual_active = torch.zeros_like(loss_mask, dtype=torch.bool)
    else:
        dual_active = (advantages < 0) & (per_token > -advantages * dual_clip)
        per_token = torch.where(dual_active, -advantages * dual_clip, per_token)
    loss = _aggregate(per_token, loss_mask, loss_normalizer)

    with torch.no_grad():
        is_clipped = clipped > unclipped  # strictly: equal means r in range (or A = 0), not clipped
        metrics = {
            "clipfrac": masked_mean(is_clipped.float(), loss_mask),
            "clipfrac_low": masked_mean((is_clipped & (ratio < 1)).float(), loss_mask),
            "clipfrac_high": masked_mean((is_clipped & (ratio > 1)).float(), loss_mask),
            "approx_kl": masked_mean(-log_ratio, loss_mask),
            "dual_clipfrac": masked_mean(dual_active.float(), loss_mask),
        }
    return loss, metrics
    # END SOLUTION


def value_loss(values, old_values, returns, loss_mask, clip_range, loss_normalizer=None):
    """Clipped critic loss of StarPO's PPO variant (StarPO-S keeps the critic, Finding 1).

    0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2) per token (docs/paper.md §6, c = 0.5):
    the critic may move at most c from its rollout-time prediction before its gradient is cut.
    metrics: vf_clipfrac, the masked mean of (clipped term > unclipped term): the fraction of tokens
    where the clipped term is strictly larger (a tie counts as not clipped).

    Token 1 moved from 1.0 to 2.0; clipped to 1.5 its error (1.5 - 3)^2 = 2.25 exceeds (2 - 3)^2 = 1.
    >>> loss, m = value_loss(torch.tensor([[1., 2.]]), torch.tensor([[1., 1.]]),
    ...                      torch.tensor([[0., 3.]]), torch.ones(1, 2), clip_range=0.5)
    >>> loss, m["vf_clipfrac"]  # (0.5 * 1 + 0.5 * 2.25) / 2
    (tensor(0.8125), tensor(0.5000))
    """
    # BEGIN SOLUTION ex7-value-loss
    values_clipped = old_values + (values - old_values).clamp(-clip_range, clip_range)  # (B, T)
    unclipped = (values - returns) ** 2
    clipped = (values_clipped - returns) ** 2
    per_token = 0.5 * torch.maximum(unclipped, clipped)
    loss = _aggregate(per_token, loss_mask, loss_normalizer)
    with torch.no_grad():
        vf_clipfrac = masked_mean((clipped > unclipped).float(), loss_mask)
    return loss, {"vf_clipfrac": vf_clipfrac}
    # END SOLUTION


def entropy_from_logits(logits):
    """Entropy of softmax(logits) per position: (..., V) -> (...), in float32.

    H = logsumexp(z) - sum(softmax(z) * z) (docs/paper.md §6), which never takes log of a tiny
    probability. Finding 3: token entropy drops sharply BEFORE the reward collapses, an early
    warning. Pass the temperature-scaled logits (finite values). Over a 150k vocabulary this is big:
    call it in chunks under torch.no_grad() (docs/paper.md §7.11).

    >>> entropy_from_logits(torch.tensor([[0., 0., 0., 0.], [100., 0., 0., 0.]]))  # log 4, ~0
    tensor([1.3863, 0.0000])
    """
    z = logits.float()  # bf16 logits would lose the small probabilities that make up the entropy
    return torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(dim=-1)


def logprob_and_entropy(logits, targets, temperature, with_entropy=True):
    """The trainer's per-token numbers from one row of logits per response token: log pi(target) and
    the entropy, both of softmax(logits / T). (n, V) logits, (n,) targets -> two (n,) float32 (the
    entropy is zeros without with_entropy). T is the rollout's temperature: the PPO ratio must compare
    the very distribution that sampled (docs/paper.md §7.1).
    log pi = z_target - logsumexp(z), z = logits / T.

    Row 1: uniform over 4 tokens. Row 2 at T = 2: z = (1, 0, 0, 0), logsumexp(z) = log(e + 3) = 1.7437,
    so log pi(token 0) = 1 - 1.7437 and the entropy is 1.7437 - e / (e + 3) = 1.2683.
    >>> logits = torch.tensor([[0., 0., 0., 0.], [2., 0., 0., 0.]])
    >>> logp, entropy = logprob_and_entropy(logits, torch.tensor([3, 0]), 2.0)
    >>> logp, entropy
    (tensor([-1.3863, -0.7437]), tensor([1.3863, 1.2683]))
    """
    # BEGIN SOLUTION ex10-logprobs
    z = logits.float() / temperature  # (n, V); bf16 would lose the small probabilities
    logp = z.gather(-1, targets[:, None]).squeeze(-1) - z.logsumexp(-1)
    return logp, entropy_from_logits(z) if with_entropy else torch.zeros_like(logp)
    # END SOLUTION


def kl_estimate(logp, ref_logp, kind):
    """Per-token estimate of KL(pi || pi_ref) from tokens sampled from pi, same shape as logp.

    With x = ref_logp - logp (docs/paper.md §6, Schulman's estimators):
    "k1" = -x (unbiased, can be negative), "k2" = 0.5 x^2, "k3" = exp(x) - x - 1 (unbiased, >= 0).
    Vanilla StarPO uses k1 inside the reward (PPO) or k3 in the loss (GRPO), coefficient 0.001;
    StarPO-S removes the KL term altogether (Finding 5).

    >>> logp, ref = torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25]))
    >>> [round(kl_estimate(logp, ref, k).item(), 4) for k in ("k1", "k2", "k3")]  # x = -log 2
    [0.6931, 0.2402, 0.1931]
    """
    diff = logp - ref_logp
    if kind == "k1":
        return diff
    if kind == "k2":
        return 0.5 * diff**2
    if kind == "k3":
        x = (-diff).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # exp of a huge x would be inf
        return torch.exp(x) - x - 1
    raise ValueError(f"unknown KL estimator {kind!r}; use 'k1', 'k2' or 'k3'")


@torch.no_grad()
def select_groups_by_reward_std(rewards, group_ids, filter_ratio, largest=True):
    """StarPO-S uncertainty filter (Finding 4): keep whole groups whose rollouts disagree most.

    U(pi, M, s_0) = Std_{tau ~ pi(.|s_0)}[R(tau)] per group (one group = the N rollouts of one seed,
    Bessel std, rewards including the format penalty). Keeps exactly max(1, int(filter_ratio * G))
    of the G groups, those with the largest U (largest=False: the smallest); the paper keeps 25%.
    int() rounds down, and a filter_ratio that would keep no group (int(filter_ratio * G) = 0, e.g.
    0.25 of 3 groups) still keeps one: the paper's code has no such floor (docs/paper.md §9.8), here
    one group is the minimum. filter_ratio outside (0, 1] raises ValueError.
    A group whose rollouts all get the same reward teaches nothing and, repeated, drives the Echo Trap.
    Ties in U are broken by the lower group id first. Returns a bool mask (B,) over trajectories.

    Groups 0..3 have std .71, 0, 0, 2.12:
    >>> rewards = torch.tensor([1., 0., 1., 1., 0., 0., 3., 0.])
    >>> groups = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    >>> select_groups_by_reward_std(rewards, groups, filter_ratio=0.5)  # groups 3 and 0
    tensor([ True,  True, False, False, False, False,  True,  True])
    >>> select_groups_by_reward_std(rewards, groups, 0.25, largest=False)  # tie 1 vs 2: lower id
    tensor([False, False,  True,  True, False, False, False, False])
    """
    # BEGIN SOLUTION ex8-filter
    if not 0.0 < filter_ratio <= 1.0:
        raise ValueError(f"filter_ratio must be in (0, 1], got {filter_ratio}")
    group, _, std = group_stats(rewards, group_ids)
    num_keep = max(1, int(filter_ratio * std.numel()))
    # ---- THE FILTER: rank groups by U; a stable sort keeps lower group ids first among ties ----
    order = torch.sort(std, descending=largest, stable=True).indices  # (G,) groups, best first
    keep_group = torch.zeros_like(std, dtype=torch.bool)
    keep_group[order[:num_keep]] = True
    return keep_group[group]  # (B,) every trajectory follows its group: groups stay whole
    # END SOLUTION


def thought_mutual_information(logp, own=None):
    """I(X; R) between the prompts X and the thoughts R of a batch, in nats, estimated from the model's own
    log-probs (the Echo Trap, Finding 2: a thought that fits every state equally is a template). logp[i, k] is
    log p(thought k | prompt i), summed over the thought's tokens: (M, K) for M prompts and K thoughts, thought
    k sampled for prompt own[k] (own: (K,) prompt indices; None: thought k for prompt k, K = M). Under the
    batch's M prompts, uniform, p(r) = mean_i p(r | x_i), and

        I = mean_k [ log p(r_k | x_own[k]) - log mean_i p(r_k | x_i) ],

    which is 0 when each thought is as likely under every prompt (one template for all states, or no thoughts
    at all) and reaches log M when each thought fits its own prompt alone. An estimate from K samples, it can
    come out slightly below 0; several thoughts per prompt make it less noisy. Low entropy with a high I is one
    confident answer per state; low entropy with I near 0 is template collapse.

    >>> round(float(thought_mutual_information(torch.tensor([[0.0, -50.0], [-50.0, 0.0]]))), 4)  # log 2
    0.6931
    >>> float(thought_mutual_information(torch.tensor([[-3.0, -5.0], [-3.0, -5.0]])))  # a template: no I
    0.0
    >>> round(float(thought_mutual_information(torch.tensor([[0.0, 0.0, -50.0], [-50.0, -50.0, 0.0]]),
    ...                                        own=torch.tensor([0, 0, 1]))), 4)  # two thoughts for prompt 0
    0.6931
    """
    M, K = logp.shape
    own = torch.arange(K) if own is None else own
    return (logp[own, torch.arange(K)] - (torch.logsumexp(logp, dim=0) - math.log(M))).mean()

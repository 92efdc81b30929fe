"""Tests for starpo.py. Every expected value comes from an independent computation written here (numpy,
hand-worked numbers, torch.distributions) or, for the functions that are course exercises (course/README.md),
from stored numbers, tests/fixtures/starpo.json, made once by independent loops that stay out of the student
copy (course/hidden/make_fixtures.py); never from starpo itself."""

import doctest
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import starpo  # noqa: E402
from starpo import (  # noqa: E402
    actor_loss, explained_variance, token_level_rewards,
    compute_gae,
    compute_grpo_advantages,
    entropy_from_logits,
    logprob_and_entropy,
    kl_estimate,
    masked_mean,
    masked_whiten,
    policy_loss,
    select_groups_by_reward_std,
    value_loss,
)

FIXTURE = json.loads((Path(__file__).resolve().parent / "fixtures" / "starpo.json").read_text())
METRIC_KEYS = {"clipfrac", "clipfrac_low", "clipfrac_high", "approx_kl", "dual_clipfrac"}


def multi_turn_mask(rng, B, T):
    """Masks that look like agent trajectories: prompt, then response/observation turns, then padding.
    Row 0 is fully masked out (an empty row)."""
    mask = np.zeros((B, T))
    for b in range(1, B):
        t = rng.integers(0, 4)  # prompt
        end = rng.integers(t + 1, T + 1)  # padding after end
        while t < end:
            n_resp = rng.integers(1, 6)
            mask[b, t : min(t + n_resp, end)] = 1
            t += n_resp + rng.integers(1, 5)  # an observation gap
    return mask


# ----------------------------------------------------------------------------- masked statistics


def test_masked_mean_and_whiten_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 9)) * 3 + 1
    mask = multi_turn_mask(rng, 4, 9)
    sel = x[mask == 1]
    mean, var = sel.mean(), sel.var(ddof=1)
    expected = np.where(mask == 1, (x - mean) / np.sqrt(var + 1e-8), 0.0)
    xt, mt = torch.tensor(x), torch.tensor(mask)
    assert masked_mean(xt, mt).item() == pytest.approx(mean, rel=1e-12)
    np.testing.assert_allclose(masked_whiten(xt, mt).numpy(), expected, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- GAE


def gae_cases():
    """Five (gamma, lam) settings on 6 x 20 multi-turn batches with an empty row, a row of a single step and a row
    whose steps reach the last column; rewards on masked tokens too (ignored). Stored numbers (module docstring)."""
    return [pytest.param(case, id=f"gamma={case['gamma']},lam={case['lam']}") for case in FIXTURE["gae"]]


@pytest.mark.parametrize("case", gae_cases())
def test_gae_matches_stored_numbers(case):
    check_gae_against_stored(compute_gae, case)


def check_gae_against_stored(gae, case):
    """gae (compute_gae, or the fast engine's, tests/test_fast.py) against a case's stored numbers."""
    r, v, mask = (torch.tensor(case[k], dtype=torch.float64) for k in ("rewards", "values", "mask"))
    adv, ret = gae(r, v, mask, case["gamma"], case["lam"])
    np.testing.assert_allclose(adv.numpy(), case["advantages"], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(ret.numpy(), case["returns"], rtol=1e-9, atol=1e-10)
    # float32 gives the same numbers to float32 precision
    adv32, _ = gae(r.float(), v.float(), mask.float(), case["gamma"], case["lam"])
    np.testing.assert_allclose(adv32.numpy(), adv.numpy(), rtol=1e-4, atol=1e-4)
    adv, ret = gae(r, v, torch.zeros_like(mask), case["gamma"], case["lam"])  # no steps at all
    assert adv.shape == mask.shape and (adv == 0).all() and (ret == 0).all()


def test_gae_gamma_lambda_one_returns_are_reward_to_go():
    """gamma = lam = 1 (the paper's setting): the return of every response token is the sum of the
    rewards on the response tokens from it to the end, whatever the critic says."""
    rng = np.random.default_rng(1)
    r, v, mask = rng.normal(size=(5, 30)), rng.normal(size=(5, 30)) * 10, multi_turn_mask(rng, 5, 30)
    _, ret = compute_gae(torch.tensor(r), torch.tensor(v), torch.tensor(mask), 1.0, 1.0)
    to_go = np.flip(np.cumsum(np.flip(r * mask, 1), 1), 1) * mask
    np.testing.assert_allclose(ret.numpy(), to_go, atol=1e-9)


# ----------------------------------------------------------------------------- GRPO


@pytest.mark.parametrize("normalize_by_std", [True, False])
def test_grpo_matches_stored_numbers(normalize_by_std):
    # non-contiguous, interleaved ids; group 9 has one member; group 5 has equal rewards
    case = FIXTURE["grpo"]
    adv = compute_grpo_advantages(torch.tensor(case["rewards"]), torch.tensor(case["ids"]),
                                  normalize_by_std=normalize_by_std)
    assert adv.shape == (len(case["rewards"]),) and adv.dtype == torch.float32
    np.testing.assert_allclose(adv.numpy(), case["grpo" if normalize_by_std else "dr_grpo"], rtol=1e-5, atol=1e-6)
    assert adv[4] == 0 and (adv[6:9] == 0).all()  # size-1 group, equal rewards: exactly 0


# ----------------------------------------------------------------------------- policy loss


def row(values):
    return torch.tensor([values], dtype=torch.float64)  # (1, T)


def run_policy_loss(ratios, advs, mask=None, **kw):
    logp = torch.log(row(ratios)).requires_grad_()  # old_logp = 0, so exp(logp) is the ratio
    mask = row([1.0] * len(ratios) if mask is None else mask)
    loss, metrics = policy_loss(logp, torch.zeros_like(logp), row(advs), mask, **kw)
    loss.backward()
    return loss.item(), logp.grad[0].tolist(), {k: v.item() for k, v in metrics.items()}


def test_policy_loss_each_branch_hand_worked():
    # eps_low = 0.2, eps_high = 0.28, dual clip c = 3. Per token: (r, A, loss L, dL/dlogp = -A r or 0)
    tokens = [
        (1.1, 2.0, -2.2, -2.2),  # inside the clip
        (1.25, 1.0, -1.25, -1.25),  # inside only thanks to clip-higher (0.28 > 0.25)
        (0.5, -1.0, 0.8, 0.0),  # clipped low: A < 0, r < 0.8 -> L = -A * 0.8, no gradient
        (1.5, 1.0, -1.28, 0.0),  # clipped high: A > 0, r > 1.28 -> L = -A * 1.28, no gradient
        (0.5, 1.0, -0.5, -0.5),  # r < 0.8 but A > 0: the pessimistic max keeps the unclipped term
        (2.0, -1.0, 2.0, 2.0),  # r > 1.28 but A < 0, below the dual clip: unclipped
        (4.0, -1.0, 3.0, 0.0),  # dual clip: A < 0 and -A r = 4 > 3 -> L = 3, no gradient
        (0.25, -2.0, 1.6, 0.0),  # clipped low again: L = -A * 0.8
        (9.0, 5.0, 0.0, 0.0),  # masked out: contributes nothing
    ]
    ratios, advs, losses, grads = zip(*tokens)
    mask = [1.0] * 8 + [0.0]
    loss, grad, m = run_policy_loss(ratios, advs, mask, clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    assert loss == pytest.approx(sum(losses) / 8)
    np.testing.assert_allclose(grad, [g / 8 for g in grads], atol=1e-12)
    assert m["clipfrac_low"] == pytest.approx(2 / 8) and m["clipfrac_high"] == pytest.approx(1 / 8)
    assert m["clipfrac"] == pytest.approx(3 / 8) and m["dual_clipfrac"] == pytest.approx(1 / 8)
    assert m["approx_kl"] == pytest.approx(-sum(math.log(r) for r in ratios[:8]) / 8)

    # without dual clip the exploded token keeps its full loss -A r = 4 and its gradient
    loss, grad, m = run_policy_loss([4.0], [-1.0], clip_low=0.2, clip_high=0.28)
    assert (loss, grad, m["dual_clipfrac"]) == (pytest.approx(4.0), [pytest.approx(4.0)], 0.0)
    # symmetric clip (vanilla StarPO): r = 1.25 is now clipped high
    loss, grad, m = run_policy_loss([1.25], [1.0], clip_low=0.2, clip_high=0.2)
    assert (loss, grad, m["clipfrac_high"]) == (pytest.approx(-1.2), [0.0], 1.0)


def test_policy_loss_metrics_are_detached_scalars():
    logp = torch.randn(3, 5, requires_grad=True)
    _, metrics = policy_loss(logp, torch.randn(3, 5), torch.randn(3, 5), torch.ones(3, 5), 0.2, 0.28)
    assert set(metrics) == METRIC_KEYS
    assert all(v.dim() == 0 and not v.requires_grad for v in metrics.values())
    with pytest.raises(ValueError):
        policy_loss(logp, logp, logp, torch.ones(3, 5), 0.2, 0.2, dual_clip=1.0)


def test_micro_batches_with_loss_normalizer_equal_full_mini_batch():
    case = FIXTURE["micro_batches"]  # 6 x 12, rows with very different token counts
    mask, logp0, old, adv, v0, old_v, ret = (torch.tensor(case[k], dtype=torch.float64) for k in (
        "mask", "logp", "old_logp", "advantages", "values", "old_values", "returns"))
    B, n_tokens = mask.shape[0], int(mask.sum())

    def losses(rows, normalizer):
        logp, v = logp0[rows].clone().requires_grad_(), v0[rows].clone().requires_grad_()
        pl, _ = policy_loss(logp, old[rows], adv[rows], mask[rows], 0.2, 0.28, 3.0,
                            loss_normalizer=normalizer)
        vl, _ = value_loss(v, old_v[rows], ret[rows], mask[rows], 0.5, loss_normalizer=normalizer)
        (pl + vl).backward()
        return pl.item(), vl.item(), logp.grad, v.grad

    full_pl, full_vl, full_g, full_vg = losses(slice(0, B), None)
    # the token means over the whole mini-batch, stored (module docstring)
    assert full_pl == pytest.approx(case["policy_loss"], rel=1e-9)
    assert full_vl == pytest.approx(case["value_loss"], rel=1e-9)

    splits = [slice(0, 2), slice(2, 3), slice(3, 6)]
    for normalizer in (n_tokens, torch.tensor(float(n_tokens))):
        parts = [losses(s, normalizer) for s in splits]
        assert sum(p[0] for p in parts) == pytest.approx(full_pl, rel=1e-12)
        assert sum(p[1] for p in parts) == pytest.approx(full_vl, rel=1e-12)
        torch.testing.assert_close(torch.cat([p[2] for p in parts]), full_g)
        torch.testing.assert_close(torch.cat([p[3] for p in parts]), full_vg)
    # the pitfall this guards against (docs/paper.md §7.8): averaging per-micro-batch means differs
    naive = sum(losses(s, None)[0] for s in splits) / len(splits)
    assert naive != pytest.approx(full_pl, rel=1e-3)


# ----------------------------------------------------------------------------- value loss


def test_value_loss_hand_worked_including_clipped_branch():
    # (V, V_old, R): 0.5 * max((V-R)^2, (clip(V, V_old +- 0.5) - R)^2), dL/dV = V - R if unclipped wins
    tokens = [
        (1.0, 1.0, 0.0, 0.5, 1.0),  # no move: both terms equal
        (0.2, 0.0, 1.0, 0.32, -0.8),  # moved inside the clip range
        (2.0, 1.0, 3.0, 1.125, 0.0),  # clipped to 1.5: (1.5-3)^2 = 2.25 > 1 -> clipped wins, no grad
        (2.0, 1.0, 0.0, 2.0, 2.0),  # clipped to 1.5: 2.25 < 4 -> unclipped wins
        (50.0, 0.0, 0.0, 0.0, 0.0),  # masked out
    ]
    V, old, R, losses, grads = (torch.tensor([col], dtype=torch.float64) for col in zip(*tokens))
    V.requires_grad_()
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    loss, metrics = value_loss(V, old, R, mask, clip_range=0.5)
    loss.backward()
    assert loss.item() == pytest.approx(losses.sum().item() / 4)
    torch.testing.assert_close(V.grad, grads / 4)
    assert metrics["vf_clipfrac"].item() == pytest.approx(0.25) and not metrics["vf_clipfrac"].requires_grad


# ----------------------------------------------------------------------------- entropy and KL


def test_entropy_matches_categorical():
    logits = torch.randn(3, 5, 50, dtype=torch.float64) * 5
    expected = torch.distributions.Categorical(logits=logits).entropy()
    ent = entropy_from_logits(logits)
    assert ent.shape == (3, 5) and ent.dtype == torch.float32
    torch.testing.assert_close(ent, expected.float(), rtol=1e-5, atol=1e-5)
    # huge logits and bf16 input: still finite, shift invariant, computed in float32
    shifted = entropy_from_logits(logits.float() + 1e4)
    torch.testing.assert_close(shifted, expected.float(), rtol=0, atol=5e-3)
    bf = logits.bfloat16()
    expected_bf = torch.distributions.Categorical(logits=bf.double()).entropy().float()
    torch.testing.assert_close(entropy_from_logits(bf), expected_bf, rtol=1e-5, atol=1e-5)


def test_logprob_and_entropy_and_their_gradients_match_stored_numbers():
    """Values and the logits' gradients (of logp . g_logp + entropy . g_entropy) at T = 0.7 on random logits:
    stored numbers (module docstring), made by a per-row loop in float64 with the hand-derived gradients
    d logp / dz = onehot(target) - p and d H / dz = -p (z - sum p z), times 1/T for the logits."""
    case = FIXTURE["logprob_entropy"]
    logits = torch.tensor(case["logits"], dtype=torch.float32, requires_grad=True)
    targets, T = torch.tensor(case["targets"]), case["temperature"]
    logp, entropy = logprob_and_entropy(logits, targets, T)
    (logp * torch.tensor(case["g_logp"]) + entropy * torch.tensor(case["g_entropy"])).sum().backward()
    assert logp.tolist() == pytest.approx(case["logp"], abs=1e-5)
    assert entropy.tolist() == pytest.approx(case["entropy"], abs=1e-5)
    torch.testing.assert_close(logits.grad, torch.tensor(case["grad"]), rtol=0, atol=1e-5)
    # without entropy: zeros, and bf16 logits give float32 numbers
    logp_bf, zeros = logprob_and_entropy(logits.detach().bfloat16(), targets, T, with_entropy=False)
    assert logp_bf.dtype == torch.float32 and not zeros.any()
    torch.testing.assert_close(logp_bf, logp.detach(), rtol=0, atol=0.1)


def test_kl_estimators_match_formulas_and_k3_nonnegative():
    rng = np.random.default_rng(4)
    lp, ref = rng.normal(size=(4, 6)) * 2, rng.normal(size=(4, 6)) * 2
    x = ref - lp
    expected = {"k1": lp - ref, "k2": 0.5 * (lp - ref) ** 2, "k3": np.exp(x) - x - 1}
    for kind, exp in expected.items():
        out = kl_estimate(torch.tensor(lp), torch.tensor(ref), kind)
        assert out.shape == (4, 6)
        np.testing.assert_allclose(out.numpy(), exp, rtol=1e-12)
    assert (kl_estimate(torch.tensor(lp), torch.tensor(ref), "k3") >= 0).all()
    with pytest.raises(ValueError):
        kl_estimate(torch.tensor(lp), torch.tensor(ref), "k4")


def test_kl_estimators_average_to_true_kl():
    """k1 and k3 are unbiased for KL(p || q) when tokens are sampled from p."""
    torch.manual_seed(0)
    p = torch.distributions.Categorical(logits=torch.randn(8))
    q = torch.distributions.Categorical(logits=torch.randn(8))
    tokens = p.sample((400_000,))
    true_kl = torch.distributions.kl_divergence(p, q).item()
    for kind in ("k1", "k3"):
        est = kl_estimate(p.log_prob(tokens), q.log_prob(tokens), kind).mean().item()
        assert est == pytest.approx(true_kl, abs=0.01)


# ----------------------------------------------------------------------------- uncertainty filter


@pytest.mark.parametrize("filter_ratio", [0.25, 0.3, 0.5, 0.01, 1.0])
@pytest.mark.parametrize("largest", [True, False])
def test_filter_keeps_the_right_whole_groups(filter_ratio, largest):
    """10 groups of 4 with ids in no particular order, small integer rewards (many exact ties, two groups of std 0
    that tie with each other), the trajectories of a group scattered over the batch. Stored kept groups."""
    case = FIXTURE["filter"]
    ids = np.array(case["ids"])
    keep = select_groups_by_reward_std(torch.tensor(case["rewards"]), torch.tensor(ids), filter_ratio, largest=largest)
    assert keep.dtype == torch.bool and keep.shape == (ids.size,)
    kept_groups = {int(g) for g in ids[keep.numpy()]}
    assert kept_groups == set(case["kept"][f"{filter_ratio} {largest}"])
    assert len(kept_groups) == max(1, int(filter_ratio * 10))
    for g in set(case["ids"]):  # whole groups only
        assert len(set(keep.numpy()[ids == g].tolist())) == 1


def test_filter_rejects_bad_ratio():
    with pytest.raises(ValueError):
        select_groups_by_reward_std(torch.ones(4), torch.tensor([0, 0, 1, 1]), 0.0)


# ----------------------------------------------------------------------------- edge cases


def test_edge_cases_are_finite():
    # GRPO: a single group of one, a single group of equal rewards
    assert compute_grpo_advantages(torch.tensor([3.0]), torch.tensor([0])).tolist() == [0.0]
    # 7 equal rewards of 0.3: their float32 mean is not exactly 0.3, yet the advantages must be exactly 0
    for normalize in (True, False):
        adv = compute_grpo_advantages(torch.full((7,), 0.3), torch.zeros(7, dtype=torch.long),
                                      normalize_by_std=normalize)
        assert adv.tolist() == [0.0] * 7
    assert select_groups_by_reward_std(torch.tensor([3.0]), torch.tensor([0]), 0.25).tolist() == [True]

    # huge log-prob differences both ways, an empty row, and garbage on masked tokens
    logp = torch.tensor([[0.0, -1e4, 0.0], [0.0, 0.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-1e4, 0.0, -1e4], [float("inf"), 0.0, 0.0]])
    adv = torch.tensor([[-1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    for dual in (None, 3.0):
        logp.grad = None
        loss, metrics = policy_loss(logp, old, adv, mask, 0.2, 0.28, dual_clip=dual)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
        assert all(torch.isfinite(v) for v in metrics.values())
    for kind in ("k1", "k2", "k3"):
        assert torch.isfinite(kl_estimate(torch.tensor([0.0, -1e4]), torch.tensor([-1e4, 0.0]), kind)).all()

    # a whole mini-batch with an empty mask (and a zero normalizer): every output is 0
    empty = torch.zeros(2, 3)
    x = torch.randn(2, 3, requires_grad=True)
    for normalizer in (None, 0):
        loss, metrics = policy_loss(x, torch.randn(2, 3), torch.randn(2, 3), empty, 0.2, 0.28, 3.0,
                                    normalizer)
        vloss, vmetrics = value_loss(x, torch.randn(2, 3), torch.randn(2, 3), empty, 0.5, normalizer)
        (loss + vloss).backward()
        assert loss.item() == 0 and vloss.item() == 0 and (x.grad == 0).all()
        assert all(v.item() == 0 for v in [*metrics.values(), *vmetrics.values()])
    assert masked_mean(x, empty).item() == 0
    inf_pad = torch.tensor([[1.0, float("inf")]])  # garbage on a padded token must not leak in as nan
    assert masked_mean(inf_pad, torch.tensor([[1.0, 0.0]])).item() == 1.0
    one_token = torch.tensor([[1.0, 0, 0], [0, 0, 0]])
    assert (masked_whiten(x, empty) == 0).all() and (masked_whiten(x, one_token) == 0).all()
    adv, ret = compute_gae(torch.randn(2, 3), torch.randn(2, 3), empty, 1.0, 1.0)
    assert (adv == 0).all() and (ret == 0).all()


# ----------------------------------------------------------------------------- docstrings


def test_docstring_examples_are_true():
    result = doctest.testmod(starpo)
    assert result.attempted >= 9 and result.failed == 0


def test_token_level_rewards_match_stored_numbers():
    """The reward sits on each row's last sampled token; the KL term on every sampled token. Stored numbers."""
    case = FIXTURE["token_level_rewards"]
    got = token_level_rewards(*(torch.tensor(case[k], dtype=torch.float64) for k in ("rewards", "mask", "kl")),
                              kl_coef=case["kl_coef"])
    np.testing.assert_allclose(got.numpy(), case["expected"], rtol=1e-9, atol=1e-12)


def test_explained_variance_against_numpy():
    rng = np.random.default_rng(4)
    returns, values = rng.normal(size=(3, 9)), rng.normal(size=(3, 9))
    mask = (rng.random((3, 9)) < 0.6).astype(float)
    picked = mask.astype(bool)
    expected = 1 - np.var(returns[picked] - values[picked]) / np.var(returns[picked])
    got = explained_variance(torch.tensor(returns), torch.tensor(values), torch.tensor(mask))
    assert float(got) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("estimator", ["gae", "grpo"])
def test_actor_loss_adds_entropy_bonus_and_grpo_kl_token_by_token(estimator):
    """Clipped term, - entropy_coef x entropy, + kl_coef x k3 (GRPO only), summed over the tokens and divided
    by the normalizer 10: stored numbers. The entropy metric is the plain mean over the sampled tokens."""
    case = FIXTURE["actor_loss"]
    logp, entropy, old_logp, advantages, mask, ref_logp = (torch.tensor(case[k], dtype=torch.float64) for k in (
        "logp", "entropy", "old_logp", "advantages", "mask", "ref_logp"))
    algo = type("Algo", (), dict(clip_low=0.2, clip_high=0.28, dual_clip=0, entropy_coef=0.01, kl_coef=0.05,
                                 estimator=estimator, grpo_kl="k3"))
    loss, metrics = actor_loss(logp, entropy, old_logp, advantages, mask, algo, loss_normalizer=10, ref_logp=ref_logp)
    assert float(loss) == pytest.approx(case[f"loss_{estimator}"], rel=1e-9)
    assert float(metrics["entropy"]) == pytest.approx(np.array(case["entropy"])[np.array(case["mask"]) == 1].mean(),
                                                      rel=1e-9)

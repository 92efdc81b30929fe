"""ex5-grpo, hidden: other seeds, unequal groups, Dr. GRPO, eps, groups of one, float noise."""
import os
import sys
from fractions import Fraction

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

grpo = adapters.function("ex5-grpo")


def reference(rewards, ids, eps=1e-6, normalize_by_std=True):
    """numpy GRPO over groups of any size (ddof=1; a group of one has std 0)."""
    r, ids = np.asarray(rewards, dtype=np.float64), np.asarray(ids)
    out = np.zeros_like(r)
    for g in np.unique(ids):
        sel = ids == g
        std = r[sel].std(ddof=1) if sel.sum() > 1 else 0.0
        if std > eps:
            centred = r[sel] - r[sel].mean()
            out[sel] = centred / (std + eps) if normalize_by_std else centred
    return out


def test_unequal_groups_with_sparse_ids_seed_123():
    rng = np.random.default_rng(123)
    ids = rng.permutation([100] * 6 + [7] * 3 + [42] * 2 + [3] * 5)
    rewards = rng.integers(-2, 3, size=ids.size).astype(np.float64) + rng.normal(0, 0.1, size=ids.size)
    for normalize in (True, False):
        adv = grpo(torch.tensor(rewards, dtype=torch.float32), torch.tensor(ids), normalize_by_std=normalize)
        np.testing.assert_allclose(adv.numpy(), reference(rewards, ids, normalize_by_std=normalize),
                                   rtol=1e-4, atol=1e-5)


def test_dr_grpo_does_not_upweight_near_deterministic_groups():
    # group 0: three successes and one failure (std .5); group 1: a 50/50 group (std ~.577)
    rewards = torch.tensor([1., 1., 1., 0., 1., 0., 1., 0.])
    ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    dr = grpo(rewards, ids, normalize_by_std=False)
    expected = [Fraction(1, 4)] * 3 + [Fraction(-3, 4)] + [Fraction(1, 2), Fraction(-1, 2)] * 2
    np.testing.assert_allclose(dr.numpy(), [float(x) for x in expected], atol=1e-6)
    std = grpo(rewards, ids)  # GRPO divides by the std: group 0's failure gets -0.75 / 0.5 = -1.5
    assert abs(std[3].item() + 0.75 / (0.5 + 1e-6)) < 1e-4


def test_eps_threshold_and_eps_in_the_denominator():
    rewards = torch.tensor([0.0, 0.4, 0.0, 2.0])  # stds: .2828, 1.4142
    ids = torch.tensor([1, 1, 2, 2])
    adv = grpo(rewards, ids, eps=0.5)  # group 1's std <= eps: exactly 0
    assert adv[:2].tolist() == [0.0, 0.0]
    s = 2.0 ** 0.5
    np.testing.assert_allclose(adv[2:].numpy(), [-1.0 / (s + 0.5), 1.0 / (s + 0.5)], rtol=1e-5)


def test_only_singletons_and_float_noise_give_zeros():
    singles = grpo(torch.tensor([3.0, -1.0, 0.5]), torch.tensor([0, 1, 2]))
    assert singles.tolist() == [0.0, 0.0, 0.0]
    noisy = grpo(torch.full((7,), 0.3), torch.zeros(7, dtype=torch.long))  # 0.3 is inexact in binary
    assert noisy.tolist() == [0.0] * 7
    dr = grpo(torch.full((5,), 0.1), torch.full((5,), 4), normalize_by_std=False)
    assert dr.tolist() == [0.0] * 5 and dr.shape == (5,)


def test_float64_rewards_seed_2024():
    rng = np.random.default_rng(2024)
    ids = np.repeat(np.arange(8), 2)
    rewards = rng.normal(size=16)
    adv = grpo(torch.tensor(rewards, dtype=torch.float64), torch.tensor(ids))
    np.testing.assert_allclose(adv.double().numpy(), reference(rewards, ids), rtol=1e-6, atol=1e-7)

"""ex5-grpo: GRPO and Dr. GRPO advantages (starpo.compute_grpo_advantages)."""
import os
import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

grpo = adapters.function("ex5-grpo")


def reference(rewards, ids, eps=1e-6, normalize_by_std=True):
    """Plain-Python GRPO: per-group mean and Bessel std with the statistics module."""
    out = []
    for r, g in zip(rewards, ids):
        members = [x for x, h in zip(rewards, ids) if h == g]
        mean = statistics.fmean(members)
        std = statistics.stdev(members) if len(members) > 1 else 0.0
        if std <= eps:
            out.append(0.0)
        elif normalize_by_std:
            out.append((r - mean) / (std + eps))
        else:
            out.append(r - mean)
    return out


def test_docstring_example_both_modes():
    rewards, groups = torch.tensor([1., 0., 1., 1.]), torch.tensor([0, 0, 1, 1])
    adv = grpo(rewards, groups)
    assert torch.allclose(adv, torch.tensor([0.5 ** 0.5, -(0.5 ** 0.5), 0.0, 0.0]), atol=1e-4)
    assert adv[2].item() == 0.0 and adv[3].item() == 0.0
    dr = grpo(rewards, groups, normalize_by_std=False)
    assert torch.allclose(dr, torch.tensor([0.5, -0.5, 0.0, 0.0]), atol=1e-6)


def test_random_groups_match_statistics_module():
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.repeat(np.arange(3), 4)).tolist()  # 3 groups of 4, interleaved
    rewards = rng.normal(size=12).round(3).tolist()
    for normalize in (True, False):
        adv = grpo(torch.tensor(rewards), torch.tensor(ids), normalize_by_std=normalize)
        assert adv.shape == (12,)
        np.testing.assert_allclose(adv.numpy(), reference(rewards, ids, normalize_by_std=normalize),
                                   rtol=1e-4, atol=1e-5)


def test_degenerate_groups_get_exactly_zero():
    # group 5: one rollout; group 2: all equal; group 9: a real group
    rewards = torch.tensor([0.7, 0.3, 0.3, 0.3, 2.0, -1.0])
    ids = torch.tensor([5, 2, 2, 2, 9, 9])
    adv = grpo(rewards, ids)
    assert torch.isfinite(adv).all()
    assert adv[:4].tolist() == [0.0, 0.0, 0.0, 0.0]
    s = statistics.stdev([2.0, -1.0])
    assert abs(adv[4].item() - 1.5 / (s + 1e-6)) < 1e-4
    assert abs(adv[5].item() + 1.5 / (s + 1e-6)) < 1e-4


def test_normalized_groups_have_zero_mean_and_unit_std():
    rng = np.random.default_rng(1)
    rewards = torch.tensor(rng.uniform(0, 1, size=(4, 5)).reshape(-1), dtype=torch.float32)
    ids = torch.arange(4).repeat_interleave(5)
    adv = grpo(rewards, ids).double()
    for g in range(4):
        a = adv[ids == g].numpy()
        assert abs(a.mean()) < 1e-5
        assert abs(a.std(ddof=1) - 1.0) < 1e-4

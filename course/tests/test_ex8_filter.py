"""ex8-filter: the StarPO-S uncertainty filter (starpo.select_groups_by_reward_std)."""
import os
import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

select = adapters.function("ex8-filter")


def reference(rewards, ids, filter_ratio, largest=True):
    """Rank groups (sorted by id) by Bessel std, ties to the lower id; keep max(1, int(ratio * G))."""
    groups = sorted(set(ids))
    std = {g: (statistics.stdev([r for r, h in zip(rewards, ids) if h == g])
               if ids.count(g) > 1 else 0.0) for g in groups}
    order = sorted(groups, key=lambda g: (-std[g] if largest else std[g], g))
    kept = set(order[:max(1, int(filter_ratio * len(groups)))])
    return [h in kept for h in ids]


def test_docstring_examples():
    rewards = torch.tensor([1., 0., 1., 1., 0., 0., 3., 0.])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert select(rewards, groups, filter_ratio=0.5).tolist() == [True, True, False, False, False, False, True, True]
    assert select(rewards, groups, 0.25, largest=False).tolist() == [False, False, True, True, False, False,
                                                                     False, False]


def test_random_groups_seed_0_paper_ratio():
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.repeat(np.arange(8), 4)).tolist()  # 8 seeds x 4 rollouts, interleaved
    rewards = rng.normal(size=32).round(4).tolist()
    keep = select(torch.tensor(rewards), torch.tensor(ids), 0.25)
    assert keep.dtype == torch.bool and keep.shape == (32,)
    assert keep.tolist() == reference(rewards, ids, 0.25)
    assert int(keep.sum()) == 2 * 4  # two whole groups


def test_groups_stay_whole_for_every_ratio():
    rng = np.random.default_rng(3)
    ids = np.repeat(np.arange(6), 3)
    rewards = rng.integers(0, 2, size=18).astype(float) + rng.normal(0, 0.01, size=18)
    for ratio in (0.2, 0.5, 0.75):
        keep = select(torch.tensor(rewards), torch.tensor(ids), ratio).numpy()
        for g in range(6):
            assert keep[ids == g].all() or not keep[ids == g].any()
        assert keep.tolist() == reference(rewards.tolist(), ids.tolist(), ratio)


def test_ratio_one_keeps_everything():
    rewards = torch.tensor([0., 1., 5., 5., 2., -1.])
    ids = torch.tensor([3, 3, 1, 1, 2, 2])
    assert select(rewards, ids, 1.0).tolist() == [True] * 6
    assert select(rewards, ids, 1.0, largest=False).tolist() == [True] * 6

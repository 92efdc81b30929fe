"""ex8-filter, hidden: ties, tiny and odd filter ratios, groups of one, largest=False, other seeds."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

select = adapters.function("ex8-filter")


def reference(rewards, ids, filter_ratio, largest=True):
    rewards, ids = np.asarray(rewards, dtype=np.float64), np.asarray(ids)
    groups = np.unique(ids)  # sorted
    std = [rewards[ids == g].std(ddof=1) if (ids == g).sum() > 1 else 0.0 for g in groups]
    ranked = sorted(range(len(groups)), key=lambda i: (-std[i] if largest else std[i], i))
    kept = {groups[i] for i in ranked[:max(1, int(filter_ratio * len(groups)))]}
    return [g in kept for g in ids]


def test_all_ties_keep_the_lowest_ids():
    # every group is one success and one failure, in either order: equal std everywhere
    ids = torch.tensor([40, 9, 40, 17, 9, 2, 17, 2])
    rewards = torch.tensor([1., 0., 0., 1., 1., 0., 0., 1.])
    for largest in (True, False):
        keep = select(rewards, ids, 0.5, largest=largest)
        assert keep.tolist() == [g in (2, 9) for g in ids.tolist()]


def test_ratio_edges_keep_at_least_one_and_floor():
    rng = np.random.default_rng(17)
    for n_groups, ratio, expected in ((8, 0.01, 1), (10, 0.3, 3), (7, 0.29, 2), (5, 0.99, 4), (3, 1.0, 3)):
        ids = np.repeat(np.arange(n_groups), 3)
        rewards = rng.normal(size=ids.size)
        keep = select(torch.tensor(rewards, dtype=torch.float64), torch.tensor(ids), ratio)
        assert int(keep.sum()) == 3 * expected
        assert keep.tolist() == reference(rewards, ids, ratio)


def test_groups_of_one_have_zero_uncertainty():
    ids = torch.tensor([0, 1, 1, 2, 3, 3])  # groups 0 and 2: a single rollout each
    rewards = torch.tensor([9.0, 0.0, 0.5, -4.0, 1.0, 1.0])  # group 3: equal rewards, std 0 too
    assert select(rewards, ids, 0.25).tolist() == [False, True, True, False, False, False]
    # smallest: groups 0, 2 and 3 tie at 0 -> lower ids first
    assert select(rewards, ids, 0.5, largest=False).tolist() == [True, False, False, True, False, False]


def test_unequal_groups_smallest_std_seed_99():
    rng = np.random.default_rng(99)
    ids = rng.permutation([5] * 4 + [1] * 6 + [8] * 2 + [3] * 5 + [0] * 3 + [6] * 4)
    rewards = rng.normal(size=ids.size) * rng.uniform(0.1, 3.0)
    for ratio, largest in ((0.5, False), (0.34, True), (0.25, False)):
        keep = select(torch.tensor(rewards, dtype=torch.float32), torch.tensor(ids), ratio, largest=largest)
        assert keep.tolist() == reference(rewards.astype(np.float32), ids, ratio, largest)

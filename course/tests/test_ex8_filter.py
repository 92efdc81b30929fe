"""ex8-filter: the StarPO-S uncertainty filter (starpo.select_groups_by_reward_std)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

select = adapters.function("ex8-filter")


WEIGHTS = {"test_docstring_examples": 3, "test_random_groups_paper_ratio": 3, "test_groups_stay_whole_for_every_ratio": 2}


def test_docstring_examples():
    rewards = torch.tensor([1., 0., 1., 1., 0., 0., 3., 0.])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert select(rewards, groups, filter_ratio=0.5).tolist() == [True, True, False, False, False, False, True, True]
    assert select(rewards, groups, 0.25, largest=False).tolist() == [False, False, True, True, False, False,
                                                                     False, False]


def test_random_groups_paper_ratio():
    """8 seeds x 4 rollouts, interleaved, at the paper's ratio 0.25; the kept trajectories were worked out once by
    ranking the groups' exact variances (course/hidden/make_fixtures.py), stored in fixtures/ex8-filter.json."""
    case = adapters.fixture("ex8-filter")["paper_ratio"]
    keep = select(torch.tensor(case["rewards"]), torch.tensor(case["ids"]), case["ratio"])
    assert keep.dtype == torch.bool and keep.shape == (32,)
    assert keep.tolist() == case["keep"]
    assert int(keep.sum()) == 2 * 4  # two whole groups


def test_groups_stay_whole_for_every_ratio():
    for case in adapters.fixture("ex8-filter")["every_ratio"]:
        ids = np.array(case["ids"])
        keep = select(torch.tensor(case["rewards"]), torch.tensor(ids), case["ratio"]).numpy()
        for g in set(case["ids"]):
            assert keep[ids == g].all() or not keep[ids == g].any()
        assert keep.tolist() == case["keep"], case["ratio"]


def test_ratio_one_keeps_everything():
    rewards = torch.tensor([0., 1., 5., 5., 2., -1.])
    ids = torch.tensor([3, 3, 1, 1, 2, 2])
    assert select(rewards, ids, 1.0).tolist() == [True] * 6
    assert select(rewards, ids, 1.0, largest=False).tolist() == [True] * 6


def test_the_kept_count_rounds_down():
    # 4 groups of stds 3, 2, 1, 0 (ids 0..3): ratio 0.7 keeps int(2.8) = 2 groups, ratio 0.2 keeps max(1, 0) = 1
    rewards = torch.tensor([0., 3 * 2 ** 0.5, 0., 2 * 2 ** 0.5, 0., 2 ** 0.5, 5., 5.])
    ids = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert select(rewards, ids, 0.7).tolist() == [True] * 4 + [False] * 4
    assert select(rewards, ids, 0.2).tolist() == [True] * 2 + [False] * 6

"""ex5-grpo: GRPO and Dr. GRPO advantages (starpo.compute_grpo_advantages)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

grpo = adapters.function("ex5-grpo")


WEIGHTS = {"test_docstring_example_both_modes": 3, "test_random_groups_match_stored_numbers": 3,
           "test_degenerate_groups_get_exactly_zero": 2}


def test_docstring_example_both_modes():
    rewards, groups = torch.tensor([1., 0., 1., 1.]), torch.tensor([0, 0, 1, 1])
    adv = grpo(rewards, groups)
    assert torch.allclose(adv, torch.tensor([0.5 ** 0.5, -(0.5 ** 0.5), 0.0, 0.0]), atol=1e-4)
    assert adv[2].item() == 0.0 and adv[3].item() == 0.0
    dr = grpo(rewards, groups, normalize_by_std=False)
    assert torch.allclose(dr, torch.tensor([0.5, -0.5, 0.0, 0.0]), atol=1e-6)


def test_random_groups_match_stored_numbers():
    """3 interleaved groups of 4; the expected advantages were made once with the statistics module
    (course/hidden/make_fixtures.py) and stored in fixtures/ex5-grpo.json."""
    case = adapters.fixture("ex5-grpo")["random_groups"]
    for key, normalize in (("grpo", True), ("dr_grpo", False)):
        adv = grpo(torch.tensor(case["rewards"]), torch.tensor(case["ids"]), normalize_by_std=normalize)
        assert adv.shape == (12,)
        np.testing.assert_allclose(adv.numpy(), case[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_degenerate_groups_get_exactly_zero():
    # group 5: one rollout; group 2: all equal; group 9: a real group
    rewards = torch.tensor([0.7, 0.3, 0.3, 0.3, 2.0, -1.0])
    ids = torch.tensor([5, 2, 2, 2, 9, 9])
    adv = grpo(rewards, ids)
    assert torch.isfinite(adv).all()
    assert adv[:4].tolist() == [0.0, 0.0, 0.0, 0.0]
    s = 3.0 / 2 ** 0.5  # group 9: mean 0.5, deviations +-1.5, Bessel std sqrt((1.5^2 + 1.5^2) / 1) = 2.1213
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


def test_eps_is_added_to_the_std():
    # group 0: rewards 1 and 4, mean 2.5, Bessel std sqrt(1.5^2 + 1.5^2) = 2.1213; with eps = 1 the advantages
    # are +-1.5 / 3.1213 = +-0.48057 (without the eps they would be +-0.70711)
    adv = grpo(torch.tensor([1.0, 4.0]), torch.tensor([0, 0]), eps=1.0)
    assert torch.allclose(adv, torch.tensor([-0.48057, 0.48057]), atol=1e-4)

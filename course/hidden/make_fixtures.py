"""The stored expected numbers (fixtures) of the visible course tests and of the project's tests of the exercised
functions (tests/test_starpo.py, test_envs.py, test_paper_mode.py, test_baselines.py), made from the independent
references below (plain loops, a breadth-first search, the paper's regular expressions), never from the code they
grade. The references
stay here, in course/hidden/, which the student copy leaves out: no shipped test holds an implementation.

    python course/hidden/make_fixtures.py           # rewrite course/tests/fixtures/*.json and tests/fixtures/*.json
    python course/hidden/make_fixtures.py --check   # exit 1 if a stored fixture differs from its reference or
                                                    # the solution disagrees with it (tests/test_course.py runs this)
Inputs are drawn from fixed seeds and rounded, so that the files stay small and readable.
"""
import json
import math
import os
import random
import re
import statistics
import sys
from fractions import Fraction

COURSE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(COURSE)
FILES = {name: os.path.join(COURSE, "tests", "fixtures", f"{name}.json") for name in
         ("ex1-sokoban", "ex3-token-rewards", "ex4-gae", "ex5-grpo", "ex6-policy-loss", "ex7-value-loss", "ex8-filter",
          "ex10-logprobs", "ex11-loss-normalizer", "ex12-update")}
FILES.update({name: os.path.join(ROOT, "tests", "fixtures", f"{name}.json") for name in
              ("starpo", "envs", "paper_mode", "baselines")})
STEP = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
MOVES = ["Up", "Down", "Left", "Right"]
SPECIAL_STRINGS = ["<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>"]


def rounded(x, digits=4):
    return [rounded(y, digits) for y in x] if isinstance(x, (list, tuple)) else round(float(x), digits)


def exact(x):
    """A computed float kept to 12 significant digits (the tests compare at 1e-9 relative or looser)."""
    return [exact(y) for y in x] if isinstance(x, (list, tuple)) else float(f"{x:.12g}")


# ---------------------------------------------------------------------------------------- the references
def ref_move(floor, boxes, player, action):
    dr, dc = STEP[action]
    one, two = (player[0] + dr, player[1] + dc), (player[0] + 2 * dr, player[1] + 2 * dc)
    if one not in floor:
        return player, set(boxes)
    if one not in boxes:
        return one, set(boxes)
    if two in floor and two not in boxes:
        return one, (set(boxes) - {one}) | {two}
    return player, set(boxes)


def ref_token_rewards(rewards, mask, kl=None, kl_coef=0.0):
    out = []
    for b, row in enumerate(mask):
        last = max(t for t, m in enumerate(row) if m)
        line = [rewards[b] if t == last else 0.0 for t in range(len(row))]
        if kl is not None:
            line = [x - kl_coef * kl[b][t] * row[t] for t, x in enumerate(line)]
        out.append(line)
    return out


def ref_gae(r, v, mask, gamma, lam):
    """Plain loops over each row, walking back over the response tokens only."""
    adv = [[0.0] * len(row) for row in r]
    ret = [[0.0] * len(row) for row in r]
    for b in range(len(r)):
        next_v = next_a = 0.0
        for t in reversed(range(len(r[b]))):
            if mask[b][t]:
                a = r[b][t] + gamma * next_v - v[b][t] + gamma * lam * next_a
                adv[b][t], ret[b][t] = a, a + v[b][t]
                next_v, next_a = v[b][t], a
    return adv, ret


def ref_grpo(rewards, ids, eps=1e-6, normalize_by_std=True):
    out = []
    for r, g in zip(rewards, ids):
        members = [x for x, h in zip(rewards, ids) if h == g]
        std = statistics.stdev(members) if len(members) > 1 else 0.0
        centred = r - statistics.fmean(members)
        out.append(0.0 if std <= eps else centred / (std + eps) if normalize_by_std else centred)
    return out


def ref_policy_token(ratio, adv, clip_low, clip_high, dual_clip=None):
    """-> (loss, clipped low, clipped high, dual-clipped) of one token."""
    clipped = min(max(ratio, 1 - clip_low), 1 + clip_high)
    loss = max(-adv * ratio, -adv * clipped)
    is_clipped = -adv * clipped > -adv * ratio
    dual = dual_clip is not None and adv < 0 and loss > -adv * dual_clip
    return (-adv * dual_clip if dual else loss), is_clipped and ratio < 1, is_clipped and ratio > 1, dual


def ref_policy_loss(logp, old, adv, mask, clip_low, clip_high, dual_clip=None, normalizer=None):
    """-> (loss, {metric: value}) with plain floats, token by token."""
    total = low = high = dual = kl = n = 0
    for lp_row, old_row, a_row, m_row in zip(logp, old, adv, mask):
        for lp, o, a, m in zip(lp_row, old_row, a_row, m_row):
            if m:
                d = min(max(lp - o, -20.0), 20.0)
                loss, lo, hi, du = ref_policy_token(math.exp(d), a, clip_low, clip_high, dual_clip)
                total, low, high, dual, kl, n = total + loss, low + lo, high + hi, dual + du, kl - d, n + 1
    n1 = max(n, 1)
    return total / max(n if normalizer is None else normalizer, 1), {
        "clipfrac": (low + high) / n1, "clipfrac_low": low / n1, "clipfrac_high": high / n1,
        "approx_kl": kl / n1, "dual_clipfrac": dual / n1}


def ref_value_loss(values, old, returns, mask, c, normalizer=None):
    total = clipped = n = 0
    for vs, os_, rs, ms in zip(values, old, returns, mask):
        for v, vo, r, m in zip(vs, os_, rs, ms):
            if m:
                a, b = (v - r) ** 2, (min(max(v, vo - c), vo + c) - r) ** 2
                total, clipped, n = total + 0.5 * max(a, b), clipped + (b > a), n + 1
    return total / max(n if normalizer is None else normalizer, 1), clipped / max(n, 1)


def ref_filter(rewards, ids, ratio, largest=True):
    """Rank groups by their exact (Fraction) variance, ties to the lower id; keep max(1, int(ratio * G))."""
    groups = sorted(set(ids))
    var = {g: (statistics.variance([Fraction(r) for r, h in zip(rewards, ids) if h == g])
               if ids.count(g) > 1 else Fraction(0)) for g in groups}
    order = sorted(groups, key=lambda g: (-var[g] if largest else var[g], g))
    kept = set(order[:max(1, int(ratio * len(groups)))])
    return [h in kept for h in ids]


def ref_room(text):
    """(floor, targets, boxes, player) of a rendered Sokoban puzzle: # wall, O target, X box, √ box on a target,
    P player, S player on a target."""
    cells = {(r, c): ch for r, line in enumerate(text.split("\n")) for c, ch in enumerate(line)}
    return ({rc for rc, ch in cells.items() if ch != "#"}, frozenset(rc for rc, ch in cells.items() if ch in "O√S"),
            frozenset(rc for rc, ch in cells.items() if ch in "X√"), next(rc for rc, ch in cells.items() if ch in "PS"))


def ref_shortest_path(text):
    """A shortest solution (action names, tried in STEP's order) of a rendered puzzle, by breadth-first search."""
    floor, targets, boxes, player = ref_room(text)
    prev = {(player, boxes): None}
    frontier = [(player, boxes)]
    while frontier:
        following = []
        for state in frontier:
            if state[1] == targets:
                path = []
                while prev[state] is not None:
                    state, action = prev[state]
                    path.append(action)
                return path[::-1]
            for action in STEP:
                moved, pushed = ref_move(floor, state[1], state[0], action)
                nxt = (moved, frozenset(pushed))
                if nxt not in prev:
                    prev[nxt] = (state, action)
                    following.append(nxt)
        frontier = following
    return None


def ref_random_success(text, longest):
    """[P(a uniform random action sequence of t actions solves the puzzle, stopping when solved), t = 0..longest]."""
    floor, targets, boxes, player = ref_room(text)
    memo = {}

    def p(state, left):
        if state[1] == targets:
            return 1.0
        if left == 0:
            return 0.0
        if (state, left) not in memo:
            total = 0.0
            for action in STEP:
                moved, pushed = ref_move(floor, state[1], state[0], action)
                total += p((moved, frozenset(pushed)), left - 1) / 4
            memo[(state, left)] = total
        return memo[(state, left)]

    return [p((player, boxes), t) for t in range(longest + 1)]


def ref_verl_gae(rewards, values, first, last, gamma, lam):
    """The pinned verl's loop: every position from the first response token to the last is a step (observation
    tokens included); 0 outside."""
    advantages, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(first, last + 1)):
        next_value = values[t + 1] if t < last else 0.0
        running = rewards[t] + gamma * next_value - values[t] + gamma * lam * running
        advantages[t] = running
    return advantages


def ref_regex_parse(text, valid_actions, max_actions, require_think, delete_special=False):
    """(thinking, actions, format_ok) by RAGEN's regular expression (quadratic, fine on short texts); with
    delete_special, its parser's deletion of the special strings inside the answer first."""
    pattern = r"<think>(.*?)</think>\s*<answer>(.*?)</answer>" if require_think else r"<answer>(.*?)</answer>"
    match = re.search(pattern, text, re.DOTALL)
    if match is None:
        return "", [], False
    answer = match.group(match.lastindex)
    if delete_special:
        for special in SPECIAL_STRINGS:
            answer = answer.replace(special, "")
    pieces = [p.strip() for p in answer.split("||") if p.strip()][:max_actions]
    names = {a.lower(): a for a in valid_actions}
    actions = [names[p.lower()] for p in pieces if p.lower() in names]
    return (match.group(1).strip() if require_think else ""), actions, bool(actions) and len(actions) == len(pieces)


# ---------------------------------------------------------------------------------------- the cases
def grid(floor, boxes, player, rows=7, cols=7):
    """A room as text, rows joined by '/': # wall, _ floor, X box, P player."""
    def cell(rc):
        return "P" if rc == player else "X" if rc in boxes else "_" if rc in floor else "#"
    return "/".join("".join(cell((r, c)) for c in range(cols)) for r in range(rows))


def ex1_cases():
    rng, cases = random.Random(0), []
    while len(cases) < 200:
        floor = {(r, c) for r in range(1, 6) for c in range(1, 6) if rng.random() < 0.75}
        if len(floor) < 2:
            continue
        cells = sorted(floor)
        player = rng.choice(cells)
        boxes = {cell for cell in cells if cell != player and rng.random() < 0.35}
        action = rng.choice(sorted(STEP))
        after_player, after_boxes = ref_move(floor, boxes, player, action)
        cases.append({"before": grid(floor, boxes, player), "action": action,
                      "after": grid(floor, after_boxes, after_player)})
    return {"random_rooms": cases}


def multi_turn_mask(rng, B, T):
    """Agent-like rows: prompt, then response and observation turns, then padding (at least one response token)."""
    mask = []
    for _ in range(B):
        row, t = [0] * T, rng.randint(0, 3)
        end = rng.randint(t + 1, T)
        while t < end:
            n = rng.randint(1, 5)
            for s in range(t, min(t + n, end)):
                row[s] = 1
            t += n + rng.randint(1, 4)
        mask.append(row)
    return mask


def ex3_cases():
    rng, cases = random.Random(0), []
    for _ in range(10):
        B, T = rng.randint(1, 5), rng.randint(2, 12)
        mask = [[int(rng.random() < 0.5) for _ in range(T)] for _ in range(B)]
        for row in mask:
            row[rng.randrange(T)] = 1
        rewards = rounded([rng.uniform(-2, 2) for _ in range(B)])
        kl = rounded([[rng.uniform(-1, 1) for _ in range(T)] for _ in range(B)])
        cases.append({"rewards": rewards, "mask": mask, "kl": kl, "kl_coef": 0.2,
                      "expected": exact(ref_token_rewards(rewards, mask)),
                      "expected_with_kl": exact(ref_token_rewards(rewards, mask, kl, 0.2))})
    return {"random_multi_turn": cases}


def gae_case(rng, B, T, gamma, lam):
    r = rounded([[rng.choice([0.0, rng.uniform(-1, 1)]) for _ in range(T)] for _ in range(B)])
    v = rounded([[rng.uniform(-1, 1) for _ in range(T)] for _ in range(B)])
    mask = multi_turn_mask(rng, B, T)
    adv, ret = ref_gae(r, v, mask, gamma, lam)
    return {"gamma": gamma, "lam": lam, "rewards": r, "values": v, "mask": mask, "advantages": exact(adv),
            "returns": exact(ret)}


def ex4_cases():
    rng = random.Random(0)
    return {"random_multi_turn": [gae_case(rng, 4, 10, g, l) for g, l in [(1.0, 1.0), (0.99, 0.95), (0.9, 0.5)]]}


def ex5_cases():
    rng = random.Random(0)
    ids = [g for g in range(3) for _ in range(4)]
    rng.shuffle(ids)  # 3 groups of 4, interleaved
    rewards = rounded([rng.gauss(0, 1) for _ in ids], 3)
    return {"random_groups": {"rewards": rewards, "ids": ids, "grpo": exact(ref_grpo(rewards, ids)),
                              "dr_grpo": exact(ref_grpo(rewards, ids, normalize_by_std=False))}}


def ex6_cases():
    rng = random.Random(0)
    logp, old = ([[rng.gauss(0, 0.4) for _ in range(5)] for _ in range(3)] for _ in range(2))
    logp, old = rounded(logp), rounded(old)
    adv = rounded([[rng.gauss(0, 1) for _ in range(5)] for _ in range(3)])
    mask = [[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [1, 0, 1, 0, 1]]
    loss, metrics = ref_policy_loss(logp, old, adv, mask, 0.2, 0.28)
    rng = random.Random(5)
    logp5 = rounded([[rng.gauss(0, 0.5) for _ in range(6)] for _ in range(4)])
    adv5 = rounded([[rng.gauss(0, 1) for _ in range(6)] for _ in range(4)])
    mask5 = [[int(rng.random() > 0.3) for _ in range(6)] for _ in range(4)]
    zeros = [[0.0] * 6 for _ in range(4)]
    _, metrics5 = ref_policy_loss(logp5, zeros, adv5, mask5, 0.2, 0.28)
    return {"random_batch": {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "loss": exact(loss),
                             "approx_kl": exact(metrics["approx_kl"])},
            "clipfrac_batch": {"logp": logp5, "advantages": adv5, "mask": mask5,
                               **{k: exact(metrics5[k]) for k in ("clipfrac", "clipfrac_low", "clipfrac_high")}}}


def ex7_cases():
    rng = random.Random(0)
    old = rounded([[rng.gauss(0, 1) for _ in range(6)] for _ in range(3)])
    values = rounded([[o + rng.gauss(0, 1) for o in row] for row in old])  # many moves beyond 0.5
    returns = rounded([[v + 0.3 * rng.gauss(0, 1) for v in row] for row in values])
    mask = [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0]]
    loss, frac = ref_value_loss(values, old, returns, mask, 0.5)
    return {"random_batch": {"values": values, "old_values": old, "returns": returns, "mask": mask,
                             "clip_range": 0.5, "loss": exact(loss), "vf_clipfrac": exact(frac)}}


def ex8_cases():
    rng = random.Random(0)
    ids = [g for g in range(8) for _ in range(4)]
    rng.shuffle(ids)  # 8 seeds x 4 rollouts, interleaved
    rewards = rounded([rng.gauss(0, 1) for _ in ids])
    rng = random.Random(3)
    ids3 = [g for g in range(6) for _ in range(3)]
    rewards3 = rounded([rng.randint(0, 1) + rng.gauss(0, 0.01) for _ in ids3])
    return {"paper_ratio": {"rewards": rewards, "ids": ids, "ratio": 0.25, "keep": ref_filter(rewards, ids, 0.25)},
            "every_ratio": [{"rewards": rewards3, "ids": ids3, "ratio": ratio, "keep": ref_filter(rewards3, ids3, ratio)}
                            for ratio in (0.2, 0.5, 0.75)]}


def ref_normalizers(mask, slices, loss_agg):
    """Each micro-batch's normalizer, by counting: the mini-batch's response tokens (token-mean), or the
    micro-batch's times the number of micro-batches (micro-batch-mean); at least 1."""
    count = lambda rows: max(1, sum(sum(row) for row in rows))  # noqa: E731
    return [float(count(mask) if loss_agg == "token-mean" else count(mask[a:b]) * len(slices)) for a, b in slices]


def ex11_cases():
    rng, cases = random.Random(0), []
    for _ in range(8):
        B = rng.randint(2, 7)
        mask = multi_turn_mask(rng, B, rng.randint(4, 16))
        if rng.random() < 0.3:
            mask[rng.randrange(B)] = [0] * len(mask[0])  # a row without response tokens
        cuts = sorted(rng.sample(range(1, B), rng.randint(1, B - 1)))
        slices = [[a, b] for a, b in zip([0, *cuts], [*cuts, B])]
        cases.append({"mask": mask, "slices": slices, **{agg: ref_normalizers(mask, slices, agg)
                                                         for agg in ("token-mean", "micro-batch-mean")}})
    return {"random_splits": cases}


def ex10_cases():
    """A small seeded model (course/tests/test_ex10_logprobs.py builds it) scored by a plain forward pass of each
    row (the hidden tests' reference)."""
    sys.path[:0] = [os.path.join(COURSE, "tests"), os.path.dirname(os.path.abspath(__file__))]
    import torch
    from test_ex10_logprobs import seeded_model
    from test_ex10_logprobs_hidden import reference
    rng, vocab, seed, temperature = random.Random(0), 24, 3, 0.7
    ids = [[rng.randrange(vocab) for _ in range(12)] for _ in range(3)]
    mask = multi_turn_mask(rng, 3, 11)
    for row, length in zip(mask, (12, 8, 5)):  # right padding: no response token past a row's end
        row[length - 1:] = [0] * (12 - length)
    logp, entropy = reference(seeded_model(seed, vocab), torch.tensor(ids), torch.tensor(mask), temperature)
    return {"random_model": {"seed": seed, "vocab": vocab, "temperature": temperature, "ids": ids, "mask": mask,
                             "logp": rounded(logp.tolist(), 7), "entropy": rounded(entropy.tolist(), 7)}}


def ex12_cases():
    """Six rows updated over two epochs by the hidden tests' plain loops."""
    sys.path[:0] = [os.path.join(COURSE, "tests"), os.path.dirname(os.path.abspath(__file__))]
    from test_ex12_update_hidden import random_case, reference_update
    case = random_case(random.Random(0), 6)
    actor, critic, calls = reference_update(case, 4, 3, 2, 0.5, 3)
    return {"two_epochs": {**case, "actor": exact(actor), "critic": exact(critic), "actor_micro_batches": calls}}


def starpo_cases():
    """tests/test_starpo.py's stored numbers."""
    rng = random.Random(1)
    gae = []
    for gamma, lam in [(1.0, 1.0), (0.99, 0.95), (0.9, 0.5), (1.0, 0.0), (0.5, 1.0)]:
        case = gae_case(rng, 6, 20, gamma, lam)
        case["mask"][0] = [0] * 20  # an empty row, a row of one step, a row ending in the last column
        case["mask"][1] = [0] * 20
        case["mask"][1][7] = 1
        case["mask"][2][-3:] = [1, 1, 1]
        adv, ret = ref_gae(case["rewards"], case["values"], case["mask"], gamma, lam)
        case["advantages"], case["returns"] = exact(adv), exact(ret)
        gae.append(case)
    ids = [7, 3, 7, 3, 9, 7, 5, 5, 5, 3, 7]  # interleaved; group 9 has one member, group 5 equal rewards
    rewards = [1.0, 0.2, 0.0, -1.0, 4.0, 0.5, 0.3, 0.3, 0.3, 2.0, 10.0]
    grpo = {"ids": ids, "rewards": rewards, "grpo": exact(ref_grpo(rewards, ids)),
            "dr_grpo": exact(ref_grpo(rewards, ids, normalize_by_std=False))}
    rng = random.Random(3)
    mask = multi_turn_mask(rng, 6, 12)
    logp, old = rounded([[rng.gauss(0, 0.3) for _ in range(12)] for _ in range(6)]), rounded(
        [[rng.gauss(0, 0.3) for _ in range(12)] for _ in range(6)])
    adv = rounded([[rng.gauss(0, 1) for _ in range(12)] for _ in range(6)])
    values, old_values, returns = (rounded([[rng.gauss(0, 1) for _ in range(12)] for _ in range(6)]) for _ in range(3))
    micro = {"mask": mask, "logp": logp, "old_logp": old, "advantages": adv, "values": values,
             "old_values": old_values, "returns": returns,
             "policy_loss": exact(ref_policy_loss(logp, old, adv, mask, 0.2, 0.28, 3.0)[0]),
             "value_loss": exact(ref_value_loss(values, old_values, returns, mask, 0.5)[0])}
    rng = random.Random(5)
    names = [11, 2, 40, 7, 3, 25, 8, 19, 5, 30]  # group ids in no particular order, 4 rollouts each
    fids = [g for g in names for _ in range(4)]
    frewards = [2.0 if g == 3 else 1.0 if g == 40 else float(rng.randint(0, 2)) for g in fids]  # 40, 3: std 0
    order = list(range(len(fids)))
    rng.shuffle(order)
    fids, frewards = [fids[i] for i in order], [frewards[i] for i in order]
    filt = {"ids": fids, "rewards": frewards, "kept": {
        f"{ratio} {largest}": sorted({g for g, k in zip(fids, ref_filter(frewards, fids, ratio, largest)) if k})
        for ratio in (0.25, 0.3, 0.5, 0.01, 1.0) for largest in (True, False)}}
    rng = random.Random(3)
    tmask = [[int(rng.random() < 0.4) for _ in range(12)] for _ in range(5)]
    for row in tmask:
        row[0] = 1
    trewards, tkl = rounded([rng.gauss(0, 1) for _ in range(5)]), rounded(
        [[rng.gauss(0, 1) for _ in range(12)] for _ in range(5)])
    tokens = {"rewards": trewards, "mask": tmask, "kl": tkl, "kl_coef": 0.2,
              "expected": exact(ref_token_rewards(trewards, tmask, tkl, 0.2))}
    rng = random.Random(5)
    a_logp, a_old, a_ref = (rounded([[rng.gauss(-1, 0.3) for _ in range(7)] for _ in range(2)]) for _ in range(3))
    a_adv = rounded([[rng.gauss(0, 1) for _ in range(7)] for _ in range(2)])
    a_entropy = rounded([[rng.random() for _ in range(7)] for _ in range(2)])
    a_mask = [[int(rng.random() < 0.7) for _ in range(7)] for _ in range(2)]
    actor = {"logp": a_logp, "old_logp": a_old, "ref_logp": a_ref, "advantages": a_adv, "entropy": a_entropy,
             "mask": a_mask}
    for estimator in ("gae", "grpo"):  # clipped term - 0.01 entropy (+ 0.05 k3 for GRPO), summed, over 10
        total = 0.0
        for b in range(2):
            for t in range(7):
                if a_mask[b][t]:
                    total += ref_policy_token(math.exp(a_logp[b][t] - a_old[b][t]), a_adv[b][t], 0.2, 0.28)[0]
                    total -= 0.01 * a_entropy[b][t]
                    if estimator == "grpo":
                        x = a_ref[b][t] - a_logp[b][t]
                        total += 0.05 * (math.exp(x) - x - 1)
        actor[f"loss_{estimator}"] = exact(total / 10)
    return {"gae": gae, "grpo": grpo, "micro_batches": micro, "filter": filt, "token_level_rewards": tokens,
            "actor_loss": actor, "logprob_entropy": logprob_entropy_case()}


def logprob_entropy_case(n=5, V=11, T=0.7):
    """Random logits scored row by row at temperature T in float64, with the gradients of logp . g_logp +
    entropy . g_entropy by the hand-derived formulas: d logp / dz = onehot(target) - p and
    d H / dz = -p (z - sum p z), times 1/T for the logits."""
    rng = random.Random(7)
    raw = rounded([[rng.gauss(0, 3) for _ in range(V)] for _ in range(n)])
    targets = [rng.randrange(V) for _ in range(n)]
    g_logp, g_entropy = rounded([rng.gauss(0, 1) for _ in range(n)]), rounded([rng.gauss(0, 1) for _ in range(n)])
    logp, entropy, grad = [], [], []
    for row, target, gl, ge in zip(raw, targets, g_logp, g_entropy):
        z = [x / T for x in row]
        lse = math.log(sum(math.exp(x) for x in z))
        p = [math.exp(x - lse) for x in z]
        mean_z = sum(pj * zj for pj, zj in zip(p, z))
        logp.append(z[target] - lse)
        entropy.append(-sum(pj * math.log(pj) for pj in p))
        grad.append([(gl * ((j == target) - p[j]) - ge * p[j] * (z[j] - mean_z)) / T for j in range(V)])
    return {"logits": raw, "targets": targets, "temperature": T, "g_logp": g_logp, "g_entropy": g_entropy,
            "logp": exact(logp), "entropy": exact(entropy), "grad": exact(grad)}


def sokoban_puzzles(seeds, **kwargs):
    """The env's own puzzles (the generator is the input here, not what is graded), as text."""
    sys.path.insert(0, ROOT)
    import envs
    return [envs.make_env("sokoban", **kwargs).reset(seed)[0] for seed in seeds]


def solved_puzzles(seeds, **kwargs):
    """{"seeds", "puzzles", "paths"}: each seed's puzzle and a shortest solution ("Up Left ...")."""
    puzzles = sokoban_puzzles(seeds, **kwargs)
    return {"seeds": list(seeds), "puzzles": puzzles, "paths": [" ".join(ref_shortest_path(p)) for p in puzzles]}


def some_of_each(cases, kind, most):
    """The first `most` cases of each kind (in draw order): a few hundred varied replies instead of 20,000."""
    seen, kept = {}, []
    for case in cases:
        k = kind(case)
        seen[k] = seen.get(k, 0) + 1
        if seen[k] <= most:
            kept.append(case)
    return kept


def parser_replies(seed, atoms, count, shaped):
    """(reply, require_think, max_actions) drawn from pieces of tags, actions and spaces; every other one shaped
    like an answer (`shaped` gives its gap and piece counts)."""
    rng = random.Random(seed)
    draw = lambda n: "".join(rng.choice(atoms) for _ in range(rng.randint(0, n)))  # noqa: E731
    out = []
    for i in range(count):
        text = draw(24) if i % 2 else shaped(rng, draw)
        out.append((text, bool(i % 3), rng.randint(1, 5)))
    return out


LONG_REPLY_SHAPES = ["<think>", "</think>", "<think></think>", "<answer>", "</think><answer>", "<think><answer>",
                     "</think> ", "<think>Up || ", "<", "a"]  # tests/test_envs.py's test_parse_answer_takes_linear_time


def long_reply(shape, require_think):
    """The shape repeated to 200 characters, then a closing pair."""
    tail = "<think>t</think><answer>Up</answer>" if require_think else "<answer>Up</answer>"
    return (shape * (2 ** 20 // len(shape)))[:200] + tail


def envs_cases():
    """tests/test_envs.py's stored numbers: shortest solutions of the generator's puzzles, and RAGEN's regular
    expression on varied replies."""
    atoms = ["<think>", "</think>", "<answer>", "</answer>", "<think", "answer>", "||", "Up", "left", "Jump",
             " ", "\n", "\t", "\u00a0", "x", "<", ">"]
    replies = parser_replies(1, atoms, 20000, lambda rng, draw: "{}<think>{}</think>{}<answer>{}</answer>{}".format(
        draw(4), draw(4), rng.choice(["", " ", "\n "]), draw(4), draw(4)))
    parsed = [[text, think, most, *ref_regex_parse(text, MOVES, most, think)] for text, think, most in replies]
    return {"sokoban_6x6": solved_puzzles(range(500)),
            "sokoban_8x8_two_boxes": solved_puzzles(range(10), dim_room=8, num_boxes=2),
            "regex_parser": some_of_each(parsed, lambda c: (c[5], bool(c[4]), bool(c[3]), len(c[4]) == c[2]), 40),
            "long_replies": {shape: {str(think): list(ref_regex_parse(long_reply(shape, think), MOVES, 5, think))
                                     for think in (True, False)} for shape in LONG_REPLY_SHAPES}}


def paper_mode_cases():
    """tests/test_paper_mode.py's stored numbers: the pinned verl's GAE through observation tokens, and RAGEN's
    parser with its deletions on varied replies."""
    rng = random.Random(0)
    mask = [[0, 1, 1, 0, 0, 1, 1, 0, 1, 0], [0, 0, 1, 0, 1, 1, 1, 1, 0, 0], [1, 0, 0, 1, 1, 0, 0, 1, 0, 1]]
    ends = [(1, 8), (2, 7), (0, 9)]  # each row's first and last sampled token
    values = rounded([[rng.gauss(0, 1) for _ in range(10)] for _ in range(3)])
    rewards = [[0.0] * 10 for _ in range(3)]
    rewards[0][8], rewards[1][7], rewards[2][9] = 2.0, -1.0, 1.0  # on each row's last sampled token
    gae = []
    for gamma, lam in [(0.9, 0.8), (1.0, 0.95), (1.0, 1.0)]:
        adv = [ref_verl_gae(rewards[b], values[b], first, last, gamma, lam) for b, (first, last) in enumerate(ends)]
        steps = [[int(first <= t <= last) for t in range(10)] for first, last in ends]
        gae.append({"gamma": gamma, "lam": lam, "advantages": exact(adv), "returns": exact(
            [[a + v if s else 0.0 for a, v, s in zip(*row)] for row in zip(adv, values, steps)])})
    one_row = [0.0, 0.5, 0.2, 0.9, -0.4, 0.3, 0.0]  # the trainer's step 4 on one row: reward 1 on position 5
    atoms = ["<think>", "</think>", "<answer>", "</answer>", "<|im_end|>", "<|im_start|>", "||", "Up", "left",
             "Jump", " ", "\n", "x", "<", ">"]
    replies = parser_replies(2, atoms, 20000, lambda rng, draw: "{}<think>{}</think> <answer>{}</answer>{}".format(
        draw(3), draw(4), draw(5), draw(3)))
    parsed = [[text, think, most, *ref_regex_parse(text, MOVES, most, think, delete_special=True)[1:],
               ref_regex_parse(text, MOVES, most, think)[2]] for text, think, most in replies]
    kept = some_of_each(parsed, lambda c: (c[4], c[4] != c[5], bool(c[3])), 80)
    return {"gae": {"mask": mask, "values": values, "rewards": rewards, "cases": gae},
            "trainer_row": {"values": one_row, "advantages": exact(ref_verl_gae([0, 0, 0, 0, 0, 1.0, 0], one_row,
                                                                                1, 5, 0.9, 0.8))},
            "paper_parser": [c[:5] for c in kept],  # [reply, require_think, max_actions, actions, format_ok]
            "plain_parser_differs": sum(c[4] != c[5] for c in kept)}  # format_ok without the deletions differs


def baselines_cases():
    """tests/test_baselines.py's stored numbers on its evaluation seeds: the optimal solution lengths, and the
    random policy's chance to solve within t actions for the first seeds."""
    seeds = [1_000_000 + i for i in range(256)]
    puzzles = sokoban_puzzles(seeds)
    return {"seeds": seeds, "puzzles": puzzles, "shortest": [len(ref_shortest_path(p)) for p in puzzles],
            "random_success": [exact(ref_random_success(p, 10)) for p in puzzles[:24]]}


MAKERS = {"ex1-sokoban": ex1_cases, "ex3-token-rewards": ex3_cases, "ex4-gae": ex4_cases, "ex5-grpo": ex5_cases,
          "ex6-policy-loss": ex6_cases, "ex7-value-loss": ex7_cases, "ex8-filter": ex8_cases,
          "ex10-logprobs": ex10_cases, "ex11-loss-normalizer": ex11_cases, "ex12-update": ex12_cases,
          "starpo": starpo_cases,
          "envs": envs_cases, "paper_mode": paper_mode_cases, "baselines": baselines_cases}


# ---------------------------------------------------------------------------------------- the solution agrees
def solution_disagreements(name, data):
    """The solution (the functions in the repository) on the fixture's inputs: a list of the cases it gets wrong."""
    sys.path.insert(0, ROOT)
    import torch

    import envs
    import starpo
    t = lambda x, dtype=torch.float64: torch.tensor(x, dtype=dtype)  # noqa: E731
    close = lambda got, want: torch.allclose(got.double(), t(want), rtol=1e-6, atol=1e-6)  # noqa: E731
    wrong = []
    if name == "ex1-sokoban":
        for i, case in enumerate(data["random_rooms"]):
            cells = {(r, c): ch for r, row in enumerate(case["before"].split("/")) for c, ch in enumerate(row)}
            floor = {rc for rc, ch in cells.items() if ch != "#"}
            boxes = frozenset(rc for rc, ch in cells.items() if ch == "X")
            player = next(rc for rc, ch in cells.items() if ch == "P")
            p, b = envs.sokoban_move(floor, boxes, player, case["action"])
            if grid(floor, set(b), tuple(p)) != case["after"]:
                wrong.append(f"random_rooms[{i}]")
    elif name == "ex3-token-rewards":
        for i, c in enumerate(data["random_multi_turn"]):
            if not (close(starpo.token_level_rewards(t(c["rewards"]), t(c["mask"])), c["expected"]) and close(
                    starpo.token_level_rewards(t(c["rewards"]), t(c["mask"]), t(c["kl"]), c["kl_coef"]),
                    c["expected_with_kl"])):
                wrong.append(f"random_multi_turn[{i}]")
    elif name == "ex4-gae":
        for i, c in enumerate(data["random_multi_turn"]):
            adv, ret = starpo.compute_gae(t(c["rewards"]), t(c["values"]), t(c["mask"]), c["gamma"], c["lam"])
            if not (close(adv, c["advantages"]) and close(ret, c["returns"])):
                wrong.append(f"random_multi_turn[{i}]")
    elif name == "ex5-grpo":
        c = data["random_groups"]
        for key, normalize in (("grpo", True), ("dr_grpo", False)):
            if not close(starpo.compute_grpo_advantages(t(c["rewards"]), t(c["ids"], torch.long),
                                                        normalize_by_std=normalize), c[key]):
                wrong.append(f"random_groups {key}")
    elif name == "ex6-policy-loss":
        c = data["random_batch"]
        loss, m = starpo.policy_loss(t(c["logp"]), t(c["old_logp"]), t(c["advantages"]), t(c["mask"]), 0.2, 0.28)
        if not (close(loss, c["loss"]) and close(m["approx_kl"], c["approx_kl"])):
            wrong.append("random_batch")
        c = data["clipfrac_batch"]
        _, m = starpo.policy_loss(t(c["logp"]), torch.zeros(4, 6, dtype=torch.float64), t(c["advantages"]),
                                  t(c["mask"]), 0.2, 0.28)
        if not all(close(m[k], c[k]) for k in ("clipfrac", "clipfrac_low", "clipfrac_high")):
            wrong.append("clipfrac_batch")
    elif name == "ex7-value-loss":
        c = data["random_batch"]
        loss, m = starpo.value_loss(t(c["values"]), t(c["old_values"]), t(c["returns"]), t(c["mask"]),
                                    c["clip_range"])
        if not (close(loss, c["loss"]) and close(m["vf_clipfrac"], c["vf_clipfrac"])):
            wrong.append("random_batch")
    elif name == "ex8-filter":
        for i, c in enumerate([data["paper_ratio"], *data["every_ratio"]]):
            if starpo.select_groups_by_reward_std(t(c["rewards"]), t(c["ids"], torch.long), c["ratio"]).tolist() != c["keep"]:
                wrong.append(f"case {i}")
    elif name == "ex10-logprobs":
        import ragen_mini
        from test_ex10_logprobs import config, seeded_model
        c = data["random_model"]
        with torch.no_grad():
            logp, entropy = ragen_mini.token_logprobs(seeded_model(c["seed"], c["vocab"]), t(c["ids"], torch.long),
                                                      t(c["mask"]), config(chunk=3), True, c["temperature"])
        if not (torch.allclose(logp.double(), t(c["logp"]), atol=1e-5)
                and torch.allclose(entropy.double(), t(c["entropy"]), atol=1e-5)):
            wrong.append("random_model")
    elif name == "ex12-update":
        import pytest
        from test_ex12_update import make_batch, make_cfg, run
        c = data["two_epochs"]
        with pytest.MonkeyPatch.context() as monkeypatch:
            batch = make_batch(c["tokens"], c["mask"], c["advantages"], c["returns"])
            actor, critic, _, events = run(monkeypatch, batch, make_cfg(4, 3, 2, 0.5), seed=3)
        if not (close(actor.w.detach(), c["actor"]) and close(critic.w.detach(), c["critic"]) and [
                rows for name, rows in events if name == "actor forward"] == c["actor_micro_batches"]):
            wrong.append("two_epochs")
    elif name == "ex11-loss-normalizer":
        import ragen_mini
        for i, c in enumerate(data["random_splits"]):
            mini = t(c["mask"])
            for agg in ("token-mean", "micro-batch-mean"):
                if [float(ragen_mini.loss_normalizer(mini, mini[a:b], len(c["slices"]), agg))
                        for a, b in c["slices"]] != c[agg]:
                    wrong.append(f"random_splits[{i}] {agg}")
    elif name == "envs":  # tests/test_envs.py runs the solution on all of it; here the cheap part
        for i, (text, think, most, *expected) in enumerate(data["regex_parser"]):
            if list(envs.parse_answer(text, MOVES, most, think)) != expected:
                wrong.append(f"regex_parser[{i}]")
        c = data["sokoban_8x8_two_boxes"]
        for seed, path in zip(c["seeds"], c["paths"]):
            env = envs.make_env("sokoban", dim_room=8, num_boxes=2)
            env.reset(seed)
            if not [env.step(a) for a in path.split()][-1][4]["success"]:
                wrong.append(f"sokoban_8x8_two_boxes seed {seed}")
    elif name == "paper_mode":
        for i, (text, think, most, actions, ok) in enumerate(data["paper_parser"]):
            parsed = envs.parse_answer(envs.without_special_strings(text, think), MOVES, most, think)
            if (parsed.actions, parsed.format_ok) != (actions, ok):
                wrong.append(f"paper_parser[{i}]")
        c = data["gae"]
        for case in c["cases"]:
            adv, ret = starpo.compute_gae(t(c["rewards"]), t(c["values"]), starpo.gae_steps(t(c["mask"])),
                                          case["gamma"], case["lam"])
            if not (close(adv, case["advantages"]) and close(ret, case["returns"])):
                wrong.append(f"gae gamma={case['gamma']} lam={case['lam']}")
    elif name == "starpo":  # tests/test_starpo.py itself runs the solution on these; here the cheap half
        for i, c in enumerate(data["gae"]):
            adv, ret = starpo.compute_gae(t(c["rewards"]), t(c["values"]), t(c["mask"]), c["gamma"], c["lam"])
            if not (close(adv, c["advantages"]) and close(ret, c["returns"])):
                wrong.append(f"gae[{i}]")
        c = data["grpo"]
        if not close(starpo.compute_grpo_advantages(t(c["rewards"]), t(c["ids"], torch.long)), c["grpo"]):
            wrong.append("grpo")
    return wrong


def same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        # float32 work (a model's log-probs) sums in another order with another thread count: a few units
        # in the 7th digit apart, where a stale fixture is off by far more
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-5,
                                                                                               abs_tol=1e-6)
    return a == b


def check():
    """Problems with the stored fixtures: missing, stale (not what the references make now), or failed by the
    solution. An empty list when all is well."""
    problems = []
    for name, path in FILES.items():
        if not os.path.exists(path):
            problems.append(f"{path} is missing: run python course/hidden/make_fixtures.py")
            continue
        with open(path) as f:
            stored = json.load(f)
        if not same(stored, MAKERS[name]()):
            problems.append(f"{path} is not what its reference makes now: run python course/hidden/make_fixtures.py")
        problems += [f"{path}: the solution disagrees on {case}" for case in solution_disagreements(name, stored)]
    return problems


def write():
    for name, path in FILES.items():
        data = MAKERS[name]()
        wrong = solution_disagreements(name, data)
        if wrong:
            raise SystemExit(f"make_fixtures: the solution disagrees with the reference of {name} on {wrong}; "
                             "fix the solution or the reference before storing numbers")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        found = check()
        print("\n".join(found) or "the fixtures match their references and the solution")
        raise SystemExit(1 if found else 0)
    if sys.argv[1:]:
        raise SystemExit(__doc__)
    write()

"""Exercise 10 (hidden tests): ragen_mini.token_logprobs against a plain forward pass of each row, on the tiny
model's shape and on other temperatures, chunk sizes and masks."""
import math
import os
import random
import sys
from types import SimpleNamespace

import torch
from transformers import Qwen2ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import adapters  # noqa: E402
import tiny  # noqa: E402
from test_ex10_logprobs import AT_TWO, bigram_model, seeded_model  # noqa: E402

token_logprobs = adapters.function("ex10-logprobs")

WEIGHTS = {"test_agrees_with_a_plain_forward_on_the_tiny_models_shape": 3,
           "test_agrees_with_a_plain_forward_at_other_temperatures_and_chunks": 2}


def config(temperature, chunk):
    return SimpleNamespace(rollout=SimpleNamespace(temperature=temperature, engine="hf"),
                           algo=SimpleNamespace(logits_chunk=chunk))


def reference(model, ids, mask, temperature):
    """Each row's logits from a forward pass of the row alone, unpadded; column t scores token t+1 with the
    logits at t: log p = z[next] - log sum exp z, entropy = -sum p log p, z = logits / T, in float64."""
    B, width = mask.shape
    logp, entropy = torch.zeros(B, width, dtype=torch.float64), torch.zeros(B, width, dtype=torch.float64)
    for b in range(B):
        length = int(max((t + 2 for t in range(width) if mask[b, t]), default=0))
        if length == 0:
            continue
        with torch.no_grad():
            logits = model(ids[b:b + 1, :length]).logits[0].double()
        for t in range(width):
            if mask[b, t]:
                z = [x / temperature for x in logits[t].tolist()]
                top = max(z)
                lse = top + math.log(sum(math.exp(x - top) for x in z))
                logp[b, t] = z[int(ids[b, t + 1])] - lse
                entropy[b, t] = -sum(math.exp(x - lse) * (x - lse) for x in z)
    return logp, entropy


def random_rows(rng, vocab, B, T):
    ids = torch.tensor([[rng.randrange(vocab) for _ in range(T)] for _ in range(B)])
    mask = torch.zeros(B, T - 1)
    for b in range(B):
        length = rng.randint(2, T)  # right padding after it
        for t in range(rng.randint(0, 3), length - 1):
            mask[b, t] = float(rng.random() < 0.6)
    return ids, mask


def check(model, ids, mask, temperature, chunk, atol=1e-4):
    with torch.no_grad():
        logp, entropy = token_logprobs(model, ids, mask, config(temperature, chunk), with_entropy=True)
    want_logp, want_entropy = reference(model, ids, mask, temperature)
    assert torch.allclose(logp.double(), want_logp, atol=atol), (logp, want_logp)
    assert torch.allclose(entropy.double(), want_entropy, atol=atol), (entropy, want_entropy)


def test_agrees_with_a_plain_forward_on_the_tiny_models_shape():
    torch.manual_seed(3)
    model = Qwen2ForCausalLM(tiny.model_config("tiny", 300)).eval()
    ids, mask = random_rows(random.Random(0), 300, 3, 40)
    check(model, ids, mask, 0.7, 64)


def test_agrees_with_a_plain_forward_at_other_temperatures_and_chunks():
    rng = random.Random(1)
    model = seeded_model(7, 24)
    for temperature, chunk in ((1.0, 1), (0.3, 5), (1.5, 1000)):
        ids, mask = random_rows(rng, 24, rng.randint(1, 4), rng.randint(3, 14))
        check(model, ids, mask, temperature, chunk)


def test_with_entropy_false_gives_zero_entropies_and_the_same_log_probs():
    model = seeded_model(2)
    ids, mask = random_rows(random.Random(4), 24, 2, 9)
    with torch.no_grad():
        logp, entropy = token_logprobs(model, ids, mask, config(0.8, 4), with_entropy=False)
    assert not entropy.any()
    assert torch.allclose(logp.double(), reference(model, ids, mask, 0.8)[0], atol=1e-4)


def test_an_empty_mask_gives_zeros():
    ids = torch.tensor([[1, 2, 3], [0, 1, 2]])
    with torch.no_grad():
        logp, entropy = token_logprobs(bigram_model(AT_TWO), ids, torch.zeros(2, 2), config(2.0, 2), with_entropy=True)
    assert logp.shape == (2, 2) and not logp.any() and not entropy.any()


def test_the_first_and_last_columns():
    """Column 0 scores token 1 with the logits at token 0; the last column scores the last token."""
    ids = torch.tensor([[0, 2, 1]])
    with torch.no_grad():  # after 0 comes 2: 1/8; after 2 comes 1: 1/2
        logp, _ = token_logprobs(bigram_model(AT_TWO), ids, torch.ones(1, 2), config(2.0, 1))
    assert torch.allclose(logp, torch.log(torch.tensor([[1 / 8, 1 / 2]])), atol=1e-5)

"""Exercise 10 (visible tests): ragen_mini.token_logprobs, the per-token log-probs and entropies at the sampler's
temperature (your parts: the shift in token_logprobs, and starpo.logprob_and_entropy).

token_logprobs(actor, input_ids (b, T), loss_mask (b, T-1), cfg, with_entropy, temperature) -> two (b, T-1)
"""
import math
import os
import sys
from types import SimpleNamespace

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the course folder
import adapters  # noqa: E402

token_logprobs = adapters.function("ex10-logprobs")

WEIGHTS = {"test_a_bigram_model_by_hand": 3, "test_agrees_with_stored_numbers_on_a_small_random_model": 3,
           "test_the_sampler_temperature_is_the_default": 2}
LN2 = math.log(2)


def config(temperature=1.0, chunk=2):
    return SimpleNamespace(rollout=SimpleNamespace(temperature=temperature, engine="hf"),
                           algo=SimpleNamespace(logits_chunk=chunk))


def bigram_model(logits):
    """A transformer with no layers whose logits at position t depend on token t alone: logits[k] after token
    k. Its embeddings are one-hot rows, the final norm scales them back to one-hot, and the LM head reads the
    table out."""
    V = len(logits)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=V, hidden_size=V, intermediate_size=4, num_hidden_layers=0,
                                         num_attention_heads=1, num_key_value_heads=1, rms_norm_eps=1e-12,
                                         tie_word_embeddings=False))
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(V))
        model.model.norm.weight.fill_(V ** -0.5)  # RMS of a one-hot row is V^-0.5
        model.lm_head.weight.copy_(torch.tensor(logits).T)
    return model.eval()


def seeded_model(seed=0, vocab=24):
    """A small random Qwen2 (2 layers, 16 wide) whose weights are drawn from torch's generator in a fixed order,
    so that the stored numbers do not depend on how a library version initialises a model."""
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                                         tie_word_embeddings=False))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    return model.eval()


# After token k the next token's probabilities are P[k]; at temperature 2 the logits 2 log p give exactly p.
P = [[1 / 2, 1 / 4, 1 / 8, 1 / 8], [1 / 8, 1 / 8, 1 / 4, 1 / 2], [1 / 8, 1 / 2, 1 / 4, 1 / 8], [1 / 4] * 4]
AT_TWO = [[2 * math.log(p) for p in row] for row in P]
IDS = torch.tensor([[2, 0, 1, 3, 3], [1, 0, 2, 1, 3]])  # the second row ends in a pad (3)
MASK = torch.tensor([[0., 1., 1., 1.], [1., 1., 0., 0.]])  # column t: token t+1 was sampled


def test_a_bigram_model_by_hand():
    """Column t scores token t+1 with the logits at position t. Row 0: column 1: after 0 comes 1, p = 1/4;
    column 2: after 1 comes 3, p = 1/2; column 3: after 3 comes 3, p = 1/4. Row 1: column 0: after 1 comes 0,
    p = 1/8; column 1: after 0 comes 2, p = 1/8. The entropies are those of the rows of P: 1.75 bits after
    0, 1 and 2, 2 bits after 3."""
    with torch.no_grad():
        logp, entropy = token_logprobs(bigram_model(AT_TWO), IDS, MASK, config(), with_entropy=True, temperature=2.0)
    assert logp.shape == entropy.shape == (2, 4)
    expected = torch.log(torch.tensor([[1., 1 / 4, 1 / 2, 1 / 4], [1 / 8, 1 / 8, 1., 1.]]))  # log 1 = 0 off the mask
    assert torch.allclose(logp, expected, atol=1e-5), logp
    expected_entropy = torch.tensor([[0, 1.75, 1.75, 2], [1.75, 1.75, 0, 0]]) * LN2
    assert torch.allclose(entropy, expected_entropy, atol=1e-5), entropy


def test_the_temperature_divides_the_logits_before_the_softmax():
    """At temperature 1 the same logits 2 log p give p^2 / sum(p^2): after 0, (1/4, 1/16, 1/64, 1/64) / (22/64),
    so token 1 has 4 / 22. At temperature 4 they give sqrt(p) / sum(sqrt(p)): after 3 (uniform) still 1/4."""
    with torch.no_grad():
        logp, _ = token_logprobs(bigram_model(AT_TWO), IDS, MASK, config(), temperature=1.0)
        assert abs(logp[0, 1].item() - math.log(4 / 22)) < 1e-5
        logp, _ = token_logprobs(bigram_model(AT_TWO), IDS, MASK, config(), temperature=4.0)
        assert abs(logp[0, 3].item() - math.log(1 / 4)) < 1e-5
        # after 1, token 3: sqrt(1/2) / (2 sqrt(1/8) + sqrt(1/4) + sqrt(1/2))
        root = [math.sqrt(p) for p in P[1]]
        assert abs(logp[0, 2].item() - math.log(root[3] / sum(root))) < 1e-5


def test_the_sampler_temperature_is_the_default():
    """Without a temperature argument, rollout.temperature of the config (the sampler's) is used."""
    with torch.no_grad():
        logp, _ = token_logprobs(bigram_model(AT_TWO), IDS, MASK, config(temperature=2.0))
    assert abs(logp[0, 2].item() - math.log(1 / 2)) < 1e-5 and abs(logp[1, 0].item() - math.log(1 / 8)) < 1e-5


def test_agrees_with_stored_numbers_on_a_small_random_model():
    """A small random model, right-padded multi-turn rows, temperature 0.7, logits in chunks of 3 (chunks end
    mid-row); the expected numbers were made once from a plain forward pass of each row
    (course/hidden/make_fixtures.py) and stored in fixtures/ex10-logprobs.json."""
    case = adapters.fixture("ex10-logprobs")["random_model"]
    ids, mask = torch.tensor(case["ids"]), torch.tensor(case["mask"], dtype=torch.float32)
    with torch.no_grad():
        logp, entropy = token_logprobs(seeded_model(case["seed"], case["vocab"]), ids, mask,
                                       config(chunk=3), with_entropy=True, temperature=case["temperature"])
    assert torch.allclose(logp, torch.tensor(case["logp"]), atol=1e-4), (logp, case["logp"])
    assert torch.allclose(entropy, torch.tensor(case["entropy"]), atol=1e-4)


def test_zero_off_the_mask_and_gradients_reach_the_model():
    model = seeded_model(1)
    ids = torch.tensor([[3, 5, 7, 9, 11, 2]])
    mask = torch.tensor([[0., 0., 1., 1., 0.]])
    logp, entropy = token_logprobs(model, ids, mask, config(temperature=0.5), with_entropy=True)
    assert logp[0, [0, 1, 4]].tolist() == [0, 0, 0] and entropy[0, [0, 1, 4]].tolist() == [0, 0, 0]
    assert (logp[0, 2:4] < 0).all() and (entropy[0, 2:4] > 0).all()
    logp.sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0

"""The GPU fast path of the rollout (rollout.cache=static): a decoder with a KV cache of fixed shape,
one decoding step captured as a CUDA graph, and an attention for that step that does not copy the
cache. docs/performance.md measures it against transformers' `generate`, with the measurements that led
to each piece.

On the CPU the same code runs uncompiled (the tests compare it with `generate` token for token).
"""
import functools

import torch
from transformers import AttentionInterface, StaticCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask


def decode_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Attention for one new token per row over a long KV cache, without copying the cache.

    Qwen2.5-0.5B has 14 query heads sharing 2 key/value heads (grouped-query attention). Given a
    padding mask, transformers' SDPA path first copies K and V 7 times to 14 heads: at batch 128 over a
    3600-token static cache that is 1.6 GB per layer per token (docs/performance.md measures its share
    of the rollout's time). Here each group of 7 query heads reads its shared K and V once instead.
    Prompts (more than one query) go to the usual fused kernel. -> (B, 1, H, d)
    """
    if query.shape[2] > 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    B, H, _, d = query.shape
    G = key.shape[1]
    scores = query.view(B, G, H // G, d) @ key.transpose(-1, -2) * scaling  # (B, G, H/G, L)
    if attention_mask is not None:  # (B, 1, 1, L): True = may attend
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    output = scores.float().softmax(-1).to(value.dtype) @ value  # (B, G, H/G, d): head g*H/G + j uses K/V g
    return output.reshape(B, 1, H, d), None


AttentionInterface.register("decode_gqa", decode_attention)
AttentionMaskInterface.register("decode_gqa", sdpa_mask)  # same boolean padding mask as SDPA


def decoding_step(model, cache, token, position, cache_position, attention_mask, temperature, stop_ids, allow_eos):
    """One token for every row: forward one position through the KV cache, then sample; all on the GPU."""
    logits = model(input_ids=token, position_ids=position, attention_mask=attention_mask, past_key_values=cache,
                   cache_position=cache_position, use_cache=True).logits[:, -1].float()  # (B, V)
    return sample(logits, temperature, stop_ids, allow_eos)


def sample(logits, temperature, stop_ids, allow_eos):
    """Exactly softmax(logits / T) by the exponential race: argmax of p / E with E ~ Exp(1), which needs
    no host synchronisation (torch.multinomial would). T = 0 is greedy. The stop tokens (a (S,) tensor
    of ids) are barred while allow_eos is False (min_new_tokens). (B, V) -> (B,)"""
    logits[:, stop_ids] = torch.where(allow_eos, logits[:, stop_ids], float("-inf"))
    if temperature == 0:
        return logits.argmax(-1)
    return (logits / temperature - torch.empty_like(logits).exponential_().log()).argmax(-1)


class StaticDecoder:
    """What `generate` does, for rollout.cache=static: a KV cache of fixed shape (batch_size rows x
    max_context slots), allocated once and reset each turn, and one decoding step that torch.compile
    captures as a CUDA graph (one launch per token instead of hundreds). Its shapes never change (the
    prompt's width only matters to the eager prefill), so it compiles once; there is no host
    synchronisation inside the loop but one finished-check every 32 tokens.

    The model is switched to the decode_gqa attention while generate() runs and given back as it came.
    Its weights may change between calls (the trainer copies new ones in place): the cache and the
    captured step hold the same parameter tensors.
    """

    def __init__(self, model, batch_size, cfg):
        self.model, self.batch_size, self.cfg = model, batch_size, cfg
        self.cache = StaticCache(config=model.config, max_cache_len=cfg.rollout.max_context)
        step = functools.partial(decoding_step, model, self.cache)
        self.step = torch.compile(step, mode="reduce-overhead", fullgraph=True) if model.device.type == "cuda" else step

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, temperature, stop_ids, pad_id):
        """(B, W) left-padded prompts -> (B, max_new_tokens) sampled tokens, pad_id after a stop token."""
        given = self.model.config._attn_implementation
        self.model.set_attn_implementation("decode_gqa")
        try:
            return self._generate(input_ids, attention_mask, temperature, stop_ids, pad_id)
        finally:
            self.model.set_attn_implementation(given)

    def _generate(self, input_ids, attention_mask, temperature, stop_ids, pad_id):
        model, cfg, (B, W) = self.model, self.cfg, input_ids.shape
        self.cache.reset()
        mask = torch.zeros((B, cfg.rollout.max_context), dtype=torch.long, device=input_ids.device)  # (B, L) all turn
        mask[:, :W] = attention_mask
        position = attention_mask.sum(-1, keepdim=True) - 1  # (B, 1) position of each row's last prompt token
        logits = model(input_ids=input_ids, attention_mask=mask, position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0),
                       past_key_values=self.cache, cache_position=torch.arange(W, device=input_ids.device),
                       logits_to_keep=1).logits[:, -1].float()  # prefill, eager: (B, V)
        allow_eos = torch.tensor(cfg.rollout.min_new_tokens == 0, device=input_ids.device)
        stop_ids = torch.tensor(stop_ids, device=input_ids.device)  # (S,)
        token = sample(logits, temperature, stop_ids, allow_eos)
        out = torch.full((B, cfg.rollout.max_new_tokens), pad_id, dtype=torch.long, device=input_ids.device)
        cache_positions = torch.arange(W, W + cfg.rollout.max_new_tokens, device=input_ids.device)  # no per-step copy
        finished = torch.zeros(B, dtype=torch.bool, device=input_ids.device)
        for t in range(cfg.rollout.max_new_tokens):
            token = torch.where(finished, pad_id, token)  # rows that already stopped emit padding
            out[:, t] = token
            finished |= torch.isin(token, stop_ids)
            if t == cfg.rollout.max_new_tokens - 1 or (t % 32 == 31 and bool(finished.all())):
                break
            mask[:, W + t] = 1
            position += 1
            allow_eos.fill_(t + 1 >= cfg.rollout.min_new_tokens)
            token = self.step(token[:, None].clone(), position.clone(), cache_positions[t:t + 1], mask, temperature,
                              stop_ids, allow_eos)
        return out

"""The GPU fast path of the rollout (rollout.cache=static, the default on CUDA): a decoder with a KV
cache of fixed shape kept across the turns of a conversation, one decoding step captured as a CUDA
graph, and an attention that reads only the part of the cache in use. docs/performance.md measures it
against transformers' `generate`, with the measurements that led to each piece.

On the CPU the same code runs uncompiled (the tests compare it with `generate` token for token).
"""
import functools

import torch
from transformers import AttentionInterface, StaticCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from rollout import left_pad

WINDOW_STEP = 256  # decoding windows are rounded up to this many slots: few distinct shapes to capture
CHECK_EVERY = 8    # decoding steps between two checks whether every row has stopped (each check waits for the GPU)


def window_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, window=None, **kwargs):
    """Attention over the first `window` slots of the KV cache only: the slots past it hold nothing yet
    (or a finished turn's leftovers, masked anyway), and reading all max_context slots for every new
    token was most of a decoding step's time. -> (B, q, H, d)

    A prompt (q > 1) goes to transformers' SDPA path. One new token per row (q = 1, a decoding step)
    skips that path's copy of K and V: Qwen2.5-0.5B has 14 query heads sharing 2 key/value heads, and
    with a padding mask SDPA first copies K and V 7 times; here each group of 7 query heads reads its
    shared K and V once.
    """
    key, value = key[:, :, :window], value[:, :, :window]
    attention_mask = None if attention_mask is None else attention_mask[..., :window]  # (B, 1, q, window)
    if query.shape[2] > 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    B, H, _, d = query.shape
    G = key.shape[1]
    scores = query.view(B, G, H // G, d) @ key.transpose(-1, -2) * scaling  # (B, G, H/G, window)
    if attention_mask is not None:  # True = may attend
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    output = scores.float().softmax(-1).to(value.dtype) @ value  # (B, G, H/G, d): head g*H/G + j uses K/V g
    return output.reshape(B, 1, H, d), None


AttentionInterface.register("window", window_attention)
AttentionMaskInterface.register("window", sdpa_mask)  # the same boolean padding mask as SDPA


def decoding_step(model, cache, token, position, cache_position, attention_mask, window, temperature, stop_ids, allow_eos):
    """One token for every row: forward one position through the KV cache, then sample; all on the GPU."""
    logits = model(input_ids=token, position_ids=position, attention_mask=attention_mask, past_key_values=cache,
                   cache_position=cache_position, use_cache=True, window=window).logits[:, -1].float()  # (B, V)
    return sample(logits, temperature, stop_ids, allow_eos)


def sample(logits, temperature, stop_ids, allow_eos):
    """Exactly softmax(logits / T) by the exponential race: argmax of p / E with E ~ Exp(1), which needs
    no host synchronisation (torch.multinomial would). T = 0 is greedy. The captured step takes T as a
    0-d tensor: a float would be compiled into it, one more compilation per temperature. The stop tokens
    (a (S,) tensor of ids) are barred while allow_eos is False (min_new_tokens). (B, V) -> (B,)"""
    logits[:, stop_ids] = torch.where(allow_eos, logits[:, stop_ids], float("-inf"))
    if not torch.is_tensor(temperature) and temperature == 0:
        return logits.argmax(-1)
    return (logits / temperature - torch.empty_like(logits).exponential_().log()).argmax(-1)


def continues(held, context):
    """Whether a cache row holding the tokens `held` can go on with `context`: they are its beginning."""
    return held is not None and len(held) < len(context) and context[:len(held)] == held


class StaticDecoder:
    """What `generate` does, for rollout.cache=static: a KV cache of fixed shape (batch_size rows x
    max_context slots), allocated once, and one decoding step that torch.compile captures as a CUDA
    graph (one launch per token instead of hundreds), with no host synchronisation inside the loop but
    one finished-check every CHECK_EVERY tokens. A turn lasts as long as its longest reply: rows with no
    conversation this turn (episodes that ended, spare rows) count as stopped from the start.

    Turn k+1 of a conversation starts with turn k's context and reply: the cache keeps them, so a new
    turn feeds only the tokens that are new (the end of the reply, the env's message), not the whole
    conversation again. A cache row therefore holds, slot after slot:

        [left padding][prompt][reply 1][stopped-row padding][env reply 1, left-padded][reply 2]...

    with the attention mask at 0 on every padding slot and position ids that count real tokens only, so
    each row computes exactly what the unpadded conversation would. `self.held[r]` lists the real tokens
    of row r. A call that is not the continuation of the previous one (a new batch of episodes, new
    weights: the caller says so with reuse=False), a context that does not continue any row, or a
    conversation that would outgrow the slots, starts the cache afresh from slot 0.

    The model is switched to the "window" attention while generate() runs and given back as it came.
    Its weights may change between calls (the trainer copies new ones in place): the cache and the
    captured step hold the same parameter tensors.
    """

    def __init__(self, model, batch_size, cfg):
        self.model, self.batch_size, self.cfg = model, batch_size, cfg
        self.slots = cfg.rollout.max_context
        self.cache = StaticCache(config=model.config, max_cache_len=self.slots)
        self.mask = torch.zeros((batch_size, self.slots), dtype=torch.long, device=model.device)  # (B, L) 1 = real token
        torch._dynamo.mark_static_address(self.mask)  # changed in place: the captured step reads it where it is
        self.held = [None] * batch_size  # per row: the real tokens in its slots; None = not reusable
        self.next_slot = 0               # the first empty slot, the same in every row
        step = functools.partial(decoding_step, model, self.cache)
        self.step = torch.compile(step, mode="reduce-overhead", fullgraph=True) if model.device.type == "cuda" else step

    @torch.no_grad()
    def generate(self, contexts, temperature, stop_ids, pad_id, reuse=False):
        """Token-id lists -> (len(contexts), steps) sampled tokens, pad_id after a stop token; steps is at
        most max_new_tokens, fewer when every row stopped sooner.
        reuse=True: these contexts may continue those of the previous call (same weights since)."""
        given = self.model.config._attn_implementation
        self.model.set_attn_implementation("window")
        try:
            rows, new = self.place(contexts, pad_id, reuse)
            out, fed = self.decode(*self.feed(new, pad_id), temperature, stop_ids, pad_id, rows)
            self.remember(rows, new, out, fed, set(stop_ids))
            return out[torch.tensor(rows, device=out.device)]
        finally:
            self.model.set_attn_implementation(given)

    def place(self, contexts, pad_id, reuse):
        """The cache row of each context, and per row the tokens to feed this turn -> (rows, new)."""
        rows, row = [], 0
        for context in contexts if reuse else []:  # in order: a later turn's contexts are a subsequence
            while row < self.batch_size and not continues(self.held[row], context):
                row += 1
            rows.append(row)
            row += 1
        if reuse and rows[-1] < self.batch_size:
            new = [[] for _ in range(self.batch_size)]  # rows without a context feed nothing, decode junk
            for context, row in zip(contexts, rows):
                new[row] = context[len(self.held[row]):]
            if self.next_slot + max(map(len, new)) + self.cfg.rollout.max_new_tokens <= self.slots:
                return rows, new
        # Afresh from slot 0. The spare rows copy the first context: a row of padding alone would have
        # nothing to attend to (a softmax over no slot is NaN).
        self.cache.reset()
        self.mask.zero_()
        self.next_slot, self.held = 0, [[] for _ in range(self.batch_size)]
        return list(range(len(contexts))), contexts + [contexts[0]] * (self.batch_size - len(contexts))

    def feed(self, new, pad_id):
        """Prefill: the new tokens of every row, left-padded into one block of slots after the used ones,
        in one forward pass (eager: its width changes every turn). -> the logits after each row's last
        token (B, V), that token's position (B, 1), and the slot where the reply starts."""
        model, start, device = self.model, self.next_slot, self.model.device
        ids, block_mask = (x.to(device) for x in left_pad(new, pad_id))  # (B, W)
        width = ids.shape[1]
        self.mask[:, start:start + width] = block_mask
        before = torch.tensor([len(h or []) for h in self.held], device=device)[:, None]  # (B, 1) real tokens so far
        positions = (before + block_mask.cumsum(-1) - 1).clamp(min=0)  # (B, W): real tokens only are counted
        logits = model(input_ids=ids, attention_mask=self.mask, position_ids=positions, past_key_values=self.cache,
                       cache_position=torch.arange(start, start + width, device=device), logits_to_keep=1,
                       window=start + width).logits[:, -1].float()  # (B, V)
        return logits, positions[:, -1:].clone(), start + width

    def decode(self, logits, position, start, temperature, stop_ids, pad_id, rows):
        """Sample up to max_new_tokens per row from slot `start` on -> (out (B, steps), fed): out holds
        pad_id after a row's stop token, and in every row not in `rows` (no conversation this turn); the
        first `fed` = steps - 1 tokens of every row went into the cache (the last one needs no step)."""
        cfg, B, device = self.cfg.rollout, self.batch_size, self.model.device
        window = min(self.slots, -(-(start + cfg.max_new_tokens) // WINDOW_STEP) * WINDOW_STEP)  # the turn's slots
        allow_eos = torch.tensor(cfg.min_new_tokens == 0, device=device)
        stop_ids = torch.tensor(stop_ids, device=device)  # (S,)
        if temperature > 0:
            temperature = torch.tensor(temperature, device=device)
        token = sample(logits, temperature, stop_ids, allow_eos)
        out = torch.full((B, cfg.max_new_tokens), pad_id, dtype=torch.long, device=device)
        cache_positions = torch.arange(start, start + cfg.max_new_tokens, device=device)  # no per-step copy
        finished = torch.ones(B, dtype=torch.bool, device=device)  # (B,) True = emits padding from now on
        finished[rows] = False
        for t in range(cfg.max_new_tokens):
            token = torch.where(finished, pad_id, token)
            out[:, t] = token
            finished |= torch.isin(token, stop_ids)
            if t == cfg.max_new_tokens - 1 or (t % CHECK_EVERY == CHECK_EVERY - 1 and bool(finished.all())):
                return out[:, :t + 1], t
            self.mask[:, start + t] = 1
            position += 1
            allow_eos.fill_(t + 1 >= cfg.min_new_tokens)
            token = self.step(token[:, None].clone(), position.clone(), cache_positions[t:t + 1], self.mask, window,
                              temperature, stop_ids, allow_eos)

    def remember(self, rows, new, out, fed, stop_ids):
        """Book what the cache now holds: each row's new tokens and the part of its reply that was fed
        (up to its stop token); the padding a stopped row fed after it is masked out."""
        start = self.next_slot + max(map(len, new))
        replies = out[:, :fed].tolist()
        kept = []
        for row, reply in enumerate(replies):
            length = next((i + 1 for i, token in enumerate(reply) if token in stop_ids), fed)
            kept.append(length)
            self.held[row] = None if self.held[row] is None else self.held[row] + new[row] + reply[:length]
        live = set(rows)
        self.held = [h if row in live else None for row, h in enumerate(self.held)]  # spare rows decoded junk
        slots = torch.arange(fed, device=out.device)
        self.mask[:, start:start + fed] = (slots[None, :] < torch.tensor(kept, device=out.device)[:, None]).long()
        self.next_slot = start + fed

"""The GPU fast path of the rollout (rollout.cache=static, the default on CUDA): a decoder with a KV
cache of fixed shape kept across the turns of a conversation, blocks of 8 decoding steps captured as
CUDA graphs, and an attention that reads only the part of the cache in use. docs/performance.md measures it
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
CHECK_EVERY = 8    # tokens between two checks whether every row has stopped (each check waits for the GPU)


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
    max_context slots), allocated once, and decoding in blocks of CHECK_EVERY steps, each block captured
    on a GPU as one CUDA graph: one launch per 8 tokens, where eager decoding launches hundreds of kernels
    per token, and the host waits for the GPU once per block, to see whether every row has stopped. A
    turn lasts as long as its longest reply: rows with no conversation this turn (episodes that ended,
    spare rows) count as stopped from the start.

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
    captured blocks hold the same parameter tensors.
    """

    def __init__(self, model, batch_size, cfg, stop_ids, pad_id):
        self.model, self.batch_size, self.cfg = model, batch_size, cfg
        self.pad_id, self.stop_set = pad_id, set(stop_ids)
        self.slots = cfg.rollout.max_context
        device = model.device
        self.cache = StaticCache(config=model.config, max_cache_len=self.slots)
        self.mask = torch.zeros((batch_size, self.slots), dtype=torch.long, device=device)  # (B, L) 1 = real token
        self.held = [None] * batch_size  # per row: the real tokens in its slots; None = not reusable
        self.next_slot = 0               # the first empty slot, the same in every row
        # What a decoding block reads and writes in place (a CUDA graph replays on fixed addresses):
        self.stop_ids = torch.tensor(stop_ids, device=device)                     # (S,)
        self.token = torch.zeros(batch_size, dtype=torch.long, device=device)     # (B,) sampled, not yet fed
        self.position = torch.zeros((batch_size, 1), dtype=torch.long, device=device)  # (B, 1) its position id
        self.slot = torch.zeros(1, dtype=torch.long, device=device)               # (1,) its cache slot
        self.finished = torch.ones(batch_size, dtype=torch.bool, device=device)   # (B,) True = emits padding now
        self.sampled = torch.zeros((), dtype=torch.long, device=device)           # tokens sampled this turn
        self.temperature = torch.ones((), device=device)  # a tensor: a float would be compiled into the step
        self.block_out = torch.zeros((batch_size, CHECK_EVERY), dtype=torch.long, device=device)  # (B, 8)
        step = functools.partial(decoding_step, model, self.cache)
        self.step = torch.compile(step, fullgraph=True) if device.type == "cuda" else step
        self.graphs = {}  # (window, greedy, size) -> the CUDA graph of a block of that many steps
        # One scratch memory for all graphs: blocks never run at once, and none leaves a tensor of its own behind.
        self.pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None

    @torch.no_grad()
    def generate(self, contexts, temperature, reuse=False):
        """Token-id lists -> (len(contexts), steps) sampled tokens, pad_id after a stop token; steps is at
        most max_new_tokens, fewer when every row stopped sooner.
        reuse=True: these contexts may continue those of the previous call (same weights since)."""
        given = self.model.config._attn_implementation
        self.model.set_attn_implementation("window")
        try:
            rows, new = self.place(contexts, reuse)
            out, fed = self.decode(*self.feed(new), temperature, rows)
            self.remember(rows, new, out, fed)
            return out[torch.tensor(rows, device=out.device)]
        finally:
            self.model.set_attn_implementation(given)

    def place(self, contexts, reuse):
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

    def feed(self, new):
        """Prefill: the new tokens of every row, left-padded into one block of slots after the used ones,
        in one forward pass (eager: its width changes every turn). -> the logits after each row's last
        token (B, V), that token's position (B, 1), and the slot where the reply starts."""
        model, start, device = self.model, self.next_slot, self.model.device
        ids, block_mask = (x.to(device) for x in left_pad(new, self.pad_id))  # (B, W)
        width = ids.shape[1]
        self.mask[:, start:start + width] = block_mask
        before = torch.tensor([len(h or []) for h in self.held], device=device)[:, None]  # (B, 1) real tokens so far
        positions = (before + block_mask.cumsum(-1) - 1).clamp(min=0)  # (B, W): real tokens only are counted
        logits = model(input_ids=ids, attention_mask=self.mask, position_ids=positions, past_key_values=self.cache,
                       cache_position=torch.arange(start, start + width, device=device), logits_to_keep=1,
                       window=start + width).logits[:, -1].float()  # (B, V)
        return logits, positions[:, -1:], start + width

    def decode(self, logits, position, start, temperature, rows):
        """Sample up to max_new_tokens per row from slot `start` on -> (out (B, steps), fed): out holds
        pad_id after a row's stop token, and in every row not in `rows` (no conversation this turn); the
        first `fed` = steps - 1 tokens of every row went into the cache (the last one needs no step)."""
        cfg = self.cfg.rollout
        window = min(self.slots, -(-(start + cfg.max_new_tokens) // WINDOW_STEP) * WINDOW_STEP)  # the turn's slots
        greedy = temperature == 0
        if not greedy:
            self.temperature.fill_(temperature)
        self.finished.fill_(True)
        self.finished[rows] = False
        self.position.copy_(position)
        self.slot.fill_(start)
        self.sampled.fill_(0)
        # The first token comes from the prefill's logits; then blocks, so that the host checks whether
        # every row has stopped after every CHECK_EVERY tokens.
        token = sample(logits, 0 if greedy else self.temperature, self.stop_ids, self.sampled >= cfg.min_new_tokens)
        out, steps = [self.emit(token)[:, None]], 1
        while steps < cfg.max_new_tokens:
            size = min(CHECK_EVERY - steps % CHECK_EVERY, cfg.max_new_tokens - steps)
            self.run_block(window, greedy, size)
            out.append(self.block_out[:, :size].clone())
            steps += size
            if bool(self.finished.all()):  # the host waits for the GPU here, once per block
                break
        return torch.cat(out, 1), steps - 1  # (B, steps)

    def block(self, window, greedy, size):
        """`size` decoding steps, on the device alone: feed each row's last token into slot `self.slot`,
        sample the next one, and put what each row emits into self.block_out."""
        temperature = 0 if greedy else self.temperature
        for i in range(size):
            self.mask.index_fill_(1, self.slot, 1)
            self.position += 1
            token = self.step(self.token[:, None], self.position, self.slot, self.mask, window, temperature,
                              self.stop_ids, self.sampled >= self.cfg.rollout.min_new_tokens)
            self.block_out[:, i] = self.emit(token)
            self.slot += 1

    def emit(self, token):
        """A sampled token per row (B,) -> what the row emits: padding once it has stopped. A row that
        emits a stop token stops; the token becomes the one the next step feeds."""
        token = torch.where(self.finished, self.pad_id, token)
        self.finished |= torch.isin(token, self.stop_ids)
        self.token.copy_(token)
        self.sampled += 1
        return token

    def run_block(self, window, greedy, size):
        """One block: on the CPU as it is; on a GPU the replay of its CUDA graph. A graph records kernels
        without running them, and torch.compile writes the step's kernels on its first calls: so the first
        block of each (window, greedy, size) runs as it is, for real, and is then captured for the next."""
        graph = self.graphs.get((window, greedy, size))
        if graph is not None:
            return graph.replay()
        self.block(window, greedy, size)
        if self.pool is not None:
            graph = self.graphs[(window, greedy, size)] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):  # records only: the state is not changed again
                self.block(window, greedy, size)

    def remember(self, rows, new, out, fed):
        """Book what the cache now holds: each row's new tokens and the part of its reply that was fed
        (up to its stop token); the padding a stopped row fed after it is masked out."""
        start = self.next_slot + max(map(len, new))
        replies = out[:, :fed].tolist()
        kept = []
        for row, reply in enumerate(replies):
            length = next((i + 1 for i, token in enumerate(reply) if token in self.stop_set), fed)
            kept.append(length)
            self.held[row] = None if self.held[row] is None else self.held[row] + new[row] + reply[:length]
        live = set(rows)
        self.held = [h if row in live else None for row, h in enumerate(self.held)]  # spare rows decoded junk
        slots = torch.arange(fed, device=out.device)
        self.mask[:, start:start + fed] = (slots[None, :] < torch.tensor(kept, device=out.device)[:, None]).long()
        self.next_slot = start + fed

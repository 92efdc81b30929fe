"""The static decoder: optional, part of the fast engine (fast/__init__.py). It samples what
rollout.LLMPolicy samples with transformers' `generate` (the readable path, rollout.engine=hf), faster: a KV
cache of fixed shape kept across the turns of a conversation, blocks of CHECK_EVERY decoding steps captured
as CUDA graphs, a forward of its own for Llama and Qwen2 layers (one product for q, k and v, one for gate and
up, PyTorch's fused attention over only the part of the cache in use), and a sampler that draws few random
numbers. On the CPU the same code runs uncompiled.

Proved by tests/test_fast.py: greedy multi-turn rollouts equal `generate`'s token for token, the forward's
logits equal the model's own for every configuration it accepts, the sampler draws from exactly the softmax;
tests/test_trainer.py and tests/test_chat.py run their rollout tests with both engines.
docs/performance.md tells how each piece was measured against `generate`.
"""
import functools
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from rollout import left_pad

WINDOW_STEP = 256  # decoding and prefill windows are rounded up to this many slots: few distinct shapes
PREFILL_STEP = 32  # prefill widths are rounded up to this many tokens (StaticDecoder.feed says why)
CHECK_EVERY = 8    # tokens between two checks whether every row has stopped (each check waits for the GPU)


def rounded_up(n, step):
    """n rounded up to a multiple of step: rounded_up(861, 8) = 864, rounded_up(864, 8) = 864."""
    return -(-n // step) * step


def unsupported(model):
    """Why forward() cannot run this model, or None. It runs the layers of Llama and Qwen2 (pre-norm,
    rotary embedding, grouped-query attention over the whole context, a gated MLP) and nothing else."""
    config = model.config
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if config.model_type not in ("llama", "qwen2"):
        return (f"its model type is {config.model_type}, and the static decoder runs llama and qwen2 "
                "models only")
    if getattr(config, "use_sliding_window", False) or (set(getattr(config, "layer_types", None) or [])
                                                        - {"full_attention"}):
        return "it uses sliding-window attention, which the static decoder does not"
    # dynamic and longrope change with the context length
    if rope_type not in ("default", "linear", "llama3", "yarn"):
        return (f"its RoPE type {rope_type} is not one the static decoder follows "
                "(default, linear, llama3, yarn)")
    return None


class Fused(NamedTuple):
    """One layer's fused products (fuse): the weights of q, k and v stacked, and of gate and up."""
    qkv_weight: torch.Tensor            # (H*d + 2*G*d, D)
    qkv_bias: torch.Tensor | None       # (H*d + 2*G*d,) Qwen2 has one, Llama none
    gate_up_weight: torch.Tensor        # (2*I, D)
    gate_up_bias: torch.Tensor | None   # (2*I,)


def fuse(linears):
    """One weight (and bias) for linear layers that read the same input: one product instead of several,
    each a small kernel whose time is mostly its start at 128 rows. The layers' own parameters become
    views of the fused tensors (`.data`: the Parameter objects stay, so an optimiser holding them, or
    models.copy_weights writing into them, still reaches the weights the decoder reads). Layers fused
    already (a second decoder of the same model) keep their fused tensors, which the first decoder reads.
    What gives the parameters new memory afterwards (model.to(), load_state_dict(assign=True)) unlinks
    them from a decoder built before: build the decoder after such calls.
    -> (weight (sum of out_features, in_features), bias or None)"""
    return (fused_tensor([linear.weight for linear in linears]),
            fused_tensor([linear.bias for linear in linears]))


def fused_tensor(params):
    """params (n_i, ...) -> one tensor (sum of n_i, ...) whose row blocks the params' data now are."""
    if params[0] is None:
        return None
    sizes, memory = [len(p) for p in params], params[0].untyped_storage()
    # the first param's memory has room for all: fused already?
    if memory.nbytes() == sum(sizes) * params[0][0].nbytes:
        # that memory as one tensor
        whole = params[0].new_empty(0).set_(memory, 0, (sum(sizes), *params[0].shape[1:]))
        # each block where it belongs
        if all(p.data_ptr() == part.data_ptr() for p, part in zip(params, whole.split(sizes))):
            return whole
    with torch.no_grad():
        fused = torch.cat(params)
    for param, part in zip(params, fused.split(sizes)):
        param.data = part
    return fused


def rotate(x, cos, sin):
    """The rotary embedding (RoFormer, as Llama applies it): entry i of a head's first half and entry i of
    its second half form a pair, turned by its position's angle. x (B, heads, W, d), cos and sin (B, W, d),
    from the model's own rotary module, which puts its RoPE type's frequencies and scaling into them.

    One head of d = 2, one pair (1, 0), turned by 90 degrees:
    >>> cos, sin = torch.zeros(1, 1, 2), torch.ones(1, 1, 2)
    >>> rotate(torch.tensor([[[[1.0, 0.0]]]]), cos, sin)
    tensor([[[[0., 1.]]]])
    """
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos[:, None] + rotated * sin[:, None]


def attention(q, keys, values, visible, scale):
    """q (B, H, W, d); keys, values (B, G, L, d), with G <= H key/value heads each shared by H/G query heads
    (Qwen2.5-0.5B: 14 query heads, 2 key/value heads); visible (B, 1, W, window), True = may attend: the
    first `window` slots are read. -> (B, W, H*d)

    PyTorch's fused attention with enable_gqa takes each K and V head with the query heads that share it,
    for a prompt (W > 1) as for a decoding step (W = 1): faster than two products and a softmax written
    out, or than K and V copied for every query head (docs/performance.md).

    Two query heads sharing one K/V head (d = 1), one token, two slots holding the values 0 and 1: head 0
    (q = 0) weighs them 1/2 and 1/2, head 1 scores slot 1 higher by ln 3 and weighs them 1/4 and 3/4.
    >>> q = torch.tensor([0.0, 1.0]).view(1, 2, 1, 1)             # (B, H, W, d)
    >>> keys = torch.tensor([1.0, 3.0]).log().view(1, 1, 2, 1)    # (B, G, window, d): 0 and ln 3
    >>> values = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1)
    >>> attention(q, keys, values, torch.tensor([True, True]).view(1, 1, 1, 2), scale=1.0)
    tensor([[[0.5000, 0.7500]]])
    >>> attention(q, keys, values, torch.tensor([False, True]).view(1, 1, 1, 2), scale=1.0)  # slot 0 hidden
    tensor([[[1., 1.]]])
    """
    B, H, W, d = q.shape
    window = visible.shape[-1]
    out = F.scaled_dot_product_attention(q, keys[:, :, :window], values[:, :, :window], attn_mask=visible,
                                         scale=scale, enable_gqa=True)  # (B, H, W, d)
    return out.transpose(1, 2).reshape(B, W, H * d)


def visible_slots(mask, slots, window):
    """Which of the first `window` cache slots each new token may attend: the real tokens up to its own slot,
    and always itself: a left-padding token of a first turn has no real token before it, and a softmax over
    no slot is NaN, which would spread through the cache (0 x NaN is NaN). What padding tokens compute is
    never read. mask (B, L), 1 = a real token; slots (W,) the new tokens' slots. -> (B, 1, W, window)"""
    cache_slots = torch.arange(window, device=mask.device)  # (window,)
    real = mask[:, None, None, :window].bool()              # (B, 1, 1, window)
    return (real & (cache_slots <= slots[:, None])) | (cache_slots == slots[:, None])


class Rows(NamedTuple):
    """What a decoding step's attention reads, on the device (a CUDA graph replays on these tensors)."""
    mask: torch.Tensor     # (B, L) 1 = a real token
    writing: torch.Tensor  # (B,) True = the token fed now is real (the row had not stopped before it)
    first: torch.Tensor    # (B,) the row's first real slot
    slot: torch.Tensor     # (1,) the slot of the token fed now
    window: int            # the turn's slots: window_rows_attention reads them all


def window_rows_attention(q, keys, values, rows, scale):
    """A decoding step's attention as the CPU runs it: PyTorch's over the turn's whole window for every row,
    the padding hidden. On a GPU, fast/rows_attention.py's kernel reads each writing row's own slots only;
    both give the same output for the rows still writing. q (B, H, 1, d) -> (B, 1, H*d)"""
    return attention(q, keys, values, visible_slots(rows.mask, rows.slot, rows.window), scale)


def merge(part, top, total):
    """The softmax over all the slots from its parts, as fast/rows_attention.py computes them on a GPU:
    part (B, H, S, d) numerators, top (B, H, S) maximum scores, total (B, H, S) sums of exponentials, each
    relative to its own maximum -> (B, H, d).

    Two parts of one slot each, scores 0 and ln 3, values 0 and 1: weights 1/4 and 3/4.
    >>> merge(torch.tensor([0.0, 1.0]).view(1, 1, 2, 1), torch.tensor([1.0, 3.0]).log().view(1, 1, 2),
    ...       torch.ones(1, 1, 2))
    tensor([[[0.7500]]])
    """
    best = top.amax(-1, keepdim=True)                              # (B, H, 1)
    weight = (top - best).exp().nan_to_num(0.0)                    # a row with no slot: -inf - -inf
    numerator = (part * weight[..., None]).sum(2)                  # (B, H, d)
    denominator = (total * weight).sum(2).clamp(min=1e-30)         # (B, H): 0 only where no slot was read
    return numerator / denominator[..., None]


def forward(model, fused, keys, values, ids, positions, slots, visible, attend=attention, run_layer=None):
    """What the model computes for the new tokens `ids`, each row's next ones after those in its cache:
    writes their keys and values into cache slots `slots` and returns the logits after each row's last
    token. The model's own modules do the embedding, the rotary angles, the last norm and the LM head;
    `run_layer` (decoder_layer, or a compiled decoder_layer) runs the layers.

    ids, positions (B, W): the tokens and their position ids (real tokens counted only); slots (W,);
    fused: a Fused per layer; keys, values: per layer (B, G, L, d), L = cache slots; visible and attend:
    what the new tokens attend and how, attend(q, k_cache, v_cache, visible, scale) -> (B, W, H*d): a prefill's
    `attention` over visible_slots(...), or a decoding step's Rows and its attention. -> (B, V)"""
    body = model.model
    x = body.embed_tokens(ids)                             # (B, W, D)
    cos, sin = body.rotary_emb(x, positions)               # (B, W, d) each
    run_layer = run_layer or decoder_layer
    for layer, products, k_cache, v_cache in zip(body.layers, fused, keys, values):
        x = run_layer(layer, products, k_cache, v_cache, x, cos, sin, slots, visible, attend)
    return model.lm_head(body.norm(x[:, -1]))  # (B, V)


def decoder_layer(layer, products, k_cache, v_cache, x, cos, sin, slots, visible, attend=attention):
    """One Llama / Qwen2 layer for the new tokens x (B, W, D): attention (its keys and values written into
    the cache slots `slots` first), then the gated MLP, each added to x. The layer's own modules do the
    norms and the output projections; the fused products (fuse) and the attention are done here.
    k_cache, v_cache (B, G, L, d); cos, sin (B, W, d); visible, attend: as forward's. -> x (B, W, D)"""
    attn, config = layer.self_attn, layer.self_attn.config
    B, W, _ = x.shape
    H, G, d = config.num_attention_heads, config.num_key_value_heads, attn.head_dim
    q, k, v = F.linear(layer.input_layernorm(x), products.qkv_weight,
                       products.qkv_bias).split([H * d, G * d, G * d], -1)
    q = rotate(q.view(B, W, H, d).transpose(1, 2), cos, sin)  # (B, H, W, d)
    k_cache.index_copy_(2, slots, rotate(k.view(B, W, G, d).transpose(1, 2), cos, sin))  # (B, G, W, d)
    v_cache.index_copy_(2, slots, v.view(B, W, G, d).transpose(1, 2))
    x = x + attn.o_proj(attend(q, k_cache, v_cache, visible, attn.scaling))
    gate, up = F.linear(layer.post_attention_layernorm(x), products.gate_up_weight,
                        products.gate_up_bias).chunk(2, -1)
    return x + layer.mlp.down_proj(layer.mlp.act_fn(gate) * up)


def decoding_step(model, fused, keys, values, attend, token, position, rows, temperature, stop_ids, allow_eos):
    """One token for every row: forward one position through the KV cache, then sample; all on the device.
    attend: rows_attention (fast/rows_attention.py) on a GPU, window_rows_attention on the CPU."""
    logits = forward(model, fused, keys, values, token, position, rows.slot, rows, attend).float()  # (B, V)
    return sample(logits, temperature, stop_ids, allow_eos)


def sample(logits, temperature, stop_ids, allow_eos):
    """A token per row drawn from exactly softmax(logits / T); T = 0 is greedy. The captured step takes T as
    a 0-d tensor: a float would be compiled into it, one more compilation per temperature. The stop tokens
    (a (S,) tensor of ids) are barred while allow_eos is False (min_new_tokens). (B, V) -> (B,)"""
    logits[:, stop_ids] = torch.where(allow_eos, logits[:, stop_ids], float("-inf"))
    if not torch.is_tensor(temperature) and temperature == 0:
        return logits.argmax(-1)
    return two_stage_race(logits / temperature)


def race(scores):
    """The exponential race: argmax of exp(scores) / E, E ~ Exp(1) drawn per entry, is index i with
    probability softmax(scores)_i, and needs no host synchronisation (torch.multinomial would).
    (..., n) -> (...)

    A barred entry (-inf) never wins:
    >>> race(torch.tensor([float("-inf"), 0.0, float("-inf")]))
    tensor(1)
    """
    return (scores - torch.empty_like(scores).exponential_().log()).argmax(-1)


def two_stage_race(scores):
    """A token per row with probability softmax(scores), from about 2 sqrt(V) random numbers instead of V
    (drawing them was most of the sampling's time: docs/performance.md). The V tokens are cut into
    blocks of S = ceil(sqrt(V)); a race picks a block with probability its share of sum(exp(scores)), a
    second race a token within it with its share of the block: the product is exactly the token's
    softmax probability. (B, V) -> (B,)

    Only token 4 can win (V = 5: two blocks of 3, the second padded with one barred slot):
    >>> two_stage_race(torch.tensor([[float("-inf")] * 4 + [0.0]]))
    tensor([4])
    """
    B, V = scores.shape
    size = math.isqrt(V - 1) + 1  # S = ceil(sqrt(V))
    count = -(-V // size)         # blocks
    blocks = F.pad(scores, (0, count * size - V), value=float("-inf")).view(B, count, size)  # (B, count, S)
    top = blocks.amax(-1, keepdim=True)  # (B, count, 1): exp(scores - top) cannot overflow
    top = top.masked_fill(top == float("-inf"), 0.0)  # a block of barred tokens has weight 0, not NaN
    # (B, count): log sum(exp(scores)) per block
    log_weight = top[..., 0] + (blocks - top).exp().sum(-1).log()
    block = race(log_weight)                                         # (B,)
    return block * size + race(blocks[torch.arange(B, device=scores.device), block])  # a token of that block


def continues(held, context):
    """Whether a cache row holding the tokens `held` can go on with `context`: they are its beginning."""
    return held is not None and len(held) < len(context) and context[:len(held)] == held


class StaticDecoder:
    """What `generate` does, for the fast engine: a KV cache of fixed shape (batch_size rows x
    max_context + WINDOW_STEP slots), allocated once, and decoding in blocks of CHECK_EVERY steps, each block
    captured on a GPU as one CUDA graph: one launch per 8 tokens, where eager decoding launches hundreds of
    kernels per token, and the host waits for the GPU once per block, to see whether every row has stopped. A
    turn lasts as long as its longest reply: rows with no conversation this turn (episodes that ended,
    spare rows) count as stopped from the start.

    Turn k+1 of a conversation starts with turn k's context and reply: the cache keeps them, so a new
    turn feeds only the tokens that are new (the end of the reply, the env's message), not the whole
    conversation again. A cache row therefore holds, slot after slot:

        [left padding][prompt][reply 1][stopped-row padding][env reply 1, left-padded][reply 2]...

    with the attention mask at 0 on every padding slot and position ids that count real tokens only, so
    each row computes exactly what the unpadded conversation would. `self.held[r]` lists the real tokens
    of row r. A decoding step on a GPU reads the keys and values of the real tokens of the rows still writing
    (fast/rows_attention.py); a prefill, and a decoding step on the CPU, read the whole window, padding
    included. So before a turn whose window (or room) it shrinks, the cache is compacted (compact): each row's real tokens move, in order, to the
    end of the used slots, and the padding gathers in front of them. A key's rotary angle comes from its
    position id, not its slot, and the attention weighs the visible slots whatever their order, so a row
    computes the same after the move. A call that is not the continuation of the previous one (a new batch
    of episodes, new weights: the caller says so with reuse=False), a context that does not continue any
    row, or a conversation that would outgrow the slots even compacted, starts the cache afresh from slot 0.

    The decoder fuses the model's q, k, v and gate, up weights in place (fuse): the model computes what
    it did before. Its weights may change between calls (the trainer copies new ones in place): the
    captured blocks read the same tensors.
    """

    def __init__(self, model, batch_size, cfg, stop_ids, pad_id):
        self.model, self.batch_size, self.cfg = model, batch_size, cfg
        self.pad_id, self.stop_set = pad_id, set(stop_ids)
        # rollout.max_context bounds each conversation, but the rows share the slots of a turn: its new tokens
        # start after the longest row's and end as late as the longest new part. WINDOW_STEP slots more
        # leave room for that, where a cache of max_context slots would start afresh and feed whole
        # conversations again in the last turns of long episodes.
        self.slots = cfg.rollout.max_context + WINDOW_STEP
        device, config, reason = model.device, model.config, unsupported(model)
        if reason:
            raise ValueError(f"the static decoder cannot run this model: {reason}; "
                             "use rollout.engine=hf")
        self.fused = []  # a Fused per layer
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            self.fused.append(Fused(*fuse([attn.q_proj, attn.k_proj, attn.v_proj]),
                                    *fuse([mlp.gate_proj, mlp.up_proj])))
        # One tensor per layer, not one for all: the compiled step writes into its inputs in place, where it
        # would copy each written slice of one big input whole and back.
        # One slot more than any window reads (the last, never used): a window of every slot would be a slice
        # of the whole tensor, which torch.compile treats apart, compiling the step and the prefill layer once
        # more in the middle of a run.
        L = self.slots + 1
        shape = (batch_size, config.num_key_value_heads, L, model.model.layers[0].self_attn.head_dim)
        self.keys = [torch.zeros(shape, dtype=model.dtype, device=device)
                     for _ in model.model.layers]    # (B, G, L, d) each
        self.values = [torch.zeros(shape, dtype=model.dtype, device=device)
                       for _ in model.model.layers]  # (B, G, L, d) each
        self.mask = torch.zeros((batch_size, L), dtype=torch.long, device=device)  # (B, L) 1 = real token
        self.held = [None] * batch_size  # per row: the real tokens in its slots; None = not reusable
        self.next_slot = 0               # the first empty slot, the same in every row
        # What a decoding block reads and writes in place (a CUDA graph replays on fixed addresses):
        self.stop_ids = torch.tensor(stop_ids, device=device)                     # (S,)
        self.token = torch.zeros(batch_size, dtype=torch.long, device=device)     # (B,) sampled, not yet fed
        # (B, 1) its position id
        self.position = torch.zeros((batch_size, 1), dtype=torch.long, device=device)
        self.slot = torch.zeros(1, dtype=torch.long, device=device)               # (1,) its cache slot
        # (B,) True = emits padding now
        self.finished = torch.ones(batch_size, dtype=torch.bool, device=device)
        # (B,) True = the token fed now is real: a stop token is fed (its keys and values stay in the cache)
        self.writing = torch.zeros(batch_size, dtype=torch.bool, device=device)
        self.first = torch.zeros(batch_size, dtype=torch.long, device=device)     # (B,) first real slot
        self.sampled = torch.zeros((), dtype=torch.long, device=device)           # tokens sampled this turn
        self.temperature = torch.ones((), device=device)  # a tensor: a float would be compiled into the step
        self.block_out = torch.zeros((batch_size, CHECK_EVERY), dtype=torch.long, device=device)  # (B, 8)
        if device.type == "cuda":
            from fast.rows_attention import rows_attention  # Triton: installed with PyTorch's CUDA builds
            attend = rows_attention
        else:
            attend = window_rows_attention
        step = functools.partial(decoding_step, model, self.fused, self.keys, self.values, attend)
        self.step = torch.compile(step, fullgraph=True) if device.type == "cuda" else step
        # The prefill's width changes every turn: its layer is compiled for any width (dynamic), once for all
        # layers (a whole compiled forward compiles for far longer), and fuses the element-wise work between
        # the products (norms, rotary embedding, residuals) that eager runs op by op.
        self.prefill_layer = torch.compile(decoder_layer, dynamic=True) if device.type == "cuda" else None
        self.graphs = {}  # (window, greedy, size) -> the CUDA graph of a block of that many steps
        # One scratch memory for all graphs: blocks never run at once, and none leaves a tensor of its own
        # behind.
        self.pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None

    @torch.no_grad()
    def generate(self, contexts, temperature, reuse=False):
        """Token-id lists -> (len(contexts), steps) sampled tokens, pad_id after a stop token; steps is at
        most max_new_tokens, fewer when every row stopped sooner.
        reuse=True: these contexts may continue those of the previous call (same weights since)."""
        rows, new = self.place(contexts, reuse)
        logits, position, start = self.feed(new)
        out, fed = self.decode(logits, position, start, temperature, rows)
        self.remember(rows, new, out, fed, start)
        return out[torch.tensor(rows, device=out.device)]

    def place(self, contexts, reuse):
        """The cache row of each context, and per row the tokens to feed this turn -> (rows, new)."""
        rows, row = [], 0
        for context in contexts if reuse else []:  # in order: a later turn's contexts are a subsequence
            while row < self.batch_size and not continues(self.held[row], context):
                row += 1
            rows.append(row)
            row += 1
        if reuse and rows[-1] < self.batch_size:
            ended = sorted(set(range(self.batch_size)) - set(rows))
            self.mask[ended] = 0  # conversations that ended (often the longest) hold nothing a turn reads
            new = [[] for _ in range(self.batch_size)]  # rows without a context feed nothing, decode junk
            for context, row in zip(contexts, rows):
                new[row] = context[len(self.held[row]):]
            turn = self.width(new) + self.cfg.rollout.max_new_tokens  # the slots this turn adds
            real = int(self.mask[:, :self.next_slot].sum(1).max())  # the slots a compacted cache uses
            if (self.window(real + turn) < self.window(self.next_slot + turn)
                    or self.next_slot + turn > self.slots):
                self.compact(real)
            if self.next_slot + turn <= self.slots:
                return rows, new
        # Afresh from slot 0. The spare rows copy the first context (any tokens would do: they count as
        # stopped from the start, and what they emit is dropped).
        self.mask.zero_()  # the cache's old keys and values stay, masked
        self.next_slot, self.held = 0, [[] for _ in range(self.batch_size)]
        return list(range(len(contexts))), contexts + [contexts[0]] * (self.batch_size - len(contexts))

    def window(self, end):
        """The slots a turn's attention reads when its reply may reach slot `end`: rounded up to WINDOW_STEP
        (few distinct shapes, each with its own CUDA graphs), all the slots at most."""
        return min(self.slots, rounded_up(end, WINDOW_STEP))

    def compact(self, real):
        """Move each row's real tokens (mask 1), in order, into the slots just before slot `real`, the most
        real tokens any row holds; the row's padding gathers before them. About one read and one write of
        the used cache, where a turn's decoding steps read it once per step.

        One row, slots [pad, a, pad, b] (mask 0 1 0 1) -> [a, b] in slots 0 and 1, mask 1 1."""
        used = self.mask[:, :self.next_slot]                            # (B, S)
        order = used.argsort(dim=1, stable=True)[:, used.shape[1] - real:]  # (B, real): the real slots
        for cache in (*self.keys, *self.values):                        # (B, G, L, d) each
            cache[:, :, :real] = cache.gather(2, order[:, None, :, None].expand(-1, cache.shape[1], -1,
                                                                                cache.shape[3]))
        self.mask[:, :real] = used.gather(1, order)
        self.mask[:, real:self.next_slot] = 0
        self.next_slot = real

    def width(self, new):
        """The prefill's width: the longest row of new tokens rounded up to PREFILL_STEP, while a reply still
        fits."""
        longest = max(map(len, new))
        return max(longest, min(rounded_up(longest, PREFILL_STEP),
                                self.slots - self.cfg.rollout.max_new_tokens))

    def feed(self, new):
        """Prefill: the new tokens of every row, left-padded into one block of slots after the used ones,
        in one forward pass (compiled on a GPU for any width). -> the logits after each row's last
        token (B, V), that token's position (B, 1), and the slot where the reply starts.

        Its shapes are rounded up, the width to PREFILL_STEP tokens and the window to WINDOW_STEP slots (the
        extra columns are padding, the extra slots are hidden): on a GPU PyTorch runs this masked attention
        with cuDNN, which plans every new shape on the host, where rounded shapes repeat from turn to turn and
        iteration to iteration and reuse their plans."""
        model, start, device = self.model, self.next_slot, self.model.device
        width = self.width(new)
        ids, block_mask = (x.to(device) for x in left_pad(new, self.pad_id, width))  # (B, W)
        self.mask[:, start:start + width] = block_mask
        # (B, 1) real tokens so far
        before = torch.tensor([len(h or []) for h in self.held], device=device)[:, None]
        positions = (before + block_mask.cumsum(-1) - 1).clamp(min=0)  # (B, W): real tokens only are counted
        slots = torch.arange(start, start + width, device=device)  # (W,)
        visible = visible_slots(self.mask, slots, self.window(start + width))  # (B, 1, W, window)
        logits = forward(model, self.fused, self.keys, self.values, ids, positions, slots, visible,
                         run_layer=self.prefill_layer)
        return logits.float(), positions[:, -1:], start + width

    def decode(self, logits, position, start, temperature, rows):
        """Sample up to max_new_tokens per row from slot `start` on -> (out (B, steps), fed): out holds
        pad_id after a row's stop token, and in every row not in `rows` (no conversation this turn); the
        first `fed` = steps - 1 tokens of every row went into the cache (the last one needs no step)."""
        cfg = self.cfg.rollout
        window = self.window(start + cfg.max_new_tokens)  # the turn's slots
        greedy = temperature == 0
        if not greedy:
            self.temperature.fill_(temperature)
        self.finished.fill_(True)
        self.finished[rows] = False
        self.position.copy_(position)
        self.slot.fill_(start)
        self.first.copy_(self.mask[:, :start].argmax(1))  # argmax: the first of the maxima, a real token
        self.sampled.fill_(0)
        # The first token comes from the prefill's logits; then blocks, so that the host checks whether
        # every row has stopped after every CHECK_EVERY tokens.
        token = sample(logits, 0 if greedy else self.temperature, self.stop_ids,
                       self.sampled >= cfg.min_new_tokens)
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
            rows = Rows(self.mask, self.writing, self.first, self.slot, window)
            token = self.step(self.token[:, None], self.position, rows, temperature, self.stop_ids,
                              self.sampled >= self.cfg.rollout.min_new_tokens)
            self.block_out[:, i] = self.emit(token)
            self.slot += 1

    def emit(self, token):
        """A sampled token per row (B,) -> what the row emits: padding once it has stopped. A row that
        emits a stop token stops; the token becomes the one the next step feeds."""
        token = torch.where(self.finished, self.pad_id, token)
        self.writing.copy_(~self.finished)
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

    def remember(self, rows, new, out, fed, start):
        """Book what the cache now holds: each row's new tokens and the part of its reply that was fed
        (up to its stop token) from slot `start` on; the padding a stopped row fed after it is masked out."""
        replies = out[:, :fed].tolist()
        kept = []
        for row, reply in enumerate(replies):
            length = next((i + 1 for i, token in enumerate(reply) if token in self.stop_set), fed)
            kept.append(length)
            self.held[row] = None if self.held[row] is None else self.held[row] + new[row] + reply[:length]
        live = set(rows)
        self.held = [h if row in live else None for row, h in enumerate(self.held)]  # spare rows decoded junk
        slots = torch.arange(fed, device=out.device)
        self.mask[:, start:start + fed] = (slots[None, :]
                                           < torch.tensor(kept, device=out.device)[:, None]).long()
        self.next_slot = start + fed

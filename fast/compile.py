"""Compiled scoring and update: optional, part of the fast engine (fast/__init__.py). The readable path
runs the same forward and log-softmax op by op: ragen_mini.hidden_states calls the backbone as transformers
wrote it, and ragen_mini.token_logprobs calls starpo.logprob_and_entropy.

Op by op, a layer's element-wise work (the float32 RMSNorm, the rotary embedding, SwiGLU, the residual adds,
autocast's casts) and the log-softmax over the vocabulary are dozens of passes over their tensors, one kernel
each; compiled, they are a few fused kernels. The numbers stay the same to float precision.

Proved by tests/test_fast.py: the compiled layers' hidden states and weight gradients equal the eager
layers', with one compiled graph for all layers and widths; the padded forward's hidden states equal the
unpadded ones; the compiled log-softmax gives starpo.logprob_and_entropy's numbers.
"""
import functools

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import starpo
from fast.decoder import rounded_up

# The compiled layers see widths in multiples of WIDTH_STEP: they compile a multiple of 8 apart (aligned
# rows), so a first width of the other kind in the middle of a run would compile them again.
WIDTH_STEP = 8


def compile_backbone(backbone):
    """Regional compilation: torch.compile each transformer layer's forward, then route the backbone's forward
    through padded_forward. The layers differ only in their weights, which the compiled code takes as inputs,
    so it compiles once per layer class and grad mode, not once per layer (the trainer's forward keeps no KV
    cache, which would be indexed by layer). dynamic=True: every micro-batch has its own width. A backbone
    without a `layers` list (GPT-2 names its blocks `h`) keeps its eager layers. Call it after every copy of
    the model: a copy would share the compiled code of the original's layers."""
    for layer in getattr(backbone, "layers", []):
        layer.forward = torch.compile(layer.forward, dynamic=True)
    backbone.forward = functools.partial(padded_forward, type(backbone).forward.__get__(backbone))


def padded_forward(forward, input_ids=None, **kwargs):
    """The backbone's forward for the trainer's call (right-padded rows, no attention mask, no KV cache): the
    rows padded on the right to a multiple of WIDTH_STEP, and the hidden states cut back to the given width.
    Causal attention hides the extra columns from the real tokens, as it hides the batch's own padding.
    A lone row gets a second row of pads: torch.compile specialises a size of 1, so a micro-batch of one row
    would compile the layers anew in the middle of a run. The attention runs in flash attention's kernel, not
    cuDNN's, which plans every new width on the host (micro-batch widths keep changing). Other calls pass
    through unchanged."""
    if kwargs.get("use_cache") is not False or kwargs.get("attention_mask") is not None:
        return forward(input_ids=input_ids, **kwargs)
    rows, width = input_ids.shape
    more_rows, more_columns = max(0, 2 - rows), rounded_up(width, WIDTH_STEP) - width
    padded = F.pad(input_ids, (0, more_columns, 0, more_rows))  # (max(b, 2), W), the new cells hold id 0
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        out = forward(input_ids=padded, **kwargs)
    out.last_hidden_state = out.last_hidden_state[:rows, :width]
    return out


# torch.compile keeps its code with the function: it compiles once, then again only for a new kind of shape
compiled_logprob_and_entropy = torch.compile(starpo.logprob_and_entropy, dynamic=True)


def logprob_and_entropy(logits, targets, temperature, with_entropy=True):
    """starpo.logprob_and_entropy, on a GPU compiled into a few fused passes over the bf16 logits where op by
    op a chunk's float32 logits, softmax and their gradients take some twenty passes. On the CPU it is
    starpo's own, and so it is for a lone row (a chunk of one token): torch.compile specialises a size of 1,
    so one row would compile it anew in the middle of a run. (n, V) logits, (n,) targets -> two (n,)"""
    compiled = logits.is_cuda and len(logits) > 1
    function = compiled_logprob_and_entropy if compiled else starpo.logprob_and_entropy
    return function(logits, targets, temperature, with_entropy)

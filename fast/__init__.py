"""The fast engine: optional. ragen-mini trains and samples without it (rollout.engine=hf: transformers'
`generate`, the layers and the log-softmax op by op, starpo.compute_gae); with it (rollout.engine=fast, or
auto on a GPU for the Llama and Qwen2 models the static decoder runs) each piece below computes the same
numbers faster. models.choose_engine reads the key once, when a run is built, and is the only place outside
this package that imports it; the run then holds the functions it computes with (models.Engine), and calls
this file's at its start (the static decoder, the compiled layers) and around its iterations (the collector).

    decoder.py  StaticDecoder: the rollout's sampling, for rollout.LLMPolicy's `generate`
    rows_attention.py  a decoding step's attention over only the rows still writing (Triton), for the
                decoder on a GPU
    compile.py  compile_backbone: compiled layers, widths in multiples of 8, flash attention, for the
                forward of ragen_mini.hidden_states; logprob_and_entropy: starpo.logprob_and_entropy compiled
    gae.py      compute_gae: starpo.compute_gae on the CPU over the time steps alone
    this file   which models it runs, and the cycle collector frozen while a run lasts

tests/test_fast.py proves each file's numbers against the readable function's; tests/test_trainer.py and
tests/test_chat.py run their rollout tests with both engines.
"""
import gc

from fast.compile import compile_backbone, logprob_and_entropy
from fast.decoder import StaticDecoder, unsupported
from fast.gae import compute_gae

__all__ = ["StaticDecoder", "compile_backbone", "compile_for_training", "compute_gae",
           "freeze_collector", "logprob_and_entropy", "release_collector", "runs", "static_decoder",
           "unsupported"]


def runs(model, cfg, device):
    """Whether the fast engine runs this model: rollout.engine=fast -> True, or a clear error for a model
    the static decoder cannot run; auto (on a GPU) -> True for a model it runs, else False with a note."""
    reason = unsupported(model)
    if reason and cfg.rollout.engine == "fast":
        raise SystemExit(f"error: rollout.engine=fast cannot run model.name={cfg.model.name}: {reason}; "
                         "use rollout.engine=auto or hf")
    if reason:
        print(f"note: model.name={cfg.model.name}: {reason}; the rollout samples with generate(), "
              f"several times slower, and training runs without the fast engine on {device}")
    return reason is None


def static_decoder(model, chat, cfg):
    """The static decoder of `model`, sized for the rollout batch (rollout.groups x rollout.group_size)."""
    return StaticDecoder(model, cfg.rollout.groups * cfg.rollout.group_size, cfg, chat.stop_ids, chat.pad_id)


def compile_for_training(*backbones):
    """compile_backbone for each backbone that scoring and update run (None: no critic, no reference),
    on a GPU; the CPU runs them eager."""
    for backbone in backbones:
        if backbone is not None and backbone.device.type == "cuda":
            compile_backbone(backbone)


def freeze_collector():
    """Python's cycle collector now and then walks every object the process holds; what exists after a
    run's first iteration (models, compiled code, tokenizer) lives to the end, so it leaves those passes."""
    gc.freeze()


def release_collector():
    """What a run leaves behind may be collected again."""
    gc.unfreeze()

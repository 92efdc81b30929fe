"""The model cache (models.converted_folder): a GGUF file is converted once into ~/.cache/ragen-mini (or
$XDG_CACHE_HOME/ragen-mini). Runs that start together on an empty cache must all start, with one converted
folder; a conversion cut short is cleaned up by the next start; a cache that cannot be written gives a message
naming the cache folder and XDG_CACHE_HOME. The conversion itself is a stand-in (models.convert replaced):
what is tested is the protocol around it."""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import models

ROOT = Path(__file__).resolve().parents[1]


def gguf(tmp_path):
    """A file with a GGUF file's name; its bytes only feed the folder's digest. -> (path, folder name)"""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(range(200)))
    return path, f"m-{hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"


STAND_IN = """
import os, sys, time
sys.path.insert(0, {root!r})
import models
def slow_convert(path, into):  # every process is still converting when the first one finishes
    os.makedirs(into)
    time.sleep(1.5)
    with open(os.path.join(into, "model.safetensors"), "w") as f:
        f.write(str(os.getpid()))
models.convert = slow_convert
print(models.converted_folder({path!r}))
"""


@pytest.mark.slow
def test_runs_started_together_on_an_empty_cache_all_start_with_one_folder(tmp_path):
    path, name = gguf(tmp_path)
    cache = tmp_path / "cache" / "ragen-mini"
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process that no longer runs: the partial folder it left is abandoned
    abandoned = cache / f"{name}.partial-{gone.pid}"
    abandoned.mkdir(parents=True)
    (abandoned / "config.json").write_text("{}")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", STAND_IN.format(root=str(ROOT), path=str(path))], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(run.communicate(timeout=300), run.returncode) for run in runs]
    assert [code for _, code in results] == [0, 0, 0], [err[-2000:] for (_, err), _ in results]
    assert {out.splitlines()[-1] for (out, _), _ in results} == {str(cache / name)}
    assert sorted(os.listdir(cache)) == [name]  # no partial folder left, the abandoned one removed
    assert (cache / name / "model.safetensors").read_text().isdigit()


def test_a_cache_that_cannot_be_written_names_the_folder_and_xdg_cache_home(tmp_path, monkeypatch):
    path, _ = gguf(tmp_path)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))

    def convert(path, into):
        os.makedirs(into)  # fails: its parent is a file
    monkeypatch.setattr(models, "convert", convert)
    with pytest.raises(SystemExit) as refused:
        models.converted_folder(str(path))
    message = str(refused.value)
    assert message.startswith(f"error: the model cache {blocked / 'ragen-mini'}") and "XDG_CACHE_HOME=DIR" in message
    assert "Traceback" not in message

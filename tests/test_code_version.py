"""Every run records the code it ran in its config.yaml (code.commit, code.clean), so that a table of runs can
tell code versions apart: bookkeeping.code_version against git run by hand in throwaway repositories, a real
run's record against this checkout's own `git rev-parse HEAD`, and run folders from before the record."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import bookkeeping  # noqa: E402
import config  # noqa: E402
import ragen_mini  # noqa: E402
from test_trainer import BANDIT, make_cfg  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git records the code")


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_code_version_is_the_commit_and_whether_tracked_files_changed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "one")
    first = git(repo, "rev-parse", "HEAD")
    assert len(first) == 40
    assert bookkeeping.code_version(repo) == {"commit": first, "clean": True}
    (repo / "notes.txt").write_text("untracked files are not the code\n")
    assert bookkeeping.code_version(repo) == {"commit": first, "clean": True}
    (repo / "a.py").write_text("x = 2\n")
    assert bookkeeping.code_version(repo) == {"commit": first, "clean": False}
    git(repo, "commit", "-q", "-am", "two")
    assert bookkeeping.code_version(repo) == {"commit": git(repo, "rev-parse", "HEAD"), "clean": True}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert bookkeeping.code_version(plain) == {"commit": "", "clean": False}


@pytest.mark.slow
def test_a_run_records_this_checkouts_commit_and_a_given_one_is_replaced(tmp_path):
    """The config given may carry another run's record (a run folder's config.yaml reused with --config): the
    new run writes its own."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("this copy of ragen-mini is not a git checkout")
    cfg = make_cfg(*BANDIT, "train.iterations=1", "eval.every=0", f"run_dir={tmp_path / 'run'}",
                   "code.commit=0123456789012345678901234567890123456789", "code.clean=true")
    ragen_mini.train(cfg)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    changed = git(ROOT, "status", "--porcelain", "--untracked-files=no")
    assert saved["code"] == {"commit": git(ROOT, "rev-parse", "HEAD"), "clean": changed == ""}


def test_a_run_folder_from_before_the_record_still_loads(tmp_path):
    """--resume and --eval read RUN_DIR/config.yaml, which must hold every key; one written before runs recorded
    their code has no code section and loads with an unknown commit."""
    cfg = make_cfg(*BANDIT)
    del cfg["code"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert config.load_run_config(str(tmp_path))["code"] == {"commit": "", "clean": False}
    del cfg["seed"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(config.ConfigError, match="lacks seed"):
        config.load_run_config(str(tmp_path))

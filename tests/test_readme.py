"""README's map ("Where each idea of the paper lives") leads to code that exists: every `module.name` in its
table names a function, class or constant of that module, every `file.py` and folder a file or folder of the
repository, and every `# ---- MARKER` cited stands in the named function."""
import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def map_rows():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Where each idea of the paper lives"):]
    section = section[:section.index("\n## ", 1)]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| idea")
            and not line.startswith("| ---")]


def test_the_map_stands_near_the_top():
    headings = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("## ")]
    assert headings[0] == "## Where each idea of the paper lives"


def test_every_name_in_the_map_exists():
    names, files = [], []
    for row in map_rows():
        where = row.split(" | ")[-1]
        for code in re.findall(r"`([^`]+)`", where):
            if re.fullmatch(r"[a-z_]+\.[A-Za-z_]+", code) and not code.endswith(".py"):
                names.append(code)
            elif code.endswith((".py", ".yaml", "/")):
                files.append(code)
    assert len(names) > 30 and len(files) > 5
    missing = [name for name in names
               if not hasattr(importlib.import_module(name.split(".")[0]), name.split(".")[1])]
    assert missing == []
    assert [f for f in files if not (ROOT / f).exists()] == []


def test_every_marker_in_the_map_stands_in_its_function():
    cited = [(function, marker) for row in map_rows()
             for function, marker in re.findall(r"`(\w+\.\w+)`, at `(# ---- [A-Z ]+)`", row)]
    assert len(cited) == 2
    for function, marker in cited:
        module, name = function.split(".")
        assert marker in inspect.getsource(getattr(importlib.import_module(module), name)), function

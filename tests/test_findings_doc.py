"""docs/findings.md cannot drift from the kept runs: its tables are findings.py's generated tables line for line,
every number of its verdicts is in the finding's generated tables, every quoted thought is in a kept
thoughts.json (in the run and evaluation named beside it), the decision rule is the one findings.py applies,
and the protocol's table counts the runs findings.py starts."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import findings  # noqa: E402

KEPT = ROOT / "results" / "runs" / "findings"
DOC = (ROOT / "docs" / "findings.md").read_text()


@pytest.fixture(scope="module")
def generated():
    """{finding number: its tables}, drawn from the kept runs (the figures are dropped unsaved)."""
    out = {}
    for number, (_, _, draw) in findings.FINDINGS.items():
        out[number], fig = draw(str(KEPT))
        findings.plots.plt.close(fig)
    return out


def sections():
    """{heading: body} of the doc's ## sections."""
    parts = re.split(r"^## ", DOC, flags=re.MULTILINE)[1:]
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}


def finding_sections():
    return {re.match(r"Finding (\d)", heading).group(1): body for heading, body in sections().items()
            if heading.startswith("Finding ")}


# a number as prose writes it: 12, 0.054, 9,560 (a trailing comma or full stop is punctuation)
NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?")


def numbers(text):
    """The numbers of TEXT outside quoted thoughts and code (run names hold digits that are no result)."""
    return NUMBER.findall(re.sub(r"“.*?”|`[^`]*`", " ", text, flags=re.DOTALL))


def appears(number, table):
    return re.search(rf"(?<![\d.,]){re.escape(number)}(?![\d]|[.,]\d)", table) is not None


def test_numbers_are_found_as_whole_numbers_only():
    assert numbers("at 0.054, in 2 of 3 (`sokoban-grpo-seed1`, “9 actions”) on ≈9,560 tokens, -0.055.") == [
        "0.054", "2", "3", "9,560", "0.055"]
    table = "| 0.0541 | 12.5 | ≈9,560 | -0.055 (n=3) |"
    assert [appears(n, table) for n in ("0.054", "12", "12.5", "9,560", "0.055", "3", "560")] == [
        False, False, True, True, True, True, False]


def verdict_paragraphs():
    """{finding number: [its paragraphs that start with **Verdict]} plus the summary's verdict cells."""
    out = {n: [p for p in body.split("\n\n") if p.startswith("**Verdict")] for n, body in finding_sections().items()}
    for line in sections()["Where this stands"].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            out[cells[0]].append(cells[2])
    return out


def test_every_finding_has_a_verdict_and_a_summary_row():
    paragraphs = verdict_paragraphs()
    assert sorted(paragraphs) == sorted(findings.FINDINGS)
    assert all(len(found) == 2 for found in paragraphs.values()), {n: len(p) for n, p in paragraphs.items()}


@pytest.mark.slow
def test_every_number_of_a_verdict_is_in_the_findings_generated_tables(generated):
    missing = {n: [x for p in paragraphs for x in numbers(p) if not appears(x, generated[n])]
               for n, paragraphs in verdict_paragraphs().items()}
    assert not any(missing.values()), missing


@pytest.mark.slow
def test_every_count_of_runs_or_seeds_of_a_verdict_is_in_the_generated_tables(generated):
    """"2 of 15 runs" in a verdict is "2 of 15" in the finding's tables, not only a 2 and a 15 somewhere in them:
    a new run changes the count (2 of 16), and a 15 may stand in any cell."""
    assert counts("in 2 of 15 runs (†), 3 of 3 seeds; 78 of 775 turns, 1 of 2 runs") == ["2 of 15", "3 of 3",
                                                                                       "1 of 2"]
    missing = {n: [c for p in paragraphs for c in counts(p)
                   if not re.search(rf"(?<![\d.,]){c}(?!\d)", generated[n])]
               for n, paragraphs in verdict_paragraphs().items()}
    assert sum(len(counts(p)) for paragraphs in verdict_paragraphs().values() for p in paragraphs) > 10
    assert not any(missing.values()), missing


def counts(text):
    """The "N of M" of each "N of M runs" or "N of M seeds" in TEXT outside quoted thoughts and code."""
    prose = re.sub(r"“.*?”|`[^`]*`", " ", text, flags=re.DOTALL)
    return re.findall(r"(?<![\w.,])(\d+ of \d+) (?:runs|seeds)\b", prose)


def test_the_verdict_words_of_the_doc_are_those_of_the_generated_tables(generated):
    """A word the doc gives a finding is one its verdict table prints."""
    for n, paragraphs in verdict_paragraphs().items():
        printed = set(re.findall(r"\| (reproduced|not reproduced|contradicted|open|not testable here)(?: †)? \|$",
                                 generated[n], flags=re.MULTILINE))
        said = {w for p in paragraphs for w in re.findall(r"\*(reproduced|not reproduced|contradicted|open|"
                                                            r"not testable here)\*", p, flags=re.IGNORECASE)}
        assert {w.lower() for w in said} <= printed, (n, said, printed)


def test_the_tables_of_a_finding_are_its_generated_tables_line_for_line(generated):
    for n, body in finding_sections().items():
        lines = generated[n].splitlines()
        copied = [line for line in body.splitlines() if line.startswith(("|", "**⚠", "- version"))]
        assert copied, n
        assert [line for line in copied if line not in lines] == [], n


def kept_thoughts():
    """[(run, evaluation title, thought)] of every kept run."""
    out = []
    for path in sorted(KEPT.glob("*/thoughts.json")):
        for title, by_seed in json.loads(path.read_text()).items():
            out.extend((path.parent.name, title, thought) for turns in by_seed.values() for thought in turns)
    return out


def quoted():
    """[(quote, run or None, iteration or None)]: each “...” of the doc, with the run and evaluation named right
    after it as (`run`, iteration N) or , `run`, iteration N."""
    text = re.sub(r"\s+", " ", DOC)
    return [(q.replace("\\|", "|"), run or None, iteration or None) for q, run, iteration in
            re.findall(r"“(.*?)”(?:[\s,(]*`([\w.-]+)`, iteration (\d+))?", text)]


def said_in(quote, thought):
    """QUOTE is in THOUGHT, its pieces around an elision ("...") in order; an empty quote, “”, is an empty thought."""
    if not quote.strip():
        return not thought.strip()
    at = 0
    for piece in (p.strip() for p in quote.split("...")):
        found = thought.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def test_every_quoted_thought_is_in_the_kept_thoughts():
    thoughts, quotes = kept_thoughts(), quoted()
    assert len(quotes) > 20 and sum(run is not None for _, run, _ in quotes) >= 5
    for quote, run, iteration in quotes:
        where = [t for r, title, t in thoughts
                 if run is None or (r == run and title == f"Evaluation at iteration {iteration}")]
        assert any(said_in(quote, t) for t in where), (quote, run, iteration)


def test_the_quote_check_tells_a_thought_of_another_run_or_evaluation():
    thoughts = kept_thoughts()
    assert any(said_in("You can push all boxes to targets.", t) for r, title, t in thoughts
               if r == "sokoban-grpo-seed0" and title == "Evaluation at iteration 40")
    # GRPO seed 1's evaluation thoughts at 20 and 40 are empty: its think block never closed
    assert not any(t for r, title, t in thoughts
                   if r == "sokoban-grpo-seed1" and title in ("Evaluation at iteration 20", "Evaluation at iteration 40"))
    assert not said_in("You can push a box by moving in the direction of the target.",
                       "You can push a box by moving in the same direction.")
    assert said_in("You can push ... same direction.", "You can push a box by moving in the same direction.")
    assert said_in("", "") and not said_in("", "Up")


def test_the_rule_in_the_doc_is_the_rule_findings_py_applies():
    def flat(text):
        return " ".join(text.split())
    assert flat(findings.RULE) in flat(sections()["The decision rule"])


def test_the_protocol_table_counts_the_runs_findings_py_starts():
    rows = {cells[0]: cells for line in sections()["The kept runs, and the protocol that replaces them"].splitlines()
            if line.startswith("| Finding") or line.startswith("| all")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}

    def iterations(name):
        return int([o for o in findings.RUNS[name][1] if o.startswith("train.iterations=")][-1].split("=")[1])
    blocks = {"Finding 1": ("sokoban-starpo-s-seed", "sokoban-ppo-seed", "sokoban-grpo-seed"),
              "Finding 4": ("sokoban-grpo-filter",),
              "Finding 5": ("sokoban-starpo-s-with-kl", "sokoban-starpo-s-no-clip-higher"),
              "Finding 7": ("sokoban-no-think", "frozenlake", "bandit"),
              "Finding 6": ("sokoban-5-actions", "sokoban-n4", "sokoban-n16"),
              "all": ("",)}
    assert list(rows) == list(blocks)  # in the order `all` runs them
    for block, prefixes in blocks.items():
        names = [n for n in findings.RUNS if n.startswith(prefixes)]
        assert rows[block][2:4] == [str(len(names)), f"{sum(map(iterations, names)):,}"], block
    order = list(findings.RUNS)
    firsts = [next(k for k, n in enumerate(order) if n.startswith(blocks[b])) for b in list(blocks)[:-1]]
    assert firsts == sorted(firsts)

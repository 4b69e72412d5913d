"""The repository speaks of itself: no reference a reader of it cannot resolve (numbers of seeds,
issues, stops or waves of a tracker outside it, or that tracker's names for its documents) in any
tracked text file. Sources are cited by title and section ("the Dataflow paper, section 2.3",
"Flink's time design draft"), work by the repository's own terms (a commit, a test, a doc section)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: what a reader of the repository cannot resolve
UNRESOLVABLE = re.compile(
    r"\b(?:seed|issue|stop|wave)s? ?#?\d+"  # a tracker's numbers
    r"|\bitems? \d+\b"  # an item of a tracker's list
    r"|\b(?:the|this) (?:issue|brief|wave)\b|\bissue's\b"  # a tracker's document
    r"|\b(?:the )?card's\b|\bthe (?:design )?card\b"  # the project brief's name for its example
    r"|\bclosing notes?\b",
    re.IGNORECASE)
#: exact lines allowed to match, by file (none yet: add the line itself, with why, if one must)
ALLOWED: dict[str, set[str]] = {}


def tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = []
    for name in filter(None, out.split("\0")):
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 4 << 20 or path == Path(__file__).resolve():
            continue  # this file holds the examples the pattern must find
        files.append(path)
    return files


def offending_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # binary
        return []
    allowed = ALLOWED.get(path.relative_to(ROOT).as_posix(), set())
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if UNRESOLVABLE.search(line) and line.strip() not in allowed]


def test_no_reference_a_reader_cannot_resolve():
    found = [line for path in tracked_text_files() for line in offending_lines(path)]
    assert not found, ("references a reader of the repository cannot resolve; cite the source by title "
                       "and section, or use the repository's own terms:\n" + "\n".join(found))


@pytest.mark.parametrize("text", [
    "a pipeline has one time domain (seed 003)", "fixed in issue 17", "see Issue #31", "as of stop 25",
    "this wave adds kill -9 tests", "Item 2: a database", "the issue's probe", "the card's query",
    "measured in the closing notes"])
def test_the_pattern_finds_each_kind(text):
    assert UNRESOLVABLE.search(text)


@pytest.mark.parametrize("text", [
    "the Dataflow paper, section 2.3", "the sessions 5, 7 and 10 of the paper's figure 14",
    "SPARK-18513's \"known issue\"", "Spark's session 6.377 s", "seed=3", "events(20_000, seed=4)",
    "stop the query", "the README's first query"])
def test_the_pattern_leaves_the_repository_s_own_terms(text):
    assert not UNRESOLVABLE.search(text)

"""The repository speaks of itself: no reference a reader of it cannot resolve (numbers of seeds,
issues, stops or waves of a tracker outside it, or that tracker's names for its documents) in any
tracked text file. Sources are cited by title and section ("the Dataflow paper, section 2.3",
"Flink's time design draft"), work by the repository's own terms (a commit, a test, a doc section)."""
from __future__ import annotations

import fnmatch
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
    """The repository's files: git's tracked and untracked-but-not-ignored ones, or, in a copy
    without .git (as CI tests one), every file .gitignore does not exclude."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
        names = [n for n in names if not ignored(n)]
    here = Path(__file__).resolve()
    return [ROOT / n for n in names
            # this file holds the examples the pattern must find
            if (ROOT / n).is_file() and (ROOT / n).stat().st_size <= 4 << 20 and (ROOT / n).resolve() != here]


def ignored(name: str) -> bool:
    """Whether .gitignore's patterns (the simple forms it uses: `dir/`, `/dir/`, `*.ext`, `a/b/*.tmp`)
    exclude the relative path `name`."""
    parts = name.split("/")
    for pattern in (ROOT / ".gitignore").read_text().splitlines():
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#"):
            continue
        anchored, bare = pattern.startswith("/") or "/" in pattern.strip("/"), pattern.strip("/")
        if pattern.endswith("/"):  # a directory: anchored, a path from the root; else a name anywhere
            folders = ["/".join(parts[:i]) for i in range(1, len(parts))] if anchored else parts[:-1]
            if any(fnmatch.fnmatch(folder, bare) for folder in folders):
                return True
        elif fnmatch.fnmatch(name if anchored else parts[-1], bare):
            return True
    return False


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
    # assembled, so that this file holds no such reference itself
    "a pipeline has one time domain (se" + "ed 003)", "fixed in iss" + "ue 17", "see Iss" + "ue #31",
    "as of st" + "op 25",
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


def test_a_copy_without_git_is_read_as_git_would_list_it():
    assert ignored("benchmarks/data/events.parquet") and ignored("sqlflow/__pycache__/x.pyc")
    assert ignored("benchmarks/results/compare.json.tmp") and ignored("spark-warehouse/t/part-0")
    assert ignored("tmp/x") and not ignored("sqlflow/tmp.py") and not ignored("benchmarks/results/compare.json")
    assert not ignored("docs/dev/streaming-performance.md")

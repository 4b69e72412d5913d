"""The README's Python examples of "Using it" (bounded data, the API, the stream), run in order in
one namespace on the shared session, as a reader pastes them into one Python prompt. The
PostgreSQL, magic and plot examples that follow have tests of their own (tests/postgres/test_docs.py,
tests/interfaces/test_magic.py, tests/interfaces/test_plot_layout.py)."""
from __future__ import annotations

import re
from contextlib import redirect_stdout
from io import StringIO

import pytest

#: the README's first Python blocks, up to and including the stream's
STREAM_BLOCK = "live_clicks"


@pytest.fixture
def readme_blocks(repo_root) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", (repo_root / "README.md").read_text(encoding="utf-8"), re.S)
    last = next(i for i, b in enumerate(blocks) if STREAM_BLOCK in b)
    return blocks[:last + 1]


def test_the_python_examples_run_in_order_and_print_what_the_readme_says(readme_blocks, spark_undone, tmp_path):
    namespace: dict = {}
    out = StringIO()
    with redirect_stdout(out):
        for block in readme_blocks:
            exec(compile(block.replace("/tmp/sqlflow-", f"{tmp_path}/sqlflow-"), "README.md", "exec"), namespace)
    printed = out.getvalue()
    assert namespace["spark"] is spark_undone  # local_session() gives the running session
    assert "path: engine" in printed and "buckets: 8 (spark.sqlflow.buckets)" in printed
    assert "False\n" in printed  # statement.is_plain
    metrics = namespace["streaming"].query_metrics(namespace["query"])
    assert (metrics["engine_rows"], metrics["panes"], metrics["retractions"]) == (4, 3, 0)
    rows = spark_undone.read.parquet(f"{tmp_path}/sqlflow-out").orderBy("window_start", "user_id").collect()
    assert [(r.user_id, r.total, r.window_start.strftime("%H:%M"), r.window_end.strftime("%H:%M"), r.pane_index,
             r.pane_timing, r.is_last) for r in rows] == [
        ("u1", 7.5, "08:00", "08:01", 0, "EARLY", True),
        ("u2", 9.0, "08:00", "08:01", 0, "EARLY", True),
        ("u1", 1.0, "08:02", "08:03", 0, "EARLY", False),
    ]

"""The notebooks in notebooks/ run top to bottom; any failing cell fails.

CI runs every code cell in order in this process's IPython shell, on the shared test session
(`test_cells_run_in_process`); the release tier (`--release`) runs each notebook in a real kernel
with its own Spark session (nbclient, `test_runs_top_to_bottom`). Notebooks are committed without
outputs (checked here too): their outputs are made by running them, here or by a reader.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert any("quickstart" in n for n in names)
    assert any("sessions" in n for n in names)
    assert any("streaming" in n for n in names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name}: strip outputs before committing"


@pytest.mark.slow
@pytest.mark.release
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_runs_top_to_bottom(path, tmp_path, stderr_lines):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute()  # raises CellExecutionError, with the failing cell and its error
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # keep the executed notebook next to the test's other artefacts, for a look when debugging
    nbformat.write(nb, tmp_path / path.name)
    code = [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()]
    assert code and all(cell.execution_count for cell in code), f"{path.name}: a cell did not run"
    errors = [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}" if errors else ""
    assert any(cell.outputs for cell in code), f"{path.name}: no cell showed anything"
    # Spark's chatter about sqlflow's streams (its state server, the operator's Python workers)
    # and the stack traces of a failure stay out of the cells: nothing on stderr but Spark's start
    stderr = [line for cell in code for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"
              for line in stderr_lines(o.text)]
    assert stderr == [], f"{path.name}: {len(stderr)} lines on stderr, the first: {stderr[:3]}"


@pytest.fixture
def _notebook_undone(spark_undone, ipython, tmp_path, monkeypatch):
    """What a notebook run in this process changes, put back after it: its names in the shell, and
    the session's settings and temporary views (`spark_undone`: `sqlflow.local_session` in a
    notebook's first cell returns the shared session and sets its defaults on it). Files a
    notebook makes in temporary directories go under the test's tmp_path; matplotlib draws off
    screen."""
    import tempfile

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    names = dict(ipython.user_ns)
    yield
    for name in set(ipython.user_ns) - set(names):
        del ipython.user_ns[name]
    ipython.user_ns.update(names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_cells_run_in_process(path, ipython, monkeypatch, _notebook_undone, stderr_lines):
    """Every code cell, in order, in this process's IPython shell on the shared session, from the
    notebook's directory: each runs without error, and the notebook shows something."""
    import nbformat
    from IPython.utils.capture import capture_output

    nb = nbformat.read(path, as_version=4)
    code = [(i, cell.source) for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.source.strip()]
    assert code, f"{path.name}: no code cell"
    monkeypatch.chdir(path.parent)
    shown = []
    for i, source in code:
        with capture_output() as captured:
            result = ipython.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        assert result.success, f"{path.name}, cell {i}: {type(error).__name__}: {error}\n{captured.stdout}"
        shown.append(captured)
    assert any(c.stdout or c.outputs for c in shown), f"{path.name}: no cell showed anything"
    # a cell's own stderr (Python's, the JVM's chatter passed through sqlflow's filter): nothing
    stderr = [line for c in shown for line in stderr_lines(c.stderr)]
    assert stderr == [], f"{path.name}: {len(stderr)} lines on stderr, the first: {stderr[:3]}"

"""What a `%%sqlflow` cell shows: result tables, text, and live views of streaming queries.

Tables are fetched lazily and only `limit` rows (+1, to say whether there are more); a stream's
view is one display, refreshed in place as micro-batches arrive.
"""
from __future__ import annotations

from html import escape
from typing import Any

from .statements import stream_error


class Text:
    """Text shown as is (explain and transpile output)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<pre>{escape(self.text)}</pre>"


class ResultTable:
    """A Spark DataFrame shown as a table of its first `limit` rows (only those are fetched)."""

    def __init__(self, dataframe, limit: int) -> None:
        self.dataframe = dataframe
        self.limit = limit
        self._head: tuple[Any, bool] | None = None

    def _fetch(self):
        if self._head is None:
            pdf = self.dataframe.limit(self.limit + 1).toPandas()
            self._head = (pdf.head(self.limit), len(pdf) > self.limit)
        return self._head

    def toPandas(self):
        return self.dataframe.toPandas()

    def plot(self, **kwargs):
        from ..diagram import plot

        return plot(self.dataframe, **kwargs)

    def _note(self, more: bool, shown: int) -> str:
        if more:
            first = "the first row" if shown == 1 else f"the first {shown} rows"
            return (f"showing {first}; more rows not shown "
                    "(raise --limit, or keep the DataFrame with -o NAME)")
        return f"{shown} row{'s' if shown != 1 else ''}"

    def __repr__(self) -> str:
        head, more = self._fetch()
        return _text_table(head) + "\n" + self._note(more, len(head))

    def _repr_html_(self) -> str:
        head, more = self._fetch()
        return _html_table(head) + f"<p><small>{escape(self._note(more, len(head)))}</small></p>"


class Watcher:
    """Shows the streaming query a statement starts, refreshed in place (one display per cell)."""

    def __init__(self, spark, limit: int, reader=None) -> None:
        self.spark, self.limit, self.reader = spark, limit, reader
        self.query = None
        self.note = ""
        self.handle = None
        self._before = {str(q.id) for q in spark.streams.active}

    def tick(self) -> None:
        """While the statement runs (a streaming INSERT with availableNow blocks): pick up the
        query it started and show its progress."""
        if self.query is None:
            new = [q for q in self.spark.streams.active if str(q.id) not in self._before]
            if not new:
                return
            self.query = new[0]
        self.show()

    def follow(self, query) -> "Watcher":
        self.query = query
        return self

    def rows(self):
        if self.reader is None:
            return None
        try:
            return self.reader()
        except Exception:  # noqa: BLE001 - e.g. no file written yet
            return None

    def show(self) -> None:
        from IPython.display import display

        view = StreamView(self.query, self.rows(), self.limit, self.note)
        if self.handle is None:
            self.handle = display(view, display_id=True)
        else:
            self.handle.update(view)


class StreamView:
    """A streaming query's state and the last rows it wrote."""

    def __init__(self, query, rows, limit: int, note: str = "") -> None:
        self.query, self.rows, self.limit, self.note = query, rows, limit, note
        self._state: tuple[Any, str] | None = None

    def _compute(self):
        if self._state is None:
            import pandas as pd

            frame, total = pd.DataFrame(), None
            if self.rows is not None:
                total = self.rows.count()
                tail = self.rows.tail(self.limit) if total else []
                frame = pd.DataFrame([r.asDict() for r in tail], columns=self.rows.columns)
            progress = self.query.lastProgress or {}
            failure = None if self.query.isActive else stream_error(self.query)
            line = "running" if self.query.isActive else "failed" if failure is not None else "finished"
            if total is not None:
                line += f": {total} pane row{'s' if total != 1 else ''}"
            line += f", batch {progress.get('batchId', '-')}"
            if total is not None and total > self.limit:
                line += f"; the last {self.limit} shown"
            if self.note:
                line += f"; {self.note}"
            if failure is not None:
                line += f"\n{failure.message}"
            self._state = (frame, line)
        return self._state

    def __repr__(self) -> str:
        frame, line = self._compute()
        return (_text_table(frame) + "\n" if len(frame.columns) else "") + line

    def _repr_html_(self) -> str:
        frame, line = self._compute()
        return (_html_table(frame) if len(frame.columns) else "") + f"<p><small>{escape(line).replace(chr(10), '<br>')}</small></p>"


def _text_table(frame) -> str:
    if frame.empty:
        return "(no rows)" if len(frame.columns) else ""
    return frame.to_string(index=False, na_rep="NULL")


def _html_table(frame) -> str:
    return frame.to_html(index=False, na_rep="NULL", escape=True, border=0, classes="sqlflow")



"""Rows of one micro-batch combined per key and window before the streaming operator.

Runs on Spark's Python workers (`mapInArrow`, before the shuffle to the operator). Every row of a
micro-batch arrives at the same processing time, so for windows that never overlap (FIXED) and
triggers that never count elements (the default and early PERIOD firings), the rows of one key and
one window are interchangeable: the engine gives them the same panes, drops them together, and
needs only their partial aggregates (COUNT, SUM of exact types, MIN, MAX; see
sqlflow/spark/streaming/combine.py, `combinable`). The element stands for `weight` rows, which the
operator's metrics count. pyarrow groups the batch: no Python work per row.

>>> import pyarrow as pa
>>> batch = pa.record_batch({"k": [1, 1, 2, None, None], "t": [5, 7, 5, 1, None], "s": [0, 0, 0, 0, None],
...                          "v": [10, None, 3, 4, 6]})
>>> job = Combine(group=("k", "s"), time="t", parts=(("n", "count_all", None), ("total", "sum", "v"),
...               ("top", "max", "v")), weight="w")
>>> out = pa.Table.from_batches(list(job(iter([batch])))).sort_by([("k", "ascending"), ("t", "ascending")])
>>> out.to_pydict()
{'k': [1, 2, None, None], 's': [0, 0, 0, None], 't': [5, 5, 1, None], 'n': [2, 1, 1, 1], 'total': [10, 3, 4, 6], 'top': [10, 3, 4, 6], 'w': [2, 1, 1, 1]}

A batch whose sums could leave BIGINT stays row by row (pyarrow's sum would wrap around where
Spark's ANSI mode fails; the engine tells the overflow from the rows):

>>> big = pa.record_batch({"k": [1, 1], "t": [5, 7], "s": [0, 0], "v": [2**62, 2**62]})
>>> pa.Table.from_batches(list(job(iter([big])))).to_pydict()["total"]
[4611686018427387904, 4611686018427387904]

`latest` also keeps the largest event time (Spark's watermark is the max over its column):

>>> job = Combine(group=("k", "s"), time="t", parts=(), weight="w", latest="last")
>>> pa.Table.from_batches(list(job(iter([batch])))).sort_by([("k", "ascending"), ("t", "ascending")]).to_pydict()
{'k': [1, 2, None, None], 's': [0, 0, 0, None], 't': [5, 5, 1, None], 'last': [7, 5, 1, None], 'w': [2, 1, 1, 1]}
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from sqlflow.engine.exact import bigint_sums_fit
from sqlflow.udfs.worker_gc import freeze_imports


#: pyarrow's aggregate for the partial of each aggregate that combines (the engine's aggregate over
#: the partials: `sqlflow.engine.COMBINING`)
ARROW_PARTIAL = {"count_star": "count_all", "count": "count", "sum": "sum", "min": "min", "max": "max"}


def window_starts(times, size: int, offset: int):
    """The start of the FIXED window (`size`, `offset`, us) of each event time, as Spark computes it
    (`t - pmod(t - offset, size)`; NULL stays NULL).

    >>> window_starts(pa.array([-1, 0, 59, 60, 125, None]), 60, 0).to_pylist()
    [-60, 0, 0, 60, 120, None]
    >>> window_starts(pa.array([5, 25]), 60, 20).to_pylist()
    [-40, 20]
    """
    shifted = pc.subtract(times, offset)
    rest = pc.subtract(shifted, pc.multiply(pc.divide(shifted, size), size))  # the sign of C's remainder
    rest = pc.if_else(pc.less(rest, 0), pc.add(rest, size), rest)
    return pc.subtract(times, rest)


@dataclass(frozen=True)
class Combine:
    group: tuple  # the columns that identify (key, window): key columns and the window's start
    time: str  # the event-time column: the element keeps the smallest
    parts: tuple  # (output column, "count_all" | "count" | "sum" | "min" | "max", input column or None)
    weight: str  # output column: how many rows the element stands for
    latest: str | None = None  # output column: the largest event time (for Spark's watermark)

    def __call__(self, batches):
        freeze_imports()
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        if not self._exact(table):
            yield from self._single(table).to_batches()
            return
        specs: list[tuple] = [(self.time, "min"), ([], "count_all")]
        names = [self.time, self.weight]
        if self.latest is not None:
            specs.append((self.time, "max"))
            names.append(self.latest)
        for out, fn, column in self.parts:
            if fn == "count_all":
                specs.append(([], "count_all"))
            elif fn == "count":
                specs.append((column, "count", pc.CountOptions(mode="only_valid")))
            else:
                specs.append((column, fn))
            names.append(out)
        grouped = table.group_by(list(self.group), use_threads=False).aggregate(specs)
        n = len(self.group)
        if grouped.column_names[:n] == list(self.group):  # the group columns first (pyarrow >= 13)
            keys, values = grouped.columns[:n], grouped.columns[n:]
        else:
            keys, values = grouped.columns[len(specs):], grouped.columns[:len(specs)]
        keys = dict(zip(self.group, keys))
        cols = {**{g: keys[g] for g in self.group if g not in names}, **dict(zip(names, values))}
        order = [c for c in cols if c != self.weight] + [self.weight]
        out = pa.table({c: cols[c] for c in order})
        yield from out.to_batches()

    def _exact(self, table) -> bool:
        """Whether pyarrow's partial sums are exact: no sum of a batch's values can leave int64
        (it would wrap around, and the engine could no longer tell Spark's overflow)."""
        for _, fn, column in self.parts:
            if fn == "sum":
                values = table.column(column)
                if values.null_count < len(values) and not bigint_sums_fit(values.drop_null().to_numpy()):
                    return False
        return True

    def _single(self, table):
        """Every row its own element (weight 1): for a batch whose values are too large to sum."""
        n = table.num_rows
        cols = {g: table.column(g) for g in self.group if g not in (self.time, self.weight)}
        cols[self.time] = table.column(self.time)
        if self.latest is not None:
            cols[self.latest] = table.column(self.time)
        for out, fn, column in self.parts:
            if fn == "count_all":
                cols[out] = pa.repeat(1, n).cast(pa.int64())
            elif fn == "count":
                cols[out] = pc.cast(table.column(column).is_valid(), pa.int64())
            else:
                cols[out] = table.column(column)
        cols[self.weight] = pa.repeat(1, n).cast(pa.int64())
        return pa.table(cols)


def batch_partials(table: pa.Table, plan) -> pa.Table:
    """A micro-batch's rows (`table`: the owned-sink executor's input, with its bucket and kind
    columns) as partial aggregates per bucket, kind, key and FIXED window, with their weight and
    earliest and latest event time: what `owned.partials_sql` has Spark compute, computed with
    pyarrow for the driver-local step (docs/streaming.md 3.0). A batch whose sums could leave
    BIGINT stays row by row (weight 1, `Combine`), which the engine handles exactly.

    >>> from sqlflow import ast
    >>> from sqlflow.engine import Aggregate, EnginePlan
    >>> w = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(60))), None, ast.AllowedLateness(ast.Duration(0)),
    ...                   ast.Emit(ast.AccumulationMode.DISCARDING))
    >>> plan = EnginePlan(w, (Aggregate("sum", "v", "total"),), keys=("k",))
    >>> rows = pa.table({"k": ["a", "a", "a"], "__sqlflow_et": [1, 2, 61], "v": [1, 2, 3],
    ...                  "__sqlflow_bucket": [0, 0, 0], "__sqlflow_kind": [0, 0, 0]})
    >>> batch_partials(rows, plan).sort_by("__sqlflow_et").to_pydict()["__sqlflow_part0"]
    [3, 3]
    """
    from sqlflow.columns import BUCKET, EVENT_TIME, KIND, LATEST, PREFIX, WEIGHT, part_column

    if table.num_rows == 0:  # no rows: nothing to combine (the buckets are stepped all the same)
        return table
    window = plan.window
    start = PREFIX + "start"
    starts = window_starts(table.column(EVENT_TIME), window.size.micros, window.offset.micros)
    parts = tuple((part_column(j), ARROW_PARTIAL[a.kind], a.column) for j, a in enumerate(plan.aggregates))
    job = Combine(group=(BUCKET, KIND, *plan.keys, start), time=EVENT_TIME, parts=parts, weight=WEIGHT,
                  latest=LATEST)
    out = pa.Table.from_batches(list(job(iter(table.append_column(start, starts).to_batches()))))
    return out.drop_columns([start])

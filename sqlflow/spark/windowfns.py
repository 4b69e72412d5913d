"""Window assignment as SQL functions: `sqlflow.register(spark)`.

After `sqlflow.register(spark)`, plain Spark SQL can call (each returns
`array<struct<start: timestamp, end: timestamp>>`, NULL for a NULL time; explode it to get one
row per window):

| function | windows of `ts` |
|---|---|
| `sqlflow_fixed(ts, size [, offset])` | the tumbling window |
| `sqlflow_sliding(ts, size, period [, offset])` | every sliding window containing ts |
| `sqlflow_cumulate(ts, step, size [, offset])` | every cumulating window containing ts (Flink's CUMULATE) |
| `sqlflow_window(name, ts [, arg, ...])` | a window function registered with `sqlflow.register_window_fn` |

Durations are strings in sqlflow's form (`'5m'`, `'1h'`, `'500ms'`), Spark's (`'5 minutes'`) or
INTERVAL values; they must be the same for every row. Windows are half-open and aligned on the
UTC epoch, exactly as sqlflow's engine assigns them (docs/semantics.md, 2). A merging custom
window function returns its unmerged windows: merging needs an aggregation, which
`WINDOW <name>(...)` in a windowed SELECT does.

    SELECT w.start, w.end, COUNT(*) AS clicks
    FROM clicks LATERAL VIEW explode(sqlflow_sliding(ts, '10m', '5m')) AS w
    GROUP BY w.start, w.end

Custom window functions are captured when `register` runs: register them first. Their arguments
reach the class as `WINDOW name(...)` passes them: an INTERVAL as integer microseconds (like a
duration such as `15m` in the clause), numbers and strings as they are; so
`sqlflow_window('tumbling', ts, INTERVAL 15 MINUTES)` means `WINDOW tumbling(15m)`.
"""
from __future__ import annotations

import pandas as pd

RETURN_TYPE = "array<struct<start:timestamp,end:timestamp>>"
NAMES = ("sqlflow_fixed", "sqlflow_sliding", "sqlflow_cumulate", "sqlflow_window")


def register_window_udfs(spark) -> list[str]:
    """Register the window-assignment UDFs in `spark`; returns their names."""
    from pyspark.sql.functions import pandas_udf

    from ..engine import CumulateWindows, CustomWindows, FixedWindows, SlidingWindows, registered_window_fns

    from pyspark import cloudpickle

    tz = spark.conf.get("spark.sql.session.timeZone")
    # the executors have no registry of the driver's window functions: ship each class pickled on
    # its own, unpickled only when used (one class an executor cannot import spoils no other)
    custom = {}
    for name, cls in registered_window_fns().items():
        try:
            custom[name] = cloudpickle.dumps(cls)
        except Exception:  # noqa: BLE001  (not picklable: usable only where it was defined)
            continue

    def assigner(make):
        def assign(ts: pd.Series, *params: pd.Series) -> pd.Series:
            from sqlflow.udfs.assign import constant, windows_of

            values = [constant(p, f"argument {i + 2}") for i, p in enumerate(params)]
            return windows_of(make(*values), ts, tz)
        return assign

    def durations(*values):
        from sqlflow.udfs.assign import duration_micros

        return [duration_micros(v) for v in values]

    def fixed(size, offset="0s"):
        return FixedWindows(*durations(size, offset))

    def sliding(size, period, offset="0s"):
        return SlidingWindows(*durations(size, period, offset))

    def cumulate(step, size, offset="0s"):
        return CumulateWindows(*durations(step, size, offset))

    def window(name: pd.Series, ts: pd.Series, *params: pd.Series) -> pd.Series:
        from sqlflow.udfs.assign import constant, windows_of

        fn_name = str(constant(name, "the window function's name"))
        pickled = custom.get(fn_name.lower())
        cls = None if pickled is None else __import__("pickle").loads(pickled)
        if cls is None:
            raise ValueError(f"unknown window function {fn_name}: register it with sqlflow.register_window_fn "
                             "before sqlflow.register(spark)")
        args = [_as_window_fn_arg(constant(p, f"argument {i + 3}")) for i, p in enumerate(params)]
        return windows_of(CustomWindows(fn_name, cls(*args)), ts, tz)

    functions = {
        "sqlflow_fixed": assigner(fixed),
        "sqlflow_sliding": assigner(sliding),
        "sqlflow_cumulate": assigner(cumulate),
        "sqlflow_window": window,
    }
    for name, fn in functions.items():
        fn.__name__ = name
        spark.udf.register(name, pandas_udf(fn, RETURN_TYPE))  # type: ignore[call-overload]
    return list(functions)


def _as_window_fn_arg(value):
    """An argument of `sqlflow_window` as `WINDOW name(...)` passes it: intervals (Spark's day-time
    INTERVAL arrives as a timedelta) become integer microseconds, anything else is unchanged.

    >>> import datetime
    >>> _as_window_fn_arg(datetime.timedelta(minutes=15)), _as_window_fn_arg("15m"), _as_window_fn_arg(3)
    (900000000, '15m', 3)
    """
    import datetime

    import numpy as np

    from sqlflow.udfs.assign import duration_micros

    return duration_micros(value) if isinstance(value, (np.timedelta64, datetime.timedelta)) else value

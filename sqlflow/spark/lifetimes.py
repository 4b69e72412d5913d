"""How long sqlflow's temporary views live: until Spark no longer needs them.

`sqlflow.sql` registers temporary views for its stages (`__sqlflow_panes_*`, `__sqlflow_stream_*`)
and hands Spark a query over them. Spark Classic analyses that query when `spark.sql` returns, so
the views are dropped at once. A Spark Connect DataFrame is a plan that the server analyses, by
view name, each time it runs (a stream: when it starts), so there the views must live as long as
the result may still run: they are dropped once the result's plan is garbage (every DataFrame
derived from the result holds that plan), at the next `sqlflow.sql` on the same session, never
from the garbage collector (which may run inside another call to the server).
"""
from __future__ import annotations

import threading
import weakref

_lock = threading.Lock()
#: (session, view names) whose result is garbage: dropped by the next `drop_unused(session)`
_unused: list[tuple[object, tuple[str, ...]]] = []


def is_connect(spark) -> bool:
    """Whether `spark` is a Spark Connect session (a client of a server that analyses lazily)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def keep_until_unused(spark, result, views) -> None:
    """Keep `views` until the DataFrame `result` and every DataFrame derived from it are garbage."""
    names = tuple(views)
    if not names:
        return
    plan = getattr(result, "_plan", result)
    weakref.finalize(plan, _release, spark, names)


def _release(spark, names: tuple[str, ...]) -> None:
    with _lock:
        _unused.append((spark, names))


def drop_unused(spark) -> None:
    """Drop the views of this session's results that are garbage now."""
    with _lock:
        mine = [names for owner, names in _unused if owner is spark]
        _unused[:] = [(owner, names) for owner, names in _unused if owner is not spark]
    for names in mine:
        for name in names:
            try:
                spark.catalog.dropTempView(name)
            except Exception:  # noqa: BLE001  (already gone, or the session stopped)
                pass

"""Heartbeat rows of the streaming operator's input (udfs/streaming.py): every input partition of
a micro-batch with data tells every bucket its max event time (per source, with several
watermarked inputs), so that every bucket runs in every batch with data and knows the watermark.
"""
from __future__ import annotations

from sqlflow.columns import BUCKET, EVENT_TIME, HEARTBEAT, KIND, SOURCE
from sqlflow.udfs import source_watermarks
from sqlflow.udfs.worker_gc import freeze_imports


def heartbeats(n_buckets: int, fill: dict | None = None, time_column: str | None = None, n_sources: int = 0):
    """mapInArrow function: a partition's batches as they are, then one heartbeat row per bucket
    with the partition's max event time (of `time_column`, default the event time) in the
    event-time column, the values of `fill` in its columns and NULL elsewhere.

    One pass over the input: Spark reads the source once, so its input row counts and rates are
    the rows' (a second scan for the heartbeats counted every row twice). An empty partition adds
    nothing: a batch with data has a non-empty partition, which reaches every bucket.

    `fill` keeps the masked BIGINT columns (value, NULL mask) free of NULLs: a NULL in an Arrow
    batch makes pandas read the whole int64 column as float64, which merges keys beyond 2^53 of
    the data rows sharing the batch.

    With `n_sources` (several watermarked inputs, column SOURCE), one heartbeat per bucket and
    source with rows in the partition, carrying that source's max.

    >>> import pyarrow as pa
    >>> from sqlflow.columns import DATA
    >>> batch = pa.RecordBatch.from_pydict({BUCKET: [1, 0], KIND: [DATA, DATA], EVENT_TIME: [5, None],
    ...                                     "k": ["x", "y"], "b": [7, 8]})
    >>> out = list(heartbeats(2, {"b": 0})(iter([batch, batch.slice(0, 0)])))
    >>> [b.num_rows for b in out]
    [2, 0, 2]
    >>> out[-1].to_pydict()
    {'__sqlflow_bucket': [0, 1], '__sqlflow_kind': [4, 4], '__sqlflow_et': [5, 5], 'k': [None, None], 'b': [0, 0]}
    >>> list(heartbeats(1)(iter([])))
    []
    >>> two = pa.RecordBatch.from_pydict({BUCKET: [0, 0, 0], KIND: [DATA] * 3, EVENT_TIME: [5, 9, 7],
    ...                                   SOURCE: [1, 1, 0]})
    >>> out = list(heartbeats(1, n_sources=3)(iter([two])))[-1].to_pydict()
    >>> out[SOURCE], out[EVENT_TIME]
    ([0, 1], [7, 9])
    """
    fill = fill or {}

    def emit(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        freeze_imports()
        top, schema = None, None
        tops = [None] * n_sources
        for batch in batches:
            schema = batch.schema
            if n_sources:
                tops = [b if a is None else a if b is None else max(a, b)
                        for a, b in zip(tops, source_watermarks.source_maxima(batch, time_column or EVENT_TIME, n_sources))]
            elif batch.num_rows:
                latest = pc.max(batch.column(time_column or EVENT_TIME)).as_py()
                if latest is not None:
                    top = latest if top is None else max(top, latest)
            yield batch
        if schema is None:
            return
        beats = [(None, top)] if not n_sources else [(s, t) for s, t in enumerate(tops) if t is not None]
        if not beats:
            return
        n = n_buckets * len(beats)
        values = {BUCKET: list(range(n_buckets)) * len(beats), KIND: [HEARTBEAT] * n,
                  EVENT_TIME: [t for _, t in beats for _ in range(n_buckets)]}
        if n_sources:
            values[SOURCE] = [s for s, _ in beats for _ in range(n_buckets)]
        columns = [pa.array(values.get(f.name, [fill.get(f.name)] * n), type=f.type) for f in schema]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)

    return emit

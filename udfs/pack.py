"""A micro-batch's rows packed per bucket before the streaming operator, and unpacked inside it.

PySpark's transformWithStateInPandas hands its input to Python row by row: a namedtuple per row,
then a pandas frame built from them (pyspark/worker.py), several microseconds per row, more than
the engine spends on it. So before the shuffle to the operator (`mapInArrow`, on the executors),
`Pack` turns each input partition's rows into one row per bucket: the bucket, the kind PACKED,
the largest event time and watermark-column value of its rows (Spark's watermark is the max over
the column, so it is unchanged), and the rows themselves as an Arrow IPC stream in a binary
column. The operator receives a few rows per bucket and `unpack` gives back the rows as the pandas
frame the engine path uses (`bucket.arrow_frame`: BIGINTs with NULLs exact). Only plain column
types travel this way (integers, floating point, strings, booleans), whose pandas form does not
depend on the conversion.

>>> import pyarrow as pa
>>> rows = pa.record_batch({"b": pa.array([1, 0, 1], pa.int32()), "k": pa.array([0, 0, 0], pa.int32()),
...                         "t": [5, 7, 3], "w": [5, 7, 3], "x": ["a", None, "c"]})
>>> job = Pack(bucket="b", kind="k", time="t", columns=("b", "k", "t", "w"), latest=("w",), packed=3)
>>> out = pa.Table.from_batches(list(job(iter([rows]))))
>>> out.column("b").to_pylist(), out.column("k").to_pylist(), out.column("t").to_pylist(), out.column("w").to_pylist()
([0, 1], [3, 3], [7, 5], [7, 5])
>>> unpack(out.column(PACK).to_pylist()).to_dict("list")
{'t': [7, 5, 3], 'x': [None, 'a', 'c']}

With `heartbeats`, the same pass then tells every bucket the partition's largest event time
(udfs/heartbeats.py; here 3 buckets, kind 4), NULL in the other columns:

>>> beat = Pack(bucket="b", kind="k", time="t", columns=("b", "k", "t", "w"), latest=("w",), packed=3,
...             heartbeats=3, heartbeat=4, beat_time="w")
>>> out = pa.Table.from_batches(list(beat(iter([rows]))))
>>> out.drop_columns([PACK]).to_pydict()
{'b': [0, 1, 0, 1, 2], 'k': [3, 3, 4, 4, 4], 't': [7, 5, 7, 7, 7], 'w': [7, 5, None, None, None]}
>>> out.column(PACK).null_count
3

A BIGINT with NULLs comes back exact (pandas alone would make it float64):

>>> rows = pa.record_batch({"b": pa.array([0, 0], pa.int32()), "k": pa.array([0, 0], pa.int32()),
...                         "t": [1, 2], "w": [1, 2], "v": pa.array([2**53 + 1, None], pa.int64())})
>>> unpack(pa.Table.from_batches(list(job(iter([rows])))).column(PACK).to_pylist())["v"].tolist()
[9007199254740993, <NA>]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sqlflow.columns import PACK
from sqlflow.udfs.worker_gc import freeze_imports

if TYPE_CHECKING:
    from sqlflow.udfs.micro_batch_combine import Combine


@dataclass(frozen=True)
class Pack:
    """The `mapInArrow` function: one output row per bucket of each input partition, with
    `columns` (`bucket`, `kind`, `time` and the `latest` columns: those of the input, typed as
    there) and PACK. `time` and `latest` hold the largest value of the bucket's rows; PACK holds
    every input column but `bucket`, `kind` and `latest`."""

    bucket: str
    kind: str
    time: str
    columns: tuple
    latest: tuple  # columns whose largest value the packed row keeps (Spark's watermark column)
    packed: int  # the kind of a packed row
    large_binary: bool = False
    #: heartbeats in the same pass (udfs/heartbeats.py): after a partition's packed rows, one row
    #: per bucket 0..heartbeats-1 of kind `heartbeat` carrying the partition's largest value of
    #: `beat_time` in `time`, NULL elsewhere; 0: none
    heartbeats: int = 0
    heartbeat: int = 0
    beat_time: str | None = None

    def __call__(self, batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        freeze_imports()
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        bucket = table.column(self.bucket).to_numpy()
        order = np.argsort(bucket, kind="stable")
        cuts = np.flatnonzero(np.r_[True, bucket[order][1:] != bucket[order][:-1], True])
        keep = [c for c in table.column_names if c not in (self.bucket, self.kind, *self.latest)]
        rows = table.select(keep).take(pa.array(order))
        blobs: list = []
        tops: dict[str, list] = {c: [] for c in (self.time, *self.latest)}
        for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            part = rows.slice(lo, hi - lo)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, part.schema) as writer:
                writer.write_table(part)
            blobs.append(sink.getvalue().to_pybytes())
            for c in tops:
                tops[c].append(pc.max(table.column(c).take(pa.array(order[lo:hi]))))
        n = len(blobs)
        out = {}
        for name in self.columns:
            field = table.schema.field(name)
            if name == self.bucket:
                out[name] = pa.array(bucket[order][cuts[:-1]], field.type)
            elif name == self.kind:
                out[name] = pa.array(np.full(n, self.packed), field.type)
            else:
                out[name] = pa.array([s.as_py() for s in tops[name]], field.type)
        out[PACK] = pa.array(blobs, pa.large_binary() if self.large_binary else pa.binary())
        packed = pa.table(out)
        yield from packed.to_batches()
        if self.heartbeats:
            yield self._beats(packed.schema, pc.max(table.column(self.beat_time or self.time)).as_py())

    def _beats(self, schema, top):
        """The heartbeat rows of a partition whose largest event time is `top`."""
        import pyarrow as pa

        n = self.heartbeats
        values = {self.bucket: list(range(n)), self.kind: [self.heartbeat] * n, self.time: [top] * n}
        return pa.RecordBatch.from_arrays([pa.array(values.get(f.name, [None] * n), f.type) for f in schema],
                                          schema=schema)


@dataclass(frozen=True)
class CombinedPack:
    """`pack` over the rows `combine` gives (udfs/micro_batch_combine.py), in one `mapInArrow`
    pass: the combined rows lose their window start (`start`), and get the kind `data` and the
    watermark column (`watermark`: the TIMESTAMP of their largest event time `latest` + `shift`),
    as the rows of `Pack` have them when Spark adds those columns between two passes.

    >>> import pyarrow as pa
    >>> from sqlflow.udfs.micro_batch_combine import Combine
    >>> rows = pa.record_batch({"u": [1, 1, 2], "t": [5, 7, 3], "s": [0, 0, 0], "b": pa.array([1, 1, 0], pa.int32())})
    >>> combine = Combine(group=("u", "s", "b"), time="t", parts=(("n", "count_all", None),), weight="w", latest="l")
    >>> pack = Pack(bucket="b", kind="k", time="t", columns=("b", "k", "t", "wm", "l"), latest=("wm", "l"), packed=3)
    >>> job = CombinedPack(combine=combine, pack=pack, start="s", kind="k", data=0, watermark="wm", latest="l", shift=10)
    >>> out = pa.Table.from_batches(list(job(iter([rows]))))
    >>> out.drop_columns([PACK]).set_column(3, "wm", out.column("wm").cast(pa.int64())).to_pydict()
    {'b': [0, 1], 'k': [3, 3], 't': [3, 5], 'wm': [13, 17], 'l': [3, 7]}
    >>> unpack(out.column(PACK).to_pylist()).to_dict("list")
    {'u': [2, 1], 't': [3, 5], 'n': [1, 2], 'w': [1, 2]}
    """

    combine: Combine
    pack: Pack
    start: str
    kind: str
    data: int
    watermark: str
    latest: str
    shift: int

    def __call__(self, batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        combined = list(self.combine(batches))  # (Combine freezes the worker's imports first)
        if not combined:
            return
        table = pa.Table.from_batches(combined).drop_columns([self.start])
        kind = pa.array(np.full(table.num_rows, self.data, np.int32))
        mark = pc.cast(pc.add_checked(table.column(self.latest), self.shift), pa.timestamp("us", tz="UTC"))
        table = table.append_column(self.kind, kind).append_column(self.watermark, mark)
        yield from self.pack(iter(table.to_batches()))


def unpack(blobs) -> pd.DataFrame:
    """The rows of packed blobs (Arrow IPC streams, bytes) as one pandas frame."""
    import pyarrow as pa

    from sqlflow.udfs.bucket import arrow_frame

    tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs]
    return arrow_frame(pa.concat_tables(tables) if len(tables) > 1 else tables[0])

"""A stream's engine state as versioned bytes: what the owned-sink executor keeps per bucket.

The vectorised micro-batch step (`stream_step.py`) keeps a bucket's live windows as a dict of
numpy arrays, a pandas frame of key values, accumulator tables and lineage (`window_table.py`).
`encode` writes that structure as a small header (a magic word, the format version, a JSON
manifest of the structure) followed by the arrays' raw bytes; `decode` reads it back. No engine
class is ever pickled: numbers travel as raw buffers with their dtype, masked pandas columns as
values and mask, and only object columns (key values, Python-valued accumulators such as sets or
decimals) as pickled numpy arrays of plain Python values. So a checkpoint does not depend on the
engine's classes, and a state written under another format version is refused by name
(`FORMAT_VERSION`; `StateFormatError` names both versions) instead of failing inside pickle. The
transformWithState operator and the owned-sink executor keep the same bytes (the operator in its
state value's `blob`, the owned executor in its state files); the previous format, the operator's
bare pickle, is still read (`PICKLE_FORMAT`). The one exception to "no engine class": custom
merging windows run the per-key loop, whose state (window objects by key) is kept as one pickle
inside the versioned bytes (`LOOP`).

>>> import numpy as np, pandas as pd
>>> state = {"windows": {"start": np.array([0, 60], np.int64), "closed": np.array([False, True])},
...          "keys": pd.DataFrame({"k": ["a", None]}), "pending": [{"cnt": np.array([2, 1])}, None],
...          "lineage": None}
>>> back = decode(encode(state))
>>> back["windows"]["start"].tolist(), back["windows"]["closed"].tolist(), back["keys"]["k"].tolist()
([0, 60], [False, True], ['a', None])
>>> back["pending"][0]["cnt"].dtype == np.array([1]).dtype, back["pending"][1], back["lineage"]
(True, None, None)
>>> decode(encode({})) == {}
True
>>> format_version(encode({})) == FORMAT_VERSION
True
>>> blob = bytearray(encode({})); blob[8:12] = (99).to_bytes(4, "little")
>>> decode(bytes(blob), where="checkpoint /cp, bucket 3")
Traceback (most recent call last):
sqlflow.engine.state_codec.StateFormatError: sqlflow: STREAM: the state at checkpoint /cp, bucket 3 has format version 99; this sqlflow reads format version 1
"""
from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pandas as pd

from ..errors import SqlflowExecutionError

#: the format of `encode`'s bytes; a change to the layout or to what the engine keeps in its state
#: gets a new number (and, where it is cheap, a migration in `decode`)
FORMAT_VERSION = 1
MAGIC = b"SQLFLOWS"
#: the one part kept as a pickle: the per-key loop's state (custom merging windows only), a dict by
#: key of the loop's window objects; a change to those classes is a change of format version
LOOP = "loop"
#: the format before this one: the transformWithState operator's bare pickle of the same structure
#: (no magic word); `decode` reads it (the migration), `encode` never writes it
PICKLE_FORMAT = 0
_HEAD = struct.Struct("<8sII")  # magic, format version, manifest length


class StateFormatError(SqlflowExecutionError):
    """A stored state of another format version (or not a state at all)."""


def encode(state: dict) -> bytes:
    """The engine state `state` as bytes of format `FORMAT_VERSION`."""
    buffers: list[bytes] = []
    manifest = _encode(state, buffers)
    head = json.dumps({"tree": manifest, "sizes": [len(b) for b in buffers]}, separators=(",", ":")).encode()
    return b"".join([_HEAD.pack(MAGIC, FORMAT_VERSION, len(head)), head, *buffers])


def format_version(blob: bytes) -> int | None:
    """The format version of stored state bytes (None: not sqlflow state)."""
    if len(blob) < _HEAD.size:
        return None
    magic, version, _ = _HEAD.unpack_from(blob)
    return version if magic == MAGIC else None


def decode(blob: bytes, where: str = "the checkpoint") -> dict:
    """The engine state of `encode`'s bytes; a located error for another format version."""
    version = format_version(blob)
    if version is None and bytes(blob[:1]) == b"\x80":  # the previous format: a bare pickle
        try:
            state = pickle.loads(blob)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError):
            state = None
        if isinstance(state, dict):
            return state
    if version is None:
        raise StateFormatError(f"the state at {where} is not sqlflow state of any format version",
                               clause="STREAM", hint="start the query from a new checkpoint")
    if version != FORMAT_VERSION:
        raise StateFormatError(f"the state at {where} has format version {version}; this sqlflow reads format "
                               f"version {FORMAT_VERSION}", clause="STREAM")
    _, _, n = _HEAD.unpack_from(blob)
    head = json.loads(blob[_HEAD.size:_HEAD.size + n])
    offsets = np.r_[0, np.cumsum(head["sizes"])].astype(int) + _HEAD.size + n
    view = memoryview(blob)
    buffers = [view[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    return _decode(head["tree"], buffers)


# ---------------------------------------------------------------------- the structure


def _array(a: np.ndarray, buffers: list) -> dict:
    if a.dtype == object:
        buffers.append(pickle.dumps(a, protocol=pickle.HIGHEST_PROTOCOL))  # plain Python values only
        return {"t": "obj", "b": len(buffers) - 1}
    a = np.ascontiguousarray(a)
    buffers.append(a.tobytes())
    return {"t": "nd", "dtype": a.dtype.str, "shape": list(a.shape), "b": len(buffers) - 1}


def _series(s: pd.Series, buffers: list) -> dict:
    values = s.array
    if isinstance(values, pd.arrays.NumpyExtensionArray) or isinstance(s.dtype, np.dtype):
        return {"t": "col", "a": _array(s.to_numpy(), buffers)}
    if isinstance(values, pd.core.arrays.masked.BaseMaskedArray):  # Int64, boolean, Float64
        return {"t": "masked", "dtype": str(s.dtype), "data": _array(values._data, buffers),
                "mask": _array(values._mask, buffers)}
    return {"t": "typed", "dtype": str(s.dtype), "a": _array(s.to_numpy(dtype=object), buffers)}


def _encode(value, buffers: list):
    if value is None:
        return {"t": "none"}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):  # the per-key loop's windows (see LOOP)
            buffers.append(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            return {"t": LOOP, "b": len(buffers) - 1}
        return {"t": "dict", "items": {k: _encode(v, buffers) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"t": "list" if isinstance(value, list) else "tuple", "items": [_encode(v, buffers) for v in value]}
    if isinstance(value, np.ndarray):
        return _array(value, buffers)
    if isinstance(value, pd.DataFrame):
        return {"t": "frame", "n": len(value), "columns": [str(c) for c in value.columns],
                "values": [_series(value[c], buffers) for c in value.columns]}
    if isinstance(value, (bool, np.bool_)):
        return {"t": "py", "v": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"t": "py", "v": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"t": "float", "v": float(value).hex()}
    if isinstance(value, str):
        return {"t": "py", "v": value}
    raise SqlflowExecutionError(f"the engine state holds a {type(value).__name__}, which the state format "
                                f"{FORMAT_VERSION} does not know", clause="STREAM")


def _decode_array(node: dict, buffers: list) -> np.ndarray:
    if node["t"] == "obj":
        return pickle.loads(buffers[node["b"]])
    return np.frombuffer(buffers[node["b"]], dtype=np.dtype(node["dtype"])).reshape(node["shape"]).copy()


def _decode_series(node: dict, buffers: list) -> pd.Series:
    if node["t"] == "col":
        return pd.Series(_decode_array(node["a"], buffers))
    if node["t"] == "masked":
        data, mask = _decode_array(node["data"], buffers), _decode_array(node["mask"], buffers)
        return pd.Series(_masked(data, mask))
    values = _decode_array(node["a"], buffers)
    return pd.Series(values, dtype=None if node["dtype"] == "object" else node["dtype"])


def _masked(data: np.ndarray, mask: np.ndarray):
    if data.dtype == bool:
        return pd.arrays.BooleanArray(data, mask)
    if data.dtype.kind == "f":
        return pd.arrays.FloatingArray(data, mask)
    return pd.arrays.IntegerArray(data, mask)


def _decode(node: dict, buffers: list):
    t = node["t"]
    if t == "none":
        return None
    if t == "dict":
        return {k: _decode(v, buffers) for k, v in node["items"].items()}
    if t in ("list", "tuple"):
        items = [_decode(v, buffers) for v in node["items"]]
        return items if t == "list" else tuple(items)
    if t in ("nd", "obj"):
        return _decode_array(node, buffers)
    if t == "frame":
        if not node["columns"]:
            return pd.DataFrame(index=range(node["n"]))
        return pd.DataFrame({c: _decode_series(v, buffers) for c, v in zip(node["columns"], node["values"])})
    if t == LOOP:
        return pickle.loads(buffers[node["b"]])
    if t == "py":
        return node["v"]
    if t == "float":
        return float.fromhex(node["v"])
    raise StateFormatError(f"the state holds an unknown part {t!r}", clause="STREAM")

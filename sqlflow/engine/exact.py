"""Exact sums, vectorised: BIGINT sums that know when they overflowed, DECIMAL sums to 38 digits.

Spark's SUM of BIGINTs wraps around in non-ANSI mode and fails in ANSI mode (Spark 4's default);
its SUM of DECIMAL(p, s) is exact up to the 38 digits of DECIMAL(min(38, p + 10), s), then NULL
(or an error in ANSI mode). The engine sums with numpy int64 arithmetic only:

- a BIGINT sum keeps its wrapped total `s` and, once its values are large enough for a sum of
  them to overflow (`bigint_sums_fit`), `hb`, the sum of each value's upper 32 bits (`v >> 32`,
  exact for fewer than 2^31 values). The true total T lies in `[hb * 2^32, (hb + n) * 2^32)`,
  so it fits in 64 bits exactly when `hb` and `s >> 32` are less than 2^31 apart
  (`bigint_overflow`);
- a decimal is its unscaled 128-bit integer, as four 32-bit limbs (the Arrow decimal128 layout),
  each summed on its own in int64 (exact for fewer than 2^31 values) and carried at the end.

>>> import numpy as np
>>> big = np.array([2**63 - 1, 2**63 - 1], np.int64)
>>> s, hb = big.sum(), (big >> 32).sum()
>>> int(s), bool(bigint_overflow(np.array([s]), np.array([hb]))[0])
(-2, True)
>>> import pyarrow as pa, decimal
>>> d = pa.array([decimal.Decimal("99999999999999999999.999999999999999999")] * 2, pa.decimal128(38, 18))
>>> total, fits = decimal_total(decimal_limbs(d).sum(axis=0, keepdims=True))
>>> fits.tolist(), decimal_array(total, fits, 18).to_pylist()
([False], [None])
>>> d = pa.array([decimal.Decimal("-1.5"), decimal.Decimal("0.25"), None], pa.decimal128(10, 2))
>>> total, fits = decimal_total(decimal_limbs(d).sum(axis=0, keepdims=True))
>>> decimal_array(total, fits, 2).to_pylist()
[Decimal('-1.25')]
"""
from __future__ import annotations

import numpy as np

_LOW = np.int64(0xFFFFFFFF)
#: 10^38: the first unscaled value a DECIMAL(38, s) cannot hold
_TEN_38 = 10**38


def bigint_sums_fit(values: np.ndarray) -> bool:
    """Whether no sum of any of these int64 values can leave the int64 range (all of them
    together stay below 2^62 in magnitude): the common case, where `hb` is not needed.

    >>> bigint_sums_fit(np.array([1, -99, 5])), bigint_sums_fit(np.array([2**62, 1]))
    (True, False)
    """
    if len(values) == 0:
        return True
    biggest = max(float(values.max()), -float(values.min()))
    return biggest * len(values) < 2.0**62


def bigint_overflow(s: np.ndarray, hb: np.ndarray) -> np.ndarray:
    """Whether each BIGINT total overflowed, from its wrapped sum `s` and upper-bits sum `hb`
    (see the module doc; exact for fewer than 2^31 values per total)."""
    return np.abs(hb - (s >> 32)) >= (1 << 31)


def decimal_limbs(values) -> np.ndarray:
    """The unscaled values of an Arrow decimal128 array as (n, 4) int64 limbs of 32 bits, least
    significant first, the last one signed: value = l0 + l1 2^32 + l2 2^64 + l3 2^96. NULL is 0."""
    n = len(values)
    data = np.frombuffer(values.buffers()[1], dtype="<u4", count=4 * (values.offset + n))[4 * values.offset:]
    limbs = data.reshape(n, 4).astype(np.int64)
    limbs[:, 3] = data.reshape(n, 4)[:, 3].view("<i4")
    if values.null_count:
        limbs[~values.is_valid().to_numpy(zero_copy_only=False)] = 0
    return limbs


def decimal_total(limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Summed limbs ((n, 4) int64) carried into 128-bit two's complement integers ((n, 2) uint64:
    low and high words), and whether each fits in 38 digits (|total| < 10^38)."""
    n = len(limbs)
    c = limbs[:, 0].copy()
    r0 = c & _LOW
    c = limbs[:, 1] + (c >> 32)
    r1 = c & _LOW
    c = limbs[:, 2] + (c >> 32)
    r2 = c & _LOW
    c3 = limbs[:, 3] + (c >> 32)
    fits = (c3 >= -(1 << 31)) & (c3 < (1 << 31))
    words = np.empty((n, 2), np.uint64)
    words[:, 0] = (r0 | (r1 << 32)).view(np.uint64)
    words[:, 1] = (r2 | (c3 << 32)).view(np.uint64)
    # |total| < 10^38, compared on the words: total + (10^38 - 1) in [0, 2 (10^38 - 1)]
    hi = words[:, 1].view(np.int64)
    negative = hi < 0
    mag_lo = np.where(negative, (~words[:, 0]) + np.uint64(1), words[:, 0])
    mag_hi = np.where(negative, ~words[:, 1] + (mag_lo == 0).astype(np.uint64), words[:, 1])
    bound_hi, bound_lo = np.uint64(_TEN_38 >> 64), np.uint64(_TEN_38 & (2**64 - 1))
    below = (mag_hi < bound_hi) | ((mag_hi == bound_hi) & (mag_lo < bound_lo))
    return words, fits & below


def decimal_carried(limbs: np.ndarray) -> np.ndarray:
    """Summed limbs with the carries moved up: limbs 0-2 in [0, 2^32), limb 3 signed (it may
    exceed 32 bits: the total then does not fit in 128 bits)."""
    out = np.empty_like(limbs)
    c = limbs[:, 0]
    for i in range(3):
        out[:, i] = c & _LOW
        c = limbs[:, i + 1] + (c >> 32)
    out[:, 3] = c
    return out


def decimal_rescaled(limbs: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """Summed limbs times 10^digits (per row, digits >= 0): a sum moved to a larger scale, nine
    digits at a time (a 32-bit limb times 10^9 stays within int64). A total far past 128 bits
    saturates: it overflows either way."""
    out = decimal_carried(limbs)
    digits = np.asarray(digits, np.int64).copy()
    while (digits > 0).any():
        step = np.minimum(digits, 9)
        factor = (10 ** step).astype(np.int64)
        out = decimal_carried(out * factor[:, None])
        out[:, 3] = np.clip(out[:, 3], -(1 << 40), 1 << 40)
        digits -= step
    return out


def decimal_array(words: np.ndarray, valid: np.ndarray, scale: int, precision: int = 38):
    """An Arrow decimal128(precision, scale) array of 128-bit unscaled values (`decimal_total`),
    NULL where not `valid`."""
    import pyarrow as pa

    n = len(words)
    valid = np.asarray(valid, bool)
    data = np.ascontiguousarray(np.where(valid[:, None], words, 0).astype("<u8"))
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.decimal128(precision, scale), n, [mask, pa.py_buffer(data.tobytes())],
                                 null_count=int(n - valid.sum()))


def decimal_average(sums, counts: np.ndarray, scale: int):
    """Spark's AVG of a DECIMAL from exact sums (an Arrow decimal128 array) and counts: the sum
    divided by the count to 39 decimal places, then to `scale`, both rounded half up, as Spark's
    decimal division and its `toPrecision` do. Returns an Arrow decimal128(38, scale) array (NULL
    where the count is 0 or the sum NULL, or the average needs more than 38 digits) and whether
    each average fits those 38 digits. Python integers, one per pane: exact at any count.

    >>> import pyarrow as pa, decimal
    >>> sums = pa.array([decimal.Decimal(x) for x in ("0.000000000000000003", "-0.000000000000000005",
    ...                                               "99999999999999999999.999999999999999999")] + [None],
    ...                 pa.decimal128(38, 18))
    >>> avg, fits = decimal_average(sums, np.array([2, 2, 1, 0]), 22)
    >>> avg.to_pylist(), fits.tolist()
    ([Decimal('1.5000E-18'), Decimal('-2.5000E-18'), None, None], [True, True, False, True])
    """
    n = len(sums)
    counts = np.asarray(counts, np.int64)
    valid = sums.is_valid().to_numpy(zero_copy_only=False) & (counts > 0)
    limbs = decimal_limbs(sums).astype(object)
    unscaled = limbs[:, 0] + (limbs[:, 1] << 32) + (limbs[:, 2] << 64) + (limbs[:, 3] << 96)
    value = decimal_quotients(unscaled, np.where(valid, counts, 1), sums.type.scale, scale)
    fits = (np.abs(value) < _TEN_38).astype(bool)
    value = np.where(valid & fits, value, 0)
    words = np.empty((n, 2), np.uint64)
    words[:, 0] = (value & (2**64 - 1)).astype(np.uint64)
    words[:, 1] = ((value >> 64) & (2**64 - 1)).astype(np.uint64)
    return decimal_array(words, valid & fits, scale), fits | ~valid


def decimal_quotients(unscaled: np.ndarray, counts: np.ndarray, scale_in: int, scale: int) -> np.ndarray:
    """The unscaled values at `scale` of sums (unscaled Python integers at `scale_in`) divided by
    positive counts, as Spark divides decimals: to 39 decimal places, then to `scale`, both
    rounded half up (away from zero). Python integers (an object array).

    >>> decimal_quotients(np.array([1, -5, 2], dtype=object), np.array([3, 2, 3]), 0, 4).tolist()
    [3333, -25000, 6667]
    """
    divisor = np.asarray(counts, np.int64).astype(object)
    negative = unscaled < 0
    scaled = np.abs(unscaled) * 10 ** (39 - scale_in)
    q = scaled // divisor + (2 * (scaled % divisor) >= divisor)
    step = 10 ** (39 - scale)
    q = q // step + (2 * (q % step) >= step)
    return np.where(negative, -q, q)

"""Integer codes for object columns without a Python object per row.

    object_codes(values) -> (codes, first)
    factorize(values, na_sentinel=False) -> (codes, uniques)    # pd.factorize, object columns keyed by identity first

``codes[i] == codes[j]`` exactly when ``values[i]`` and ``values[j]`` are equal JSON values (shape lists such as
``[[8, 64], [64]]``, dtype lists, strings, None); ``first[c]`` is the row where code ``c`` first occurs.

Why not ``orjson.dumps`` per row and a factorize of the bytes: each ``orjson.dumps`` result holds a ~4 KB
allocation (orjson 3.13), so a 2 M-kernel trace took 8.2 GB for one key column, and glibc kept most of it after
it was freed. Here:
* a column of str / None (names, categories) is factorized by hash, in C;
* any other column (shape lists) is keyed first by object identity — the decoder gives equal snippets ONE
  shared object (``analyzer.readers.columns.take``), so a million rows hold a few hundred distinct objects — by
  reading the object array's pointers as integers (no object per row). Only the distinct objects are
  serialised (``msgspec.json.encode``: ~70 B per result), and equal texts from distinct objects share a code.
  A list and a tuple with the same items share a code (JSON cannot tell them apart).
"""

from __future__ import annotations

import ctypes

import msgspec
import numpy as np
import pandas as pd


def object_pointers(values: np.ndarray) -> np.ndarray:
    """The PyObject* of every element of an object array, as intp (a copy; the array keeps the objects alive)."""
    arr = np.ascontiguousarray(values, dtype=object)
    if not arr.size:
        return np.empty(0, np.intp)
    ptr = ctypes.cast(arr.ctypes.data, ctypes.POINTER(ctypes.c_ssize_t))
    return np.ctypeslib.as_array(ptr, (arr.size,)).astype(np.intp, copy=True)


def object_codes(values) -> tuple[np.ndarray, np.ndarray]:
    """(codes int64, first row of each code) for a column of JSON-like values, equal values → equal codes."""
    arr = np.asarray(values, dtype=object).ravel()
    if not arr.size:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    by_id, distinct = _distinct_objects(arr)
    if set(map(type, distinct)) <= _STR_OR_NONE:
        keys = distinct
    else:
        keys = np.asarray([_encode(x) for x in distinct.tolist()], dtype=object)
    key_codes, uniques = pd.factorize(keys, use_na_sentinel=False)
    codes = key_codes.astype(np.int64)[by_id]
    return codes, _first_rows(codes, len(uniques))


_STR_OR_NONE = {str, type(None)}


def factorize(values, na_sentinel: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, use_na_sentinel=na_sentinel)`` as (int64 codes, uniques ndarray), same codes in the
    same order. An object column is keyed by object identity first (its pointers as integers, one int64 hash per
    row) and only the distinct objects are factorized by value: the decoder interns names, so 2 M kernel rows
    hold ~10^3 objects. pandas' own object path hashes every string and runs an isna pass per row: 2.5 s of a
    2 M-kernel file's summary, against ~0.1 s here. Order is kept: the first row of each value is the first row
    of its first object."""
    arr = values.to_numpy() if isinstance(values, (pd.Series, pd.Index)) else np.asarray(values)
    if arr.dtype != object or arr.ndim != 1:
        codes, uniques = pd.factorize(arr, use_na_sentinel=na_sentinel)
        return codes.astype(np.int64, copy=False), np.asarray(uniques)
    if not arr.size:
        return np.empty(0, np.int64), np.empty(0, dtype=object)
    by_id, distinct = _distinct_objects(arr)
    codes, uniques = pd.factorize(distinct, use_na_sentinel=na_sentinel)
    return codes.astype(np.int64)[by_id], np.asarray(uniques, dtype=object)


_encode = msgspec.json.Encoder(enc_hook=repr).encode  # a value JSON cannot hold is keyed by its repr


def _distinct_objects(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(by_id, distinct) of a non-empty 1-D object array: distinct[by_id[i]] is arr[i] (the same object), distinct in
    order of first row. One int64 hash per row (the pointers), no object per row."""
    by_id, distinct_ids = pd.factorize(object_pointers(arr))
    return by_id, arr[_first_rows(by_id, len(distinct_ids))]


def _first_rows(codes: np.ndarray, k: int) -> np.ndarray:
    first = np.full(k, -1, dtype=np.int64)
    n = len(codes)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)  # later writes win: reversed, the earliest row is written last
    return first

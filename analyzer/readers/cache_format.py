"""The cache's file format: one container of arrays under a sealed JSON header, and DataFrames ↔ arrays.

One file: MAGIC | header length (u64) | data length (u64) | header seal (16 B) | header JSON | pad to 64 | data. The
header holds the entry's manifest and, per array, [dtype, length, offset]; it carries the hash of the data region.
Nothing in a cache file is ever executed (no pickle). Numeric columns are stored as they are. Object columns
(names, shape lists) are dictionary-encoded: an int32 code per row plus the distinct values as one JSON array, so
on read equal values share one object again (as the decoder made them) and a 1.5 M-row cpu_ops table with ~10^3
distinct names reads back in milliseconds. A value JSON cannot hold exactly (NaN inside an object column, a tuple,
a non-str dict key) raises ``NotCacheable``: a cache never changes a result.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import mmap
import os
from pathlib import Path

import orjson

from analyzer.readers.cache_key import mac, secret
from analyzer.readers.files import open_regular

# numpy and pandas are imported where tables are built: a CLI `summary` answered from the cache (a header alone)
# and a refused gzip bomb never need them (pandas alone is 0.25 s of a fresh process on an idle box, 2–3 s busy).


class NotCacheable(Exception):
    """A value the cache cannot store exactly: the entry is not written (and the result is computed again)."""


# ---------------------------------------------------------------------------------------------------- container
# One file: MAGIC | header length (u64) | data length (u64) | header hash (16 B) | header JSON | pad to 64 | data.
# The header (JSON) holds the manifest and, per array, [dtype, length, offset]; it carries the hash of the data
# region. Reading maps the file copy-on-write and makes a zero-copy, writable view per array (pandas may modify
# the tables like any other), after both hashes match: a flipped byte
# anywhere makes the entry unreadable, never a wrong number. Why not .npz: numpy reads zip members in chunks and
# copies them (1.2 s of a 1.8 s cached open of the 1 GiB benchmark trace).
MAGIC = b"FLCACHE3"
_PREFIX = len(MAGIC) + 8 + 8 + 16
_ALIGN = 64


def write_container(f, arrays: dict, manifest: dict) -> None:
    import numpy as np

    layout, offset = {}, 0
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        arrays[name] = arr
        layout[name] = [arr.dtype.str, int(arr.shape[0]) if arr.ndim else 0, offset]
        offset += -(-arr.nbytes // _ALIGN) * _ALIGN
    h = _Hasher(keyed="data")
    for arr in arrays.values():
        h.update(memoryview(arr).cast("B"))
        h.update(bytes(-arr.nbytes % _ALIGN))
    header = orjson.dumps({**manifest, "arrays": layout, "data_hash": h.hexdigest()})
    head = MAGIC + len(header).to_bytes(8, "little") + offset.to_bytes(8, "little")
    head += mac(header)
    f.write(head + header + bytes(-(len(head) + len(header)) % _ALIGN))
    for arr in arrays.values():
        f.write(memoryview(arr).cast("B"))
        f.write(bytes(-arr.nbytes % _ALIGN))


def read_header(f) -> tuple[dict, int]:
    """(the header: manifest, "arrays" layout and "data_hash"; the data region's offset) of an open entry, after
    checking the magic, the sizes against the file's and the header's own hash."""
    prefix = f.read(_PREFIX)
    if len(prefix) != _PREFIX or not prefix.startswith(MAGIC):
        raise ValueError("not a FuseLens cache file")
    n_header = int.from_bytes(prefix[8:16], "little")
    n_data = int.from_bytes(prefix[16:24], "little")
    size = os.fstat(f.fileno()).st_size
    start = -(-(_PREFIX + n_header) // _ALIGN) * _ALIGN
    if start + n_data != size:
        raise ValueError(f"file is {size:,} bytes, its header says {start + n_data:,}")
    header = f.read(n_header)
    if not hmac.compare_digest(mac(header), prefix[24:40]):
        raise ValueError("header seal mismatch (corrupt, or not written by this cache's owner)")
    return orjson.loads(header), start


def read_container(path: Path) -> tuple[dict, dict]:
    import numpy as np

    with open_entry(path) as f:
        manifest, start = read_header(f)
        # A private (copy-on-write) map: the arrays are views of the page cache, writable without touching the
        # file, and nothing is zero-filled or copied up front (a bytearray + readinto took 0.6 of a 1 s open of
        # the 1 GiB benchmark's 233 MiB entry). Entries are replaced by rename and removed by unlink, never
        # truncated in place, so the mapped pages stay valid.
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size else bytearray()
    view = memoryview(data)[start:]
    if _Hasher(view, keyed="data").hexdigest() != manifest.pop("data_hash"):
        raise ValueError("data checksum mismatch")
    arrays = {}
    for name, (dtype, n, offset) in manifest.pop("arrays").items():
        arrays[name] = np.frombuffer(view, dtype=np.dtype(dtype), count=n, offset=offset)
    return manifest, arrays


class _Hasher:
    """The data region's hash, incremental: xxh3-128 seeded from this cache's secret (keyed blake2b where xxhash
    is missing). Its value sits in the sealed header, so changing the data means matching it without the seed."""

    def __init__(self, data=b"", keyed: str = "data"):
        key = secret()
        try:
            import xxhash

            self.h = xxhash.xxh3_128(seed=int.from_bytes(hashlib.blake2b(key, person=b"fl-data").digest()[:8]))
        except ImportError:
            self.h = hashlib.blake2b(digest_size=16, key=key, person=b"fl-" + keyed.encode()[:13])
        if len(data):
            self.h.update(data)

    def update(self, data) -> None:
        self.h.update(data)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def read_table(z, table: str, spec: dict):
    import numpy as np
    import pandas as pd

    n = spec["rows"]
    cols = {}
    for col, dtype in spec["columns"]:
        base = f"{table}/{col}"
        if dtype == "object":
            values = orjson.loads(memoryview(z[base + "#values"]))
            codes = z[base + "#codes"]
            lut = np.empty(len(values), dtype=object)
            lut[:] = values
            arr = lut[codes] if len(codes) else np.empty(0, dtype=object)
            series = pd.Series(arr, dtype=object, copy=False)
        else:
            series = pd.Series(z[base], copy=False)
            if str(series.dtype) != dtype:
                series = series.astype(dtype)
        if len(series) != n:
            raise ValueError(f"{base}: {len(series)} rows, manifest says {n}")
        cols[col] = series
    index = z[f"{table}/#index"] if spec["index"] == "array" else pd.RangeIndex(n)
    df = pd.DataFrame(cols, copy=False)
    if not len(cols):
        df = pd.DataFrame(index=pd.RangeIndex(n))
    df.index = index if isinstance(index, pd.RangeIndex) else pd.Index(index)
    return df


def encode_table(df, table: str, arrays: dict) -> dict:
    """Put a DataFrame's columns (and a non-range index) into `arrays` under '<table>/…'; returns its spec."""
    import numpy as np
    import pandas as pd

    from analyzer.codes import object_codes

    if df.columns.has_duplicates or not all(isinstance(c, str) and "#" not in c for c in df.columns):
        raise NotCacheable(f"{table}: column names")
    columns = []
    for col in df.columns:
        s = df[col]
        dtype = str(s.dtype)
        base = f"{table}/{col}"
        if s.dtype.kind in "biuf" and dtype in ("int64", "int32", "float64", "float32", "bool", "int8", "uint8"):
            arrays[base] = s.to_numpy()
        elif dtype == "object":  # the contract's text and list columns
            values = s.to_numpy(dtype=object)
            codes, first = object_codes(values)
            distinct = values[first].tolist()
            arrays[base + "#values"] = np.frombuffer(exact_json(distinct, base), np.uint8)
            arrays[base + "#codes"] = codes.astype(np.int32 if len(first) < 2**31 else np.int64)
        else:
            raise NotCacheable(f"{base}: dtype {dtype}")
        columns.append((col, dtype))
    index = df.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        kind = "range"
    elif index.dtype.kind in "iu":
        arrays[f"{table}/#index"] = index.to_numpy()
        kind = "array"
    else:
        raise NotCacheable(f"{table}: index of dtype {index.dtype}")
    return {"rows": len(df), "columns": columns, "index": kind}


def exact_json(value, what: str, *, nonfinite: bool = False) -> bytes:
    """JSON text that decodes back to an equal value of the same types, else NotCacheable. nonfinite: NaN and
    ±inf floats are kept as {"$float": "nan"} … (untag restores them); else they make the value uncacheable."""
    if nonfinite:
        value = _tag(value)
    try:
        text = orjson.dumps(value)
    except TypeError as err:
        raise NotCacheable(f"{what}: {err}") from None
    if not _same(orjson.loads(text), value):
        raise NotCacheable(f"{what}: a value does not survive JSON exactly (NaN, tuple, non-str key …)")
    return text


_FLOAT_TAG = "$float"


def _tag(v):
    if isinstance(v, float) and type(v) is float and not math.isfinite(v):
        return {_FLOAT_TAG: repr(v)}  # 'nan', 'inf', '-inf': float() reads each back
    if isinstance(v, dict):
        if _FLOAT_TAG in v:
            raise NotCacheable(f"a dict with the reserved key {_FLOAT_TAG!r}")
        return {k: _tag(x) for k, x in v.items()}
    if type(v) is list:
        return [_tag(x) for x in v]
    return v


def untag(v):
    if isinstance(v, dict):
        if len(v) == 1 and _FLOAT_TAG in v:
            return float(v[_FLOAT_TAG])
        return {k: untag(x) for k, x in v.items()}
    if isinstance(v, list):
        return [untag(x) for x in v]
    return v


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    return a == b


def open_entry(path: Path):
    """An entry opened for reading: regular, not a symlink, never blocking (a FIFO planted there is refused)."""
    return open_regular(path, what="cache entry", follow=False)

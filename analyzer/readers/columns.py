"""The column stage: batches of event Structs → one table of columns per event group (``schema.RawTrace``).

Per batch, events are grouped by category (a dict lookup per event) and each group's columns are pulled with list
comprehensions over Struct slots + ``np.fromiter`` (measured fastest, see ``Accumulator._i``). Names are interned
through one dict; repeated ``Input Dims`` / ``grid`` texts get a code per distinct text, and only the distinct ones
are parsed, in ONE ``orjson.loads`` call at the end (``Accumulator.finish``). A forked decode worker ``export``s its
columns in a compact form and the parent ``merge``s them (analyzer.readers.decode).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import operator
from collections import Counter

import msgspec
import numpy as np
import orjson

from analyzer.readers.batches import LENIENT_MARK, UTF8_MARK
from analyzer.readers.coerce import float_col, floats, int_col, strings
from analyzer.readers.events import (
    ANNOTATION,
    CPU_OP,
    GPU_ANNOTATION,
    GPU_KIND,
    GROUP_OF_CATEGORY,
    KERNEL,
    LAUNCH,
    LEGACY_CATEGORIES,
    MEMCPY,
    MEMSET,
    NAN,
    Event,
    Meta,
)
from analyzer.schema import RawTrace


class RawTable:
    """Factorizes Raw JSON snippets across batches; decodes the distinct ones once (``objects``)."""

    def __init__(self):
        self.code_of: dict[bytes, int] = {b"": -1}

    def codes_of_bytes(self, blobs: list[bytes]) -> np.ndarray:
        """Code per snippet (-1: absent). Shapes repeat (a training step has a few hundred distinct ones), so
        after the first batch nearly every snippet is a dict hit: one C-level map."""
        if not len(blobs):
            return np.empty(0, np.int64)
        code_of = self.code_of
        codes = list(map(code_of.get, blobs))
        if None in codes:
            for blob in set(itertools.compress(blobs, map(operator.is_, codes, itertools.repeat(None)))):
                code_of[blob] = len(code_of) - 1
            codes = list(map(code_of.__getitem__, blobs))
        return np.fromiter(codes, np.int64, len(codes))

    def blobs(self) -> list[bytes]:
        """The distinct snippets, in code order (codes 0..n-1)."""
        return [b for b, c in sorted(self.code_of.items(), key=operator.itemgetter(1)) if c >= 0]

    def objects(self) -> list:
        """Python objects for codes 0..n-1 (one orjson call). JSON null decodes to None (= unknown)."""
        blobs = self.blobs()
        if not blobs:
            return []
        try:
            return orjson.loads(b"[" + b",".join(blobs) + b"]")
        except orjson.JSONDecodeError:  # one snippet orjson refuses (an escaped lone surrogate "\ud800"): it alone
            return [_loads_or_none(b) for b in blobs]  # becomes unknown, the others keep their values


def _loads_or_none(blob: bytes):
    try:
        return orjson.loads(blob)
    except orjson.JSONDecodeError:
        return None


def take(objects: list, codes: np.ndarray) -> np.ndarray:
    """Object array: objects[code], None where code == -1. Equal snippets share one object (do not mutate)."""
    table = np.empty(len(objects) + 1, dtype=object)
    table[: len(objects)] = objects
    table[-1] = None
    return table[codes]


class Accumulator:
    def __init__(self):
        self.names: dict = {None: ""}
        # A cpu_op's four shape snippets (Input Dims, types, strides, Concrete Inputs) are keyed TOGETHER, joined
        # by NUL (never in JSON text), and a kernel's grid and block likewise: one bytes object and one dict hit
        # per event instead of four (bytes(Raw) is ~400 ns: 2.6 µs per cpu_op went to keying shapes). ``finish``
        # splits the few distinct keys into each column's snippets.
        self.cpu_shapes, self.launch_dims = RawTable(), RawTable()
        self.parts: dict[str, list[dict]] = {"gpu": [], "cpu": [], "launches": [], "annotations": []}
        self.categories: Counter = Counter()
        self.process_labels: list[str] = []
        self.trace_start = math.inf
        self.n_events = 0
        self.n_x = 0  # complete events so far
        self.lenient = False
        self.bad_utf8 = False
        self.bad = [0]  # values present but unreadable as numbers
        self.group_of: dict = {}

    def _group(self, cat) -> int:
        """-1: no category (metadata, instant markers); 0: a category we do not read; else the group."""
        if not cat:
            return -1
        if not isinstance(cat, str):
            return 0
        return GROUP_OF_CATEGORY.get(cat, GROUP_OF_CATEGORY.get(cat.lower(), 0))

    # one batch -------------------------------------------------------------------------------------------
    def add(self, evs: list) -> None:
        if evs and evs[-1] is UTF8_MARK:
            evs.pop()
            self.bad_utf8 = True
        self.lenient_batch = bool(evs) and evs[-1] is LENIENT_MARK
        if self.lenient_batch:
            evs.pop()
            self.lenient = True
        self.n_events += len(evs)
        # one pass reads every event's class; the selections below only compare the pointers it returned
        classes = list(map(type, evs))
        xs = list(itertools.compress(evs, map(operator.is_, classes, itertools.repeat(Event))))
        if len(xs) != len(evs):
            self._metadata(list(itertools.compress(evs, map(operator.is_, classes, itertools.repeat(Meta)))))
        del evs, classes
        n = len(xs)
        if not n:
            return
        cats = [e.cat for e in xs]
        counts = Counter(cats)
        self.categories.update(counts)
        group_of = self.group_of
        for c in counts:
            if c not in group_of:
                group_of[c] = self._group(c)
        group = np.fromiter(map(group_of.__getitem__, cats), np.int8, n)  # few distinct keys: dict hits
        del cats

        self.strict = not self.lenient_batch
        ts_values = [e.ts for e in xs]
        ts = None
        if self.strict:
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                ts = np.fromiter(ts_values, np.float64, n)
        self.batch_ts = ts  # every ts a number: each group takes its rows from here (_common)
        if ts is None:
            ts = floats(ts_values, [0])
        del ts_values
        live = ts[group >= 0]
        live = live[np.isfinite(live)]
        if live.size:
            self.trace_start = min(self.trace_start, float(live.min()))

        base = self.batch_base = self.n_x  # ordinal of this batch's first complete event: the tie-breaker for equal ts
        self.n_x += n
        for g, fn in (
            (KERNEL, self._gpu),
            (MEMCPY, self._gpu),
            (MEMSET, self._gpu),
            (CPU_OP, self._cpu),
            (LAUNCH, self._launch),
        ):
            idx = np.flatnonzero(group == g)
            if idx.size:
                fn(self._select(xs, idx), idx + base, g)
        idx = np.flatnonzero((group == ANNOTATION) | (group == GPU_ANNOTATION))
        if idx.size:
            self._annotations(self._select(xs, idx), idx + base)

    @staticmethod
    def _select(xs: list, idx: np.ndarray) -> list:
        return list(map(xs.__getitem__, idx.tolist()))

    # Column extraction. List comprehensions over Struct slots, measured on 64k real events (CPython 3.11):
    # [e.args.correlation for e in sel] 65 ns/event vs 168 ns for map(attrgetter("args.correlation")) and
    # 500+ ns for astuple + zip: the specialised slot load beats every C-level detour, so it is used here.
    def _i(self, values: list) -> np.ndarray:
        return int_col(values, self.bad, self.strict)

    def _f(self, values: list) -> np.ndarray:
        return float_col(values, self.bad, self.strict)

    def _common(self, sel: list, pos: np.ndarray) -> dict:
        return {
            "event_index": pos,
            "name": strings([e.name for e in sel], self.names, self.strict),
            "pid": self._i([e.pid for e in sel]),
            "tid": self._i([e.tid for e in sel]),
            "ts": self._f([e.ts for e in sel]) if self.batch_ts is None else self.batch_ts[pos - self.batch_base],
            "dur": self._f([e.dur for e in sel]),
        }

    def _external_id(self, args: list) -> np.ndarray:
        # new 'External id' or legacy lowercase 'external id' (-1 when neither)
        return np.maximum(self._i([a.external_id for a in args]), self._i([a.external_id_legacy for a in args]))

    def _gpu(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        args = [e.args for e in sel]
        launch = self.launch_dims.codes_of_bytes([_SEP.join((a.grid, a.block)) for a in args])
        cols.update(
            kind=[GPU_KIND[group]] * len(sel),
            correlation=self._i([a.correlation for a in args]),
            external_id=self._external_id(args),
            device=self._i([a.device for a in args]),
            stream=self._i([a.stream for a in args]),
            grid=launch,  # the joined key's code for both: finish() splits it
            block=launch,
            registers=self._f([a.registers for a in args]),
            shared_memory=self._f([a.shared_memory for a in args]),
            bytes=self._f([a.nbytes for a in args]),
        )
        self.parts["gpu"].append(cols)

    def _cpu(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        args = [e.args for e in sel]
        shapes = self.cpu_shapes.codes_of_bytes(
            [_SEP.join((a.input_dims, a.input_types, a.input_strides, a.concrete_inputs)) for a in args]
        )
        cols.update(
            external_id=self._i([a.external_id for a in args]),
            sequence_number=self._i([a.sequence_number for a in args]),
            # the joined key's code for all four: finish() splits it
            input_dims=shapes,
            input_types=shapes,
            input_strides=shapes,
            concrete_inputs=shapes,
        )
        self.parts["cpu"].append(cols)

    def _launch(self, sel: list, pos: np.ndarray, group: int) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        args = [e.args for e in sel]
        cols.update(correlation=self._i([a.correlation for a in args]), external_id=self._external_id(args))
        self.parts["launches"].append(cols)

    def _annotations(self, sel: list, pos: np.ndarray) -> None:
        if not sel:
            return
        cols = self._common(sel, pos)
        group_of = self.group_of
        on_gpu = np.fromiter([group_of[e.cat] for e in sel], np.int8, len(sel)) == GPU_ANNOTATION
        cols.update(on_gpu=on_gpu, external_id=self._i([e.args.external_id for e in sel]))
        self.parts["annotations"].append(cols)

    def _metadata(self, sel: list) -> None:
        for ev in sel:  # metadata events: a few dozen per trace
            if ev.name != "process_name" or not len(ev.args.label):
                continue
            try:
                label = msgspec.json.decode(ev.args.label)
            except msgspec.DecodeError:
                continue
            if isinstance(label, str):
                self.process_labels.append(label)

    # across processes ------------------------------------------------------------------------------------
    def export(self) -> dict:
        """This worker's columns in a compact, picklable form: names and shapes as codes + distinct values."""
        name_list = list(dict.fromkeys(self.names.values()))  # distinct interned names ("" once)
        index_of = {v: i for i, v in enumerate(name_list)}
        parts = {}
        for table, cols in self.parts.items():
            merged = _concat(cols)
            if merged:
                merged["name"] = np.fromiter(map(index_of.__getitem__, merged["name"]), np.int64, len(merged["name"]))
            parts[table] = merged
        raw_tables = {k: [b for b, c in sorted(t.code_of.items(), key=operator.itemgetter(1)) if c >= 0]
                      for k, t in self._raw_tables().items()}  # fmt: skip
        return dict(
            parts=parts, names=name_list, raw_tables=raw_tables, categories=dict(self.categories),
            process_labels=self.process_labels, trace_start=self.trace_start, n_events=self.n_events,
            lenient=self.lenient, bad=self.bad[0], bad_utf8=self.bad_utf8, n_x=self.n_x,
        )  # fmt: skip

    def _raw_tables(self) -> dict:
        return {"cpu_shapes": self.cpu_shapes, "launch_dims": self.launch_dims}

    def merge(self, part: dict) -> None:
        """Append a worker's export (parts arrive in file order)."""
        names = part["names"]
        name_lut = np.empty(len(names), dtype=object)
        name_lut[:] = [self.names.setdefault(x, x) for x in names]
        luts = {}
        for key, table in self._raw_tables().items():
            blobs = part["raw_tables"][key]
            for blob in blobs:
                table.code_of.setdefault(blob, len(table.code_of) - 1)
            luts[key] = np.fromiter((table.code_of[b_] for b_ in blobs), np.int64, len(blobs))
        for table, cols in part["parts"].items():
            if not cols:
                continue
            cols["name"] = name_lut[cols["name"]]
            cols["event_index"] = cols["event_index"] + self.n_x
            if table == "gpu":
                for key in ("grid", "block"):
                    cols[key] = _remap(cols[key], luts["launch_dims"])
            if table == "cpu":
                for key in _SHAPE_COLUMNS:
                    cols[key] = _remap(cols[key], luts["cpu_shapes"])
            self.parts[table].append(cols)
        self.categories.update(part["categories"])
        self.process_labels += part["process_labels"]
        self.trace_start = min(self.trace_start, part["trace_start"])
        self.n_events += part["n_events"]
        self.n_x += part["n_x"]
        self.lenient |= part["lenient"]
        self.bad_utf8 |= part["bad_utf8"]
        self.bad[0] += part["bad"]

    # all batches -----------------------------------------------------------------------------------------
    def finish(self, form: str, header: dict) -> RawTrace:
        tables = {k: _concat(v) for k, v in self.parts.items()}
        gpu, cpu = tables["gpu"], tables["cpu"]
        if gpu:
            grids = RawTable()
            luts = _split_keys(self.launch_dims, grids, 2)
            grid_text = np.asarray([_dims_text(o) for o in grids.objects()] + [""], dtype=object)
            gpu["grid"] = grid_text[luts[0][gpu["grid"]]]
            gpu["block"] = grid_text[luts[1][gpu["block"]]]
        if cpu:
            shape_tables = [RawTable() for _ in _SHAPE_COLUMNS]
            luts = _split_keys(self.cpu_shapes, shape_tables, len(_SHAPE_COLUMNS))
            for key, table, lut, ok in zip(
                _SHAPE_COLUMNS,
                shape_tables,
                luts,
                (_list_of_lists, _list_of_str, _list_of_lists, _list_of_str),
                strict=True,
            ):
                # the contract: a list (of lists / of str) or None; anything else in the file is unknown
                cpu[key] = take([o if ok(o) else None for o in table.objects()], lut[cpu[key]])
        warnings = []
        if self.lenient or self.bad[0]:
            count = f"{self.bad[0]:,} values" if self.bad[0] and not self.lenient else "some values"
            warnings.append(
                f"{count} of unexpected types (e.g. a string where a number belongs) were read as unknown (NaN / -1)"
            )
        if self.bad_utf8:
            warnings.append("invalid UTF-8 inside some strings was replaced by U+FFFD")
        categories = {("" if c is None else str(c)): k for c, k in self.categories.items()}
        return RawTrace(
            header=header,
            form=form,
            n_events=self.n_events,
            trace_start_raw=self.trace_start if math.isfinite(self.trace_start) else NAN,
            gpu=gpu,
            cpu=cpu,
            launches=tables["launches"],
            annotations=tables["annotations"],
            categories=categories,
            process_labels=self.process_labels,
            legacy=any(c in LEGACY_CATEGORIES for c in categories),
            warnings=warnings,
        )


_SEP = b"\x00"  # joins an event's snippets into one key: a NUL byte cannot occur in JSON text (msgspec rejects it)
_SHAPE_COLUMNS = ("input_dims", "input_types", "input_strides", "concrete_inputs")


def _split_keys(joined: RawTable, tables, n: int) -> list[np.ndarray]:
    """Per part j of the joined keys: the code in tables[j] (one table for every part when a single table is
    given) of each joined key, indexable by the joined code."""
    parts = [b.split(_SEP) for b in joined.blobs()]  # n parts each: msgspec refuses a NUL even inside a Raw
    if isinstance(tables, RawTable):
        tables = [tables] * n
    return [tables[j].codes_of_bytes([p[j] for p in parts]) for j in range(n)]


def _remap(codes: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Worker codes → merged codes; -1 (absent) stays -1."""
    if not len(lut):
        return np.full(len(codes), -1, dtype=np.int64)
    return np.where(codes >= 0, lut[np.maximum(codes, 0)], -1)


def _concat(parts: list[dict]) -> dict:
    """One dict of columns from per-batch dicts. Consumes `parts`: each column's pieces are popped and freed as
    soon as that column is joined, so the peak is the pieces + ONE joined column, not twice every column."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts.pop()
    out = {}
    for key in list(parts[0]):
        pieces = [p.pop(key) for p in parts]
        if isinstance(pieces[0], list):
            out[key] = list(itertools.chain.from_iterable(pieces))
        else:
            out[key] = np.concatenate(pieces)
        del pieces
    parts.clear()
    return out


def _list_of_lists(obj) -> bool:
    return isinstance(obj, list) and all(isinstance(x, list) for x in obj)


def _list_of_str(obj) -> bool:
    return isinstance(obj, list) and all(isinstance(x, str) for x in obj)


def _dims_text(obj) -> str:
    """[50, 1, 1] → '50,1,1' (GPU_OPS grid/block); anything else → '' (unknown)."""
    if isinstance(obj, list) and obj and all(isinstance(x, int) and not isinstance(x, bool) for x in obj):
        return ",".join(map(str, obj))
    return ""

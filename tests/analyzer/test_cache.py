"""The columnar trace cache (analyzer.readers.cache): identical results cached and not, invalidation by schema /
code version, changed files and corrupt entries, the off switches, and the size bound. Real traces throughout."""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import orjson
import pandas as pd
import pytest

from analyzer import load_trace, pipeline, schema, summarize
from analyzer.readers import cache, cache_format, cache_key
from tests.conftest import ROOT, TRACES, reference_events

TABLES = ("gpu_ops", "cpu_ops", "launches", "annotations", "steps", "step_categories")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_DIR, str(d))
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    monkeypatch.delenv(cache.ENV_MAX_BYTES, raising=False)
    return d


def assert_same_trace(a, b):
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y, check_exact=True, obj=f.name)
        elif f.name == "gpu" and x is not None:
            assert orjson.dumps(dataclasses.asdict(x)) == orjson.dumps(dataclasses.asdict(y))  # NaN-safe
        else:
            assert x == y, f.name


@pytest.mark.parametrize(
    "key", ["h100_bert", "mi300_triton", "legacy_resnet", "hta_cuda_graph", "b200_vllm", "hta_diff_control"]
)
@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_cached_and_uncached_loads_are_identical(key, cache_dir):
    path = TRACES[key]
    fresh = load_trace(path, cache=False)
    assert not cache_dir.exists()  # cache=False writes nothing
    first = load_trace(path)  # parses, then stores
    (entry,) = cache.entries()
    assert entry.name.startswith(cache.content_key(path) + "-" + cache.version())
    second = load_trace(path)  # reads the entry
    assert pipeline.lookup_trace(cache.content_key(path), "x") is not None
    for t in (first, second):
        assert_same_trace(fresh, t)
    # the same content uploaded under another name: a hit, named as uploaded
    up = load_trace(path.read_bytes(), name="upload.json.gz")
    assert up.meta.source == "upload.json.gz" and len(cache.entries()) == 1
    assert_same_trace(fresh, dataclasses.replace(up, meta=dataclasses.replace(up.meta, source=fresh.meta.source)))
    # equal values share one object again, as the decoder made them (the cost/summary keys rely on it)
    dims = second.cpu_ops["input_dims"].to_numpy(dtype=object)
    assert len({id(d) for d in dims}) == len(set(map(orjson.dumps, dims)))
    s1, s2 = summarize(fresh), summarize(second)
    assert orjson.dumps(s1.to_json(), option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(
        s2.to_json(), option=orjson.OPT_SERIALIZE_NUMPY
    )
    assert_summary_cached_identical(path, s1)


def assert_same_summary(a, b):
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "trace":
            assert_same_trace(x, y)
        elif isinstance(x, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y, check_exact=True, obj=f.name)
        else:  # per_step holds NaN for unknown figures: compare through a NaN-keeping encoding, types included
            assert cache_format.exact_json(x, f.name, nonfinite=True) == cache_format.exact_json(
                y, f.name, nonfinite=True
            )
            assert type(x) is type(y)


def assert_summary_cached_identical(path, fresh_summary):
    """load_summary: the first call stores the summary entry, the second reads it; both equal summarize() of an
    uncached load, and so does the CLI's header-only answer (summary_json)."""
    key = cache.content_key(path)
    cache.derived_path(key, cache.SUMMARY).unlink(missing_ok=True)
    first = pipeline.load_summary(path)
    assert cache.derived_path(key, cache.SUMMARY).is_file()  # stored: the comparisons below read it back
    second = pipeline.load_summary(path)
    for s in (first, second):
        assert_same_summary(fresh_summary, s)
    assert pipeline.lookup_summary(key, fresh_summary.trace) is not None
    assert pipeline.summary_json(path) == orjson.loads(orjson.dumps(fresh_summary.to_json()))


def test_a_cached_summary_is_the_uncached_summary(cache_dir):
    path = TRACES["h100_bert"]
    assert_summary_cached_identical(path, summarize(load_trace(path, cache=False)))
    data = path.read_bytes()
    up = pipeline.load_summary(data, name="upload.json.gz")  # same content, uploaded: a hit, renamed
    assert up.trace.meta.source == "upload.json.gz"
    assert_same_summary(up, pipeline.load_summary(data, name="upload.json.gz", key=cache.content_key(data)))
    assert pipeline.summary_json(path, name="x.json")["source"] == "x.json"
    assert len(cache.entries()) == 2 and sum(map(cache.is_derived, cache.entries())) == 1


def test_a_first_upload_is_hashed_once(cache_dir, monkeypatch):
    """The dashboard keys an upload by its content hash and hands that key to load_summary; a first upload (a cache
    miss) then parses and stores without hashing its bytes again (0.1–0.35 s per GB), under the same key."""
    data = TRACES["h100_bert"].read_bytes()
    key = cache.content_key(data)
    hashed = []
    real_hash = cache_key._hash
    monkeypatch.setattr(cache_key, "_hash", lambda b: hashed.append(len(b)) or real_hash(b))
    summary = pipeline.load_summary(data, name="upload.json.gz", key=key)
    assert hashed == [] and summary.trace.meta.source == "upload.json.gz"
    assert pipeline.lookup_trace(key, "x") is not None and cache.derived_path(key, cache.SUMMARY).is_file()


def test_a_schema_change_makes_the_entry_stale(cache_dir, monkeypatch):
    path = TRACES["h100_bert"]
    load_trace(path)
    (old,) = cache.entries()
    pipeline.load_summary(path)
    old_summary = cache.derived_path(cache.content_key(path), cache.SUMMARY)
    assert old_summary.is_file()
    bumped = tuple(dataclasses.replace(c, doc=c.doc + " (v2)") if c.name == "bytes" else c for c in schema.GPU_OPS)
    monkeypatch.setitem(schema.TABLES, "gpu_ops", bumped)
    assert pipeline.summary_json(path) is None  # the CLI's light path never reads the old summary either
    assert pipeline.lookup_trace(cache.content_key(path), "x") is None  # never read …
    assert not old.exists() and not old_summary.exists()  # … and deleted
    trace = load_trace(path)
    (new,) = cache.entries()
    assert new != old and cache.version() in new.name
    assert_same_trace(load_trace(path, cache=False), trace)
    summary = pipeline.load_summary(path)
    assert cache.derived_path(cache.content_key(path), cache.SUMMARY) != old_summary
    assert_same_summary(summarize(load_trace(path, cache=False)), summary)


def test_a_code_change_makes_the_entry_stale(cache_dir, monkeypatch):
    path = TRACES["h100_bert"]
    load_trace(path)
    (old,) = cache.entries()
    pipeline.load_summary(path)
    old_summary = cache.derived_path(cache.content_key(path), cache.SUMMARY)
    monkeypatch.setattr(cache, "_code_hash", lambda: "an edited analyzer")
    assert pipeline.summary_json(path) is None
    load_trace(path)
    (new,) = cache.entries()
    assert new != old and not old.exists() and not old_summary.exists()


def test_a_changed_file_gets_its_own_entry(cache_dir, tmp_path):
    top, events = reference_events(TRACES["h100_bert"])
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({**top, "traceEvents": events}))
    before = load_trace(path)
    before_summary = pipeline.load_summary(path)
    k = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    events = [dict(e) for e in events]
    events[k]["dur"] = events[k]["dur"] + 1000.0  # same name, size and (after a write) any mtime
    path.write_bytes(orjson.dumps({**top, "traceEvents": events}))
    after = load_trace(path)
    assert len(cache.entries()) == 3  # two traces, the first one's summary
    assert after.gpu_ops["dur_us"].sum() == pytest.approx(before.gpu_ops["dur_us"].sum() + 1000.0)
    assert_same_trace(load_trace(path, cache=False), after)
    assert pipeline.summary_json(path) is None  # the new content has no summary yet: never the old one's
    after_summary = pipeline.load_summary(path)
    assert_same_summary(summarize(load_trace(path, cache=False)), after_summary)
    assert after_summary.to_json() != before_summary.to_json()
    assert pipeline.summary_json(path) == orjson.loads(orjson.dumps(after_summary.to_json()))


def test_a_same_size_rewrite_in_place_is_never_served_stale(cache_dir, tmp_path):
    """The stat memo (the fast index in front of the hash) keys on size, mtime_ns, ctime_ns, inode and device: a
    rewrite through the same inode, to the same size, with the old mtime put back, still changes ctime (which no
    user call can set), so the file is hashed again and gets the new content's entries."""
    top, events = reference_events(TRACES["h100_bert"])
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps({**top, "traceEvents": events}))
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    time.sleep(2.1)  # past the racy window: the memo is written
    before = pipeline.load_summary(path)
    assert orjson.loads(cache_key._memo_path(path).read_bytes())["key"] == cache.content_key(path)
    assert pipeline.summary_json(path) is not None
    st = path.stat()
    k = next(i for i, e in enumerate(events) if e.get("cat") == "kernel" and "dur" in e)
    text = orjson.dumps(events[k]["dur"]).decode()
    events = [dict(e) for e in events]
    events[k]["dur"] = orjson.loads(text[:-1] + ("8" if text[-1] == "9" else str(int(text[-1]) + 1)))  # same length
    data = orjson.dumps({**top, "traceEvents": events})
    assert len(data) == st.st_size
    with open(path, "r+b") as f:  # in place: same inode
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old mtime back
    st2 = path.stat()
    assert (st2.st_size, st2.st_mtime_ns, st2.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert cache.content_key(path) == cache.content_key(data)  # hashed again, not the memo's old key
    assert pipeline.summary_json(path) is None
    after = pipeline.load_summary(path)
    assert after.trace.gpu_ops["dur_us"].sum() != before.trace.gpu_ops["dur_us"].sum()
    assert_same_summary(summarize(load_trace(path, cache=False)), after)


def _damage(entry, damage, other_entry):
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":  # one byte inside the data region: its hash catches it
        with open(entry, "rb") as f:
            _, start = cache_format.read_header(f)
        b = bytearray(data)
        b[(start + len(b)) // 2] ^= 0x40
        entry.write_bytes(bytes(b))
    elif damage == "flip_header":  # one byte of the header (the summary JSON): the header's hash catches it
        b = bytearray(data)
        b[200] ^= 0x01
        entry.write_bytes(bytes(b))
    elif damage == "garbage":
        entry.write_bytes(b"not a cache entry at all")
    else:  # a valid entry of another trace under this trace's name
        entry.write_bytes(other_entry.read_bytes())


@pytest.mark.parametrize("damage", ["truncate", "flip", "flip_header", "garbage", "other_entry"])
def test_a_corrupt_summary_entry_is_rebuilt_never_trusted(cache_dir, damage):
    path, other = TRACES["h100_bert"], TRACES["mi300_bert"]
    fresh = summarize(load_trace(path, cache=False))
    pipeline.load_summary(path)
    pipeline.load_summary(other)
    entry, other_entry = (
        cache.derived_path(cache.content_key(path), cache.SUMMARY),
        cache.derived_path(cache.content_key(other), cache.SUMMARY),
    )
    _damage(entry, damage, other_entry)
    damaged = entry.read_bytes()
    if damage == "flip":  # the header (and its summary JSON) is intact: the CLI's light path may use it …
        assert pipeline.summary_json(path) == orjson.loads(orjson.dumps(fresh.to_json()))
    else:
        assert pipeline.summary_json(path) is None
        assert not entry.exists()
        entry.write_bytes(damaged)
    assert pipeline.lookup_summary(cache.content_key(path), fresh.trace) is None  # … the tables are never trusted
    assert not entry.exists()
    assert_same_summary(fresh, pipeline.load_summary(path))
    assert entry.exists()  # rebuilt
    assert_same_summary(fresh, pipeline.load_summary(path))


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "other_entry"])
def test_a_corrupt_entry_is_rebuilt_never_trusted(cache_dir, damage):
    path, other = TRACES["h100_bert"], TRACES["mi300_bert"]
    fresh = load_trace(path, cache=False)
    load_trace(path)
    (entry,) = cache.entries()
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":  # one byte inside a column: the zip member's CRC-32 catches it
        b = bytearray(data)
        b[len(b) // 3] ^= 0x40
        entry.write_bytes(bytes(b))
    elif damage == "garbage":
        entry.write_bytes(b"not a zip at all")
    else:  # a valid entry of another trace under this trace's name
        load_trace(other)
        (o,) = [p for p in cache.entries() if p != entry]
        entry.write_bytes(o.read_bytes())
    assert pipeline.lookup_trace(cache.content_key(path), "x") is None
    assert not entry.exists()
    assert_same_trace(fresh, load_trace(path))
    assert entry.exists()  # rebuilt
    assert_same_trace(fresh, load_trace(path))


def test_off_switches_and_non_default_limits_bypass_the_cache(cache_dir, monkeypatch):
    path = TRACES["h100_bert"]
    monkeypatch.setenv(cache.ENV_OFF, "1")
    load_trace(path)
    assert not cache.entries()
    load_trace(path, cache=True)  # the argument wins
    assert len(cache.entries()) == 1
    monkeypatch.delenv(cache.ENV_OFF)
    cache.clear()
    load_trace(path, max_decompressed_bytes=2_000_000)
    load_trace(path, max_gzip_ratio=50)
    assert not cache.entries()


def test_size_bound_evicts_least_recently_used(cache_dir, monkeypatch):
    a, b, c = TRACES["h100_bert"], TRACES["mi300_bert"], TRACES["h100_vit"]
    load_trace(a)
    load_trace(b)
    sizes = {p: p.stat().st_size for p in cache.entries()}
    os.utime(cache.entry_path(cache.content_key(b)), (1, 1))  # b is the least recently used
    load_trace(a)  # a hit refreshes a
    assert cache.entry_path(cache.content_key(a)).stat().st_mtime > 1
    monkeypatch.setenv(cache.ENV_MAX_BYTES, str(max(sizes.values()) * 2 + 100_000))
    load_trace(c)  # the write evicts b
    names = {p.name.split("-")[0] for p in cache.entries()}
    assert cache.content_key(b) not in names and cache.content_key(a) in names and cache.content_key(c) in names
    monkeypatch.setenv(cache.ENV_MAX_BYTES, "1000")  # an entry alone over the bound is not written
    cache.clear()
    load_trace(a)
    assert not cache.entries()


def test_an_uncacheable_value_skips_the_store(cache_dir):
    trace = load_trace(TRACES["h100_bert"], cache=False)
    trace.meta.extra["odd"] = float("nan")  # JSON has no NaN: it would come back as null
    assert pipeline.store_trace("0" * 32, trace) is None
    assert not cache.entries()


@pytest.mark.slow  # the slow tier (README): a sweep or a process pool, several seconds
def test_cli_no_cache_flag_and_cache_command(cache_dir, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    src = tmp_path / "t.json.gz"
    src.write_bytes(gzip.compress(gzip.decompress(TRACES["h100_bert"].read_bytes())))

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "analyzer", *args], capture_output=True, text=True, env=env, cwd=ROOT, check=True
        ).stdout

    out_nc = cli("summary", str(src), "--json", "--no-cache")
    assert not cache.entries()
    out = cli("summary", str(src), "--json")
    assert len(cache.entries()) == 2  # the trace and its summary
    assert cli("summary", str(src), "--json") == out == out_nc  # the cached answer is the same answer
    assert cli("summary", str(src)) == cli("summary", str(src), "--no-cache")  # and the same text table
    assert "1 cached traces and 1 summaries/rank results" in cli("cache")
    assert "removed 2 cached traces, summaries and rank results" in cli("cache", "--clear")
    assert not cache.entries()


def test_a_cached_cli_summary_imports_no_pandas(cache_dir, tmp_path):
    """The CLI's second open of a trace is answered from the summary entry's header: no numpy, no pandas, no
    analysis module (0.25 s of a fresh process for pandas alone); the answer is the uncached one."""
    src = tmp_path / "t.json.gz"
    src.write_bytes(TRACES["h100_bert"].read_bytes())
    code = (
        "import sys, io, contextlib; from analyzer.cli import main; out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out): rc = main(['summary', sys.argv[1], '--json'])\n"
        "heavy = sorted(m for m in ('numpy', 'pandas', 'analyzer.summary', 'analyzer.trace') if m in sys.modules)\n"
        "print(rc, heavy); print(out.getvalue(), end='')"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run():
        return subprocess.run(
            [sys.executable, "-c", code, str(src)], capture_output=True, text=True, env=env, cwd=ROOT, check=True
        ).stdout.split("\n", 1)

    first_line, first = run()
    assert first_line.startswith("0 [") and "pandas" in first_line  # a miss parses the trace
    second_line, second = run()
    assert second_line == "0 []"
    assert (
        orjson.loads(second)
        == orjson.loads(first)
        == orjson.loads(
            orjson.dumps(summarize(load_trace(src, cache=False)).to_json(), option=orjson.OPT_SERIALIZE_NUMPY)
        )
    )


def test_object_columns_are_dictionary_encoded(cache_dir):
    path = TRACES["hta_diff_control"]
    load_trace(path)
    (entry,) = cache.entries()
    manifest, arrays = cache_format.read_container(entry)
    codes = arrays["cpu_ops/name#codes"]
    values = orjson.loads(memoryview(arrays["cpu_ops/name#values"]))
    assert codes.dtype == np.int32 and len(values) < len(codes) // 10
    assert manifest["key"] == cache.content_key(path)


def test_an_unchanged_path_is_not_hashed_again_but_a_rewrite_is(cache_dir, tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(TRACES["h100_bert"].read_bytes())
    time.sleep(2.1)  # last changed (ctime) over 2 s ago: the key may be remembered
    key = cache.content_key(path)
    memo = cache_key._memo_path(path)
    assert orjson.loads(memo.read_bytes())["key"] == key
    forged = memo.read_bytes().replace(key.encode(), b"f" * 32)
    memo.write_bytes(forged)
    assert cache.content_key(path) == key  # a memo without this cache's seal is ignored: the file is hashed again
    doc = orjson.loads(forged)
    doc.pop("seal")
    memo.write_bytes(orjson.dumps(cache_key._sealed(doc)))  # sealed by the owner: trusted
    assert cache.content_key(path) == "f" * 32  # the memo was used: no hash
    path.write_bytes(TRACES["mi300_bert"].read_bytes())  # a rewrite changes mtime/ctime/size: hashed again
    assert cache.content_key(path) == cache.content_key(TRACES["mi300_bert"].read_bytes())
    fresh = tmp_path / "fresh.json.gz"
    fresh.write_bytes(TRACES["h100_bert"].read_bytes())  # changed just now: a racy timestamp, never remembered
    cache.content_key(fresh)
    assert not cache_key._memo_path(fresh).exists()


def test_a_cached_rank_set_is_answered_without_workers(cache_dir, tmp_path, monkeypatch):
    """`ranks` stores each rank's compact result under the trace's content key; a second run answers every unchanged
    plain file in the parent, without a pool, with the same report; a changed file, a code change or a corrupt entry
    goes back to a worker."""
    from analyzer.ranks import analyze_ranks
    from analyzer.ranks.local import LocalEngine
    from analyzer.ranks.worker import RANK_KIND

    src = ROOT / "tests" / "data" / "ranks" / "hta_trace_filter"
    folder = tmp_path / "set"
    shutil.copytree(src, folder)
    time.sleep(2.1)  # the files' keys may be remembered (the stat memo's racy window): the parent reads only that
    uncached = analyze_ranks(str(folder), workers=1)  # FUSELENS_NO_CACHE is not set: this run fills the cache
    mapped = []
    real_map = LocalEngine.map
    monkeypatch.setattr(
        LocalEngine, "map", lambda self, jobs, *a, **k: mapped.append(len(jobs)) or real_map(self, jobs, *a, **k)
    )
    again = analyze_ranks(str(folder), workers=1)
    assert mapped == [] and again.to_json() == uncached.to_json()
    monkeypatch.setenv(cache.ENV_OFF, "1")
    assert analyze_ranks(str(folder), workers=1).to_json() == uncached.to_json()
    assert mapped == [2]
    monkeypatch.delenv(cache.ENV_OFF)
    files = sorted(folder.iterdir())
    key0 = cache.content_key(files[0])
    _damage(cache.derived_path(key0, RANK_KIND), "flip_header", None)
    files[1].write_bytes(gzip.compress(gzip.decompress(files[1].read_bytes()), 1))  # same JSON, new bytes: new key
    mapped.clear()
    assert analyze_ranks(str(folder), workers=1).to_json() == uncached.to_json()
    assert mapped == [2]  # the corrupt entry and the changed file: both re-done by a worker
    monkeypatch.setattr(cache, "_code_hash", lambda: "an edited analyzer")
    mapped.clear()
    analyze_ranks(str(folder), workers=1)
    assert mapped == [2]


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="Linux: resets the peak RSS")
def test_hashing_a_big_file_keeps_its_pages_out_of_the_process(tmp_path):
    """Mapped file pages count in RSS and PSS: hashing a file through one whole-file map added the file's size to
    the process (a 1.9 GiB trace keyed again after its summary, with no stat memo yet: 3.01 GiB peak, 1.59× the
    file). The windowed hash gives the one-shot key and stays within a few windows of memory."""
    path = tmp_path / "big.bin"
    block = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        for i in range(160):  # 160 MiB, not a whole number of windows + a tail
            f.write(block[i:] + block[:i])
        f.write(b"tail")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from analyzer.readers import cache\n"
        "def kib(field):\n"
        "    return int(next(x for x in open('/proc/self/status') if x.startswith(field)).split()[1])\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"  # the peak (VmHWM) starts again from the current RSS
        "before = kib('VmRSS')\n"
        f"key = cache.content_key({str(path)!r})\n"  # a fresh cache folder: no stat memo, the file is hashed
        "print(key, (kib('VmHWM') - before) * 1024)\n"
    )
    env = dict(os.environ, FUSELENS_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    out = out.stdout.split()
    assert out[0] == cache_key._hash(path.read_bytes())
    assert int(out[1]) < 64 << 20, f"hashing raised the peak RSS by {int(out[1]) >> 20} MiB"


def test_an_entry_forged_by_someone_who_can_write_the_folder_is_rebuilt(cache_dir, tmp_path, monkeypatch):
    """the entries' checksums were recomputable by anyone, so a writer of a shared cache folder could
    make one trace show another's numbers. Now the attacker's entry (trace B's tables under trace A's key, sealed
    with the attacker's own secret) fails the seal: A is parsed again and shows its own numbers."""
    a, b = TRACES["h100_bert"], TRACES["mi300_bert"]
    key_a = cache.content_key(a.read_bytes())
    attacker = tmp_path / "attacker"
    monkeypatch.setenv(cache.ENV_DIR, str(attacker))
    forged = pipeline.store_trace(key_a, load_trace(b, cache=False))
    assert forged is not None
    monkeypatch.setenv(cache.ENV_DIR, str(cache_dir))
    cache_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(forged, cache.entry_path(key_a))
    assert pipeline.lookup_trace(key_a, "a") is None  # the seal is not this cache's: never read …
    assert not cache.entry_path(key_a).exists()  # … and deleted
    t = load_trace(a)
    assert t.meta.gpu_name == load_trace(a, cache=False).meta.gpu_name != load_trace(b, cache=False).meta.gpu_name
    assert pipeline.lookup_trace(key_a, "a") is not None  # the owner's own entry is trusted


def test_a_secret_that_is_not_the_owners_is_never_used(cache_dir):
    load_trace(TRACES["h100_bert"])
    (secret,) = cache_dir.glob(".secret-*")
    assert secret.stat().st_mode & 0o777 == 0o600 and secret.stat().st_size == cache_key.SECRET_BYTES
    secret.chmod(0o644)  # readable by others: someone may know it
    cache_key._secret_for.cache_clear()
    try:
        key = cache.content_key(TRACES["h100_bert"].read_bytes())
        assert pipeline.lookup_trace(key, "t") is None  # sealed under the old secret, which is no longer trusted
    finally:
        cache_key._secret_for.cache_clear()

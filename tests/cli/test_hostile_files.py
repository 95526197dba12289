"""Hostile files and settings on the real command line (subprocess): FIFOs, symlink loops, bad settings, rank-archive
bombs, and a cache folder someone else can write. Each is one line and a bounded cost, never a hang, a traceback or
a file deleted outside the cache folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from bench.bombs import peak_tree_mb, zip_one_member, zip_two_members
from tests.conftest import ROOT

RANKS = ROOT / "tests" / "data" / "ranks" / "hta_trace_filter"
TRACE = ROOT / "sample_traces" / "hf_geglu_bf16" / "eager.json.gz"


def cli(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def one_line(p: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def cache_env(tmp_path):
    d = tmp_path / "cache"
    return {"FUSELENS_CACHE_DIR": str(d)}, d


# ------------------------------------------------------------------------------------------------ not regular files
def test_a_fifo_as_the_trace_is_refused_at_once(tmp_path, cache_env):
    env, _ = cache_env
    os.mkfifo(tmp_path / "t.json")
    p = cli("summary", tmp_path / "t.json", env=env, timeout=60)
    assert p.returncode == 2 and "t.json: is a FIFO (named pipe), not a trace file" in one_line(p)


def test_a_symlink_loop_as_the_trace_is_one_line(tmp_path, cache_env):
    env, _ = cache_env
    os.symlink(tmp_path / "b.json", tmp_path / "a.json")
    os.symlink(tmp_path / "a.json", tmp_path / "b.json")
    p = cli("summary", tmp_path / "a.json", env=env, timeout=60)
    assert p.returncode == 2 and "symbolic link loop" in one_line(p)


def test_a_device_as_the_trace_is_refused(cache_env):
    env, _ = cache_env
    p = cli("summary", "/dev/zero", env=env, timeout=60)
    assert p.returncode == 2 and "is a device, not a trace file" in one_line(p)


def test_a_fifo_where_a_cache_entry_should_be_is_not_read(tmp_path, cache_env):
    """The FIFO sits under the entry's name (summary entry and trace entry): the load goes on and replaces it."""
    env, d = cache_env
    from analyzer.readers import cache

    trace = tmp_path / "t.json.gz"
    shutil.copy(TRACE, trace)
    os.environ["FUSELENS_CACHE_DIR"] = str(d)
    try:
        key = cache.content_key(trace.read_bytes())
        d.mkdir(parents=True, exist_ok=True)
        for path in (cache.entry_path(key), cache.derived_path(key, cache.SUMMARY), cache.derived_path(key, "rank")):
            os.mkfifo(path)
    finally:
        del os.environ["FUSELENS_CACHE_DIR"]
    p = cli("summary", trace, "--json", env=env, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    p = cli("cache", env=env, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr


# ------------------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    "name, value",
    [
        ("FUSELENS_RANKS_MAX_MEMBERS", "abc"),
        ("FUSELENS_RANKS_MAX_MEMBER_BYTES", "1e"),
        ("FUSELENS_RANKS_MAX_MEMBERS", "-3"),
        ("FUSELENS_RAY_CONNECT_TIMEOUT_S", "soon"),
    ],
)
def test_a_ranks_setting_that_is_not_a_number_is_one_line(name, value, cache_env):
    env, _ = cache_env
    ray = ["--engine", "ray", "--address", "127.0.0.1:1"] if "RAY" in name else []
    p = cli("ranks", RANKS, "--workers", "1", *ray, env={**env, name: value}, timeout=120)
    assert p.returncode == 2
    line = one_line(p)
    assert name in line and value in line, line


@pytest.mark.parametrize("name", ["FUSELENS_MAX_GZIP_RATIO", "FUSELENS_MAX_DECOMPRESSED_BYTES"])
def test_a_loader_setting_that_is_not_a_number_is_one_line(name, cache_env):
    env, _ = cache_env
    p = cli("summary", TRACE, env={**env, name: "lots"}, timeout=120)
    assert p.returncode == 2 and name in one_line(p)


# ------------------------------------------------------------------------------------------------ rank archives
@pytest.mark.slow
def test_a_zip_member_bomb_is_refused_early_with_bounded_memory(tmp_path, cache_env):
    """Item 5: a 3 MB zip holding one 3 GiB member peaked at 6.1 GiB. Here a 768 MiB member (same ratio, faster to
    build) is refused after ~256 MiB; the whole process tree stays under 1 GB."""
    env, _ = cache_env
    z = tmp_path / "one.zip"
    zip_one_member(z, 768 << 20)
    assert z.stat().st_size < 8e6
    rc, line, peak_mb, _ = peak_tree_mb(
        [sys.executable, "-m", "analyzer", "ranks", str(z), "--workers", "1"], {**os.environ, **env}
    )
    assert rc == 2 and "refused as a decompression bomb" in line and "rank-0.json" in line, line
    assert peak_mb < 1000, peak_mb


@pytest.mark.slow
def test_two_member_bombs_with_two_workers_stay_bounded(tmp_path, cache_env):
    env, _ = cache_env
    z = tmp_path / "two.zip"
    zip_two_members(z, 512 << 20)
    rc, line, peak_mb, _ = peak_tree_mb(
        [sys.executable, "-m", "analyzer", "ranks", str(z), "--workers", "2"], {**os.environ, **env}
    )
    assert rc == 2 and "2 failed" in line and "decompression bomb" in line, line
    assert peak_mb < 1000, peak_mb


def test_a_small_honest_zip_still_reads(tmp_path, cache_env):
    env, _ = cache_env
    z = tmp_path / "set.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(RANKS.glob("*.json*")):
            zf.write(f, f"set/{f.name}")
    p = cli("ranks", z, "--workers", "1", env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]


def test_a_fifo_as_the_rank_set_is_one_line(tmp_path, cache_env):
    env, _ = cache_env
    os.mkfifo(tmp_path / "set.zip")
    p = cli("ranks", tmp_path / "set.zip", env=env, timeout=60)
    assert p.returncode == 2 and "not a regular file" in one_line(p)


def test_a_rank_folder_with_a_symlink_loop_and_a_fifo_reads_the_rest(tmp_path, cache_env):
    env, _ = cache_env
    folder = tmp_path / "set"
    shutil.copytree(RANKS, folder)
    os.symlink(folder / "loop-b.json", folder / "loop-a.json")
    os.symlink(folder / "loop-a.json", folder / "loop-b.json")
    os.mkfifo(folder / "rank-9.json")
    p = cli("ranks", folder, "--workers", "1", env=env, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.returncode == 0, p.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ the cache folder
def test_cache_clear_never_follows_a_stat_symlink(tmp_path, cache_env):
    """Item 6: `cache --clear` followed a `stat/` symlink and deleted every *.json in its target."""
    env, d = cache_env
    d.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.json").write_text("{}")
    os.symlink(victim, d / "stat")
    os.symlink(victim / "precious.json", d / f"{'0' * 32}-x.fltc")
    p = cli("cache", "--clear", env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (victim / "precious.json").read_text() == "{}"
    assert not (d / "stat").exists() and not os.path.islink(d / "stat")  # the planted link itself is gone
    # later runs write their memos in a folder of their own, not through a link
    os.symlink(victim, d / "stat")
    trace = tmp_path / "t.json.gz"
    shutil.copy(TRACE, trace)
    os.utime(trace, (1e9, 1e9))
    assert cli("summary", trace, env=env, timeout=180).returncode == 0
    assert sorted(os.listdir(victim)) == ["precious.json"]


def test_cache_listing_with_a_dangling_or_looping_entry_symlink(cache_env):
    """Item 8: `cache` listing ended in a traceback on a dangling entry symlink."""
    env, d = cache_env
    d.mkdir(parents=True)
    os.symlink(d / "gone", d / f"{'1' * 32}-x.fltc")
    os.symlink(d / f"{'3' * 32}-x.fltc", d / f"{'2' * 32}-x.fltc")
    os.symlink(d / f"{'2' * 32}-x.fltc", d / f"{'3' * 32}-x.fltc")
    p = cli("cache", env=env, timeout=60)
    assert p.returncode == 0 and "0 cached traces" in p.stdout and not p.stderr, p.stderr
    p = cli("cache", "--clear", env=env, timeout=60)
    assert p.returncode == 0 and not list(d.glob("*.fltc"))


def test_an_entry_symlinked_out_of_the_folder_is_never_read(tmp_path, cache_env):
    env, d = cache_env
    trace = tmp_path / "t.json.gz"
    shutil.copy(TRACE, trace)
    assert cli("summary", trace, env=env, timeout=180).returncode == 0
    entries = sorted(d.glob("*.fltc"))
    assert len(entries) == 2  # the trace's and its summary's
    for i, entry in enumerate(entries):
        outside = tmp_path / f"outside-{i}.fltc"
        shutil.move(entry, outside)
        os.symlink(outside, entry)
    p = cli("summary", trace, "--json", env=env, timeout=180)
    assert p.returncode == 0
    for i, entry in enumerate(entries):
        assert (tmp_path / f"outside-{i}.fltc").is_file()  # the files outside are left alone …
        assert entry.is_file() and not entry.is_symlink()  # … and the links replaced by entries of the folder's own

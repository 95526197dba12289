"""Every FUSELENS_* environment variable, read here and nowhere else.

SETTINGS lists each one: its default, unit and what it changes (README's "Limits" table and docs/KERNELS.md name the
same). The accessors are typed and carry the unit in their name (`..._bytes`, `..._s`). Where a module reports a bad
value itself, in its own words (the loader's limits and the ranks settings raise a TraceError naming the variable),
it reads `text(NAME)` and parses it there; `text` refuses a name this table does not declare, so a misspelt variable
fails at once instead of being silently unset.

Standard library only, and nothing imports back: the analyzer, kernels, app_pages and the fuselens command may all
import it (the import-linter contracts in pyproject.toml keep it a leaf).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple


class Setting(NamedTuple):
    default: str
    unit: str
    meaning: str


SETTINGS: dict[str, Setting] = {
    # the loader (analyzer.readers)
    "FUSELENS_MAX_DECOMPRESSED_BYTES": Setting("8 GiB", "bytes", "cap on a trace's decompressed (or plain) size"),
    "FUSELENS_MAX_GZIP_RATIO": Setting("50", "ratio", "gzip bomb/padding guard past 256 MiB of output; 0 = off"),
    "FUSELENS_DECODE_WORKERS": Setting("auto (up to 2)", "processes", "decode worker processes for a big file"),
    "FUSELENS_CACHE_DIR": Setting("$XDG_CACHE_HOME/fuselens or ~/.cache/fuselens", "path", "columnar trace cache"),
    "FUSELENS_CACHE_MAX_BYTES": Setting("4 GiB", "bytes", "the cache's size bound (least recently used go first)"),
    "FUSELENS_NO_CACHE": Setting("0", "flag", "1: neither read nor write the cache (the CLI's --no-cache)"),
    # rank sets (analyzer.ranks)
    "FUSELENS_RANKS_MAX_MEMBER_BYTES": Setting("4 GiB", "bytes", "one rank-set member's inflated size"),
    "FUSELENS_RANKS_MAX_MEMBERS": Setting("65536", "count", "members of a rank-set folder or zip"),
    "FUSELENS_RAY_CONNECT_TIMEOUT_S": Setting("5", "s", "ranks --engine ray --address: connect check"),
    # the dashboard (app_pages) and the installed command (fuselens)
    "FUSELENS_PARSE_BUDGET_BYTES": Setting("half the machine's memory", "bytes", "parses held at once per server"),
    "FUSELENS_PARSE_WAIT_S": Setting("600", "s", "how long a parse waits for the budget"),
    "FUSELENS_PROFILE_TIMEOUT_S": Setting("1800", "s", "a Profile-page run's time limit"),
    "FUSELENS_PROFILE_RUNNER": Setting("python -m kernels.profile", "JSON argv", "the runner the Profile page starts"),
    "FUSELENS_GPU_PROBE": Setting("nvidia-smi -L", "JSON argv", "the Profile page's GPU check"),
    "FUSELENS_RUNS_DIR": Setting("~/.local/share/fuselens/runs", "path", "installed: where profile runs are written"),
    # kernels
    "FUSELENS_LAUNCH": Setting("raw", "jit|fast|raw", "how the FuseLens ops launch their kernels (docs/KERNELS.md)"),
    "FUSELENS_PATH": Setting("", "path name", "the fuselens variant's path, not measured (the runner's ncu child)"),
    "FUSELENS_GIT_COMMIT": Setting("git rev-parse HEAD", "commit", "the commit manifests name (a tree without .git)"),
}

LAUNCH_MODES = ("jit", "fast", "raw")


def text(name: str) -> str:
    """The variable's value, stripped; '' when unset. KeyError for a name SETTINGS does not declare."""
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a FuseLens setting (fuselens/settings.py declares them)")
    return os.environ.get(name, "").strip()


def _argv(name: str) -> list[str] | None:
    """A JSON argument list from the environment, or None when unset."""
    raw = text(name)
    return [str(a) for a in json.loads(raw)] if raw else None


# ------------------------------------------------------------------------------------- the dashboard, the command
def profile_timeout_s() -> float:
    """$FUSELENS_PROFILE_TIMEOUT_S, else 1800 s; a value that is not a number raises ValueError (at server start)."""
    return float(text("FUSELENS_PROFILE_TIMEOUT_S") or 1800)


def profile_runner_argv() -> list[str] | None:
    """$FUSELENS_PROFILE_RUNNER (a JSON argument list), set only from the server's environment; None when unset."""
    return _argv("FUSELENS_PROFILE_RUNNER")


def gpu_probe_argv() -> list[str] | None:
    """$FUSELENS_GPU_PROBE (a JSON argument list); None when unset."""
    return _argv("FUSELENS_GPU_PROBE")


def runs_dir_path() -> Path | None:
    """$FUSELENS_RUNS_DIR; None when unset (fuselens.paths.runs_dir then picks the per-user default)."""
    raw = text("FUSELENS_RUNS_DIR")
    return Path(raw) if raw else None


# ------------------------------------------------------------------------------------------------------- kernels
def launch_mode() -> str:
    """$FUSELENS_LAUNCH: 'raw' (default), 'fast' or 'jit' (kernels.ops.launch); ValueError naming the choices
    otherwise, so a typo never silently times the wrong path."""
    mode = text("FUSELENS_LAUNCH").lower() or "raw"
    if mode not in LAUNCH_MODES:
        raise ValueError(f"FUSELENS_LAUNCH={mode!r}: choose one of {', '.join(LAUNCH_MODES)}")
    return mode


def forced_path() -> str | None:
    """$FUSELENS_PATH: the fuselens variant's path taken without measuring (kernels.models.dispatch); None unset."""
    return text("FUSELENS_PATH") or None


def git_commit() -> str:
    """$FUSELENS_GIT_COMMIT ('' when unset): the commit a tree copied without .git names in its manifests."""
    return text("FUSELENS_GIT_COMMIT")

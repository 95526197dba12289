"""Where the bundled files are: in a clone, at the repository root; in an installed wheel, inside this package.

The wheel maps sample_traces/, assets/ and .streamlit/ into fuselens/ (pyproject's package-dir), because a wheel
can only carry files that belong to a package. A clone wins when both exist, so `streamlit run app.py` in a clone
always shows the clone's own samples.
"""

from __future__ import annotations

import os
from pathlib import Path

from fuselens import settings

_PKG = Path(__file__).resolve().parent
REPO_ROOT = _PKG.parent  # the clone's root; in a wheel, site-packages


def _pick(clone: Path, installed: Path) -> Path:
    return clone if clone.exists() else installed


def samples_dir() -> Path:
    """sample_traces/: the bundled runner recordings and their manifest.json index."""
    return _pick(REPO_ROOT / "sample_traces", _PKG / "sample_traces")


def assets_dir() -> Path:
    """assets/: the favicon (local, so the app fetches nothing)."""
    return _pick(REPO_ROOT / "assets", _PKG / "assets")


def streamlit_config() -> Path:
    """.streamlit/config.toml: the server's safe defaults, which `fuselens app` passes as flags from any directory."""
    return _pick(REPO_ROOT / ".streamlit" / "config.toml", _PKG / "streamlit" / "config.toml")


def dashboard_script() -> Path:
    """The Streamlit script `fuselens app` runs (the same page set as the clone's app.py)."""
    return _PKG / "dashboard.py"


def runs_dir() -> Path:
    """Where the Profile page's runner writes: the clone's runs/ (git-ignored); installed, a per-user folder
    ($FUSELENS_RUNS_DIR, else ~/.local/share/fuselens/runs), never inside site-packages."""
    if (REPO_ROOT / "app.py").is_file():  # a clone (a wheel carries no app.py)
        return REPO_ROOT / "runs"
    env = settings.runs_dir_path()
    if env:
        return env
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "fuselens" / "runs"

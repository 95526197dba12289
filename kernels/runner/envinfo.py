"""Facts about the machine a measurement ran on: GPU, driver, torch / CUDA / Triton / Liger versions, git commit.

Everything is best effort and never raises: a missing fact is None, so a manifest is always written.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

from fuselens import settings

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], timeout_s: float = 10.0) -> str | None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=REPO_ROOT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 and res.stdout.strip() else None


def driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        return out.splitlines()[0].strip() if out else None


def git_commit() -> str | None:
    """FUSELENS_GIT_COMMIT (set when the tree was copied without .git, e.g. to a GPU box), else `git rev-parse`,
    with "-dirty" when tracked files differ from that commit. Why: a GPU box once carried a stale .git beside a
    newer working tree, and every manifest named a commit whose kernels it had not run."""
    env = settings.git_commit()
    if env:
        return env
    head = _run(["git", "rev-parse", "HEAD"], timeout_s=5.0)
    if head and _run(["git", "status", "--porcelain", "--untracked-files=no"], timeout_s=10.0):
        return head + "-dirty"
    return head


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def gpu_facts() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"name": None}
    p = torch.cuda.get_device_properties(0)
    return {
        "name": p.name,
        "capability": f"{p.major}.{p.minor}",
        "sm_count": p.multi_processor_count,
        "memory_bytes": int(p.total_memory),
        "l2_bytes": int(getattr(p, "L2_cache_size", 0)) or None,
    }


def environment() -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "gpu": gpu_facts(),
        "driver": driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
        "liger_kernel": package_version("liger-kernel") or package_version("liger_kernel"),
        "git_commit": git_commit(),
    }


def gpu_slug(name: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100_80gb_hbm3' (for file names)."""
    if not name:
        return "nogpu"
    s = name.lower().replace("nvidia", "").strip()
    return "".join(c if c.isalnum() else "_" for c in s).strip("_").replace("__", "_")

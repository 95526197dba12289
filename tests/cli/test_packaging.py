"""The package: `pip wheel .` builds, the wheel carries every module and the bundled samples, and the installed
`fuselens` command works from another directory (summary, diff, the dashboard).

The fast tests read pyproject.toml against the tree; the slow ones build the wheel and install it into a fresh venv
(its dependencies come from this machine's site-packages: the venv has --system-site-packages, the package itself
only the wheel)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HF = ROOT / "sample_traces" / "hf_geglu_bf16"


def _requirements(name: str) -> set[str]:
    out = set()
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-r"):
            out.add(line.replace(" ", ""))
    return out


def test_every_module_folder_is_a_listed_package():
    """Explicit discovery: a new sub-package left out of the list would be missing from the wheel."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("analyzer", "app_core", "app_pages", "fuselens", "kernels")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= listed, sorted(on_disk - listed)


def test_declared_dependencies_match_the_requirements_files():
    """pyproject's dependencies + `app` extra = requirements.txt (a clone's install); `dev` = requirements-dev.txt."""
    proj = PYPROJECT["project"]
    extras = proj["optional-dependencies"]
    assert set(proj["dependencies"]) | set(extras["app"]) == _requirements("requirements.txt")
    dev = {d for d in extras["dev"] if not d.startswith("fuselens[")}
    assert dev == _requirements("requirements-dev.txt")
    assert PYPROJECT["project"]["scripts"]["fuselens"] == "fuselens.cli:main"


def test_fuselens_lists_every_analyzer_subcommand():
    """Forwarded generically: whatever analyzer/cli.py defines is a `fuselens` command too."""
    from analyzer.cli import build_parser
    from fuselens.cli import _analyzer_commands, _usage

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(_analyzer_commands()) == set(sub.choices)
    usage = _usage()
    for name in [*sub.choices, "app", "profile"]:
        assert f"\n  {name} " in usage, name


def test_fuselens_forwards_and_fails_in_one_line(capsys):
    from fuselens.cli import main

    assert main(["summary", str(HF / "eager.json.gz"), "--json", "--no-cache"]) == 0
    assert '"gpu":"NVIDIA H100 80GB HBM3"' in capsys.readouterr().out
    assert main(["nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown command 'nosuch'") and "\n" not in err


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel `pip wheel .` builds, installed into a fresh venv; yields the venv's bin folder."""
    tmp = tmp_path_factory.mktemp("pkg")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp)],
        check=True,
        cwd=tmp,
    )
    (wheel,) = tmp.glob("fuselens-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    yield wheel, venv / "bin"


def _env(workdir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "FUSELENS_NO_CACHE": "1", "HOME": str(workdir)}


@pytest.mark.slow
def test_wheel_carries_the_samples_and_no_repository_clutter(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    samples = {
        p.relative_to(ROOT / "sample_traces").as_posix() for p in (ROOT / "sample_traces").rglob("*") if p.is_file()
    }
    assert {
        n.removeprefix("fuselens/sample_traces/") for n in names if n.startswith("fuselens/sample_traces/")
    } == samples
    assert "fuselens/assets/favicon.png" in names and "fuselens/streamlit/config.toml" in names
    assert not [n for n in names if n.split("/")[0] in ("tests", "bench", "scripts", "build")]


@pytest.mark.slow
def test_installed_command_from_another_directory(installed, tmp_path):
    _, bin_ = installed
    for f in ("eager", "compile"):
        (tmp_path / f"{f}.json.gz").write_bytes((HF / f"{f}.json.gz").read_bytes())

    def run(*a):
        return subprocess.run([bin_ / "fuselens", *a], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True)

    where = subprocess.run(
        [bin_ / "python", "-c", "import analyzer, fuselens.paths as p; print(analyzer.__file__, p.samples_dir())"],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(ROOT) not in where and "site-packages" in where, where  # the wheel's copy, not the clone
    s = run("summary", "eager.json.gz")
    assert s.returncode == 0 and "GPU: NVIDIA H100 80GB HBM3" in s.stdout, s.stderr
    d = run("diff", "eager.json.gz", "compile.json.gz")
    assert d.returncode == 0 and "compile vs eager" in d.stdout and "kernels/step 5 → 4" in d.stdout, d.stderr
    assert run("columns").returncode == 0
    bad = run("summary", "missing.json")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr


@pytest.mark.slow
@pytest.mark.browser
def test_installed_app_opens_on_the_bundled_samples(installed, tmp_path):
    from tests.e2e import harness as h

    if not h.CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium at /usr/bin/chromium")
    _, bin_ = installed
    port = h.free_port()
    proc = subprocess.Popen(
        [bin_ / "fuselens", "app", "--server.port", str(port), "--server.headless", "true"],
        cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "fuselens app did not serve"
                time.sleep(0.3)
        with h.chromium(width=1600, height=1000) as page:
            page.goto(url + "/compare")
            h.wait_idle(page)
            main = page.locator('[data-testid="stMain"]').inner_text()
            assert "compile vs eager" in main or "vs eager" in main, main[:400]
            assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)

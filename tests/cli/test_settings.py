"""fuselens.settings is the one reader of FUSELENS_* environment variables: no other module of the tool reads one,
every variable the code names is declared there, and the typed accessors parse what they document."""

import ast
import functools
import re
from pathlib import Path

import pytest

from fuselens import settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("analyzer", "app_pages", "fuselens", "kernels")
# written into a profile run's environment for its children and read back from /proc, never a setting
NOT_SETTINGS = {"FUSELENS_PROFILE_RUN"}


@functools.cache
def _sources(needle: str) -> list:
    """(path, syntax tree) of every module of the tool whose text holds `needle` (the others cannot matter)."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if needle in text:
                out.append((path, ast.parse(text, filename=str(path))))
    return out


def _env_reads(tree: ast.AST) -> list[int]:
    """Lines that read the environment: os.environ.get / os.getenv / os.environ[...] (not a write)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr == "getenv" or (
                f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "environ"
            ):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "environ"
        ):
            lines.append(node.lineno)
    return lines


def test_only_settings_reads_fuselens_variables():
    """An environment read elsewhere is allowed only for a variable that is not ours (HOME, XDG_*, PYTHONPATH)."""
    offenders = []
    for path, tree in _sources("environ") + _sources("getenv"):
        if path == ROOT / "fuselens" / "settings.py":
            continue
        text = path.read_text(encoding="utf-8").splitlines()
        names = {
            t.id: node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for line in _env_reads(tree):
            src = text[line - 1]
            named = [v for k, v in names.items() if re.search(rf"\b{k}\b", src)]
            if "FUSELENS_" in src or any(v.startswith("FUSELENS_") for v in named):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {src.strip()}")
    assert offenders == []


def test_every_variable_the_code_names_is_declared():
    named = set()
    for _, tree in _sources("FUSELENS_"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named |= set(re.findall(r"^FUSELENS_[A-Z0-9_]+$", node.value))
    assert named - NOT_SETTINGS <= set(settings.SETTINGS), sorted(named - NOT_SETTINGS - set(settings.SETTINGS))
    assert {"FUSELENS_LAUNCH", "FUSELENS_NO_CACHE", "FUSELENS_MAX_DECOMPRESSED_BYTES"} <= named


def test_text_refuses_an_undeclared_name():
    with pytest.raises(KeyError, match="FUSELENS_NO_CACHES is not a FuseLens setting"):
        settings.text("FUSELENS_NO_CACHES")


def test_typed_accessors(monkeypatch, tmp_path):
    for name in ("FUSELENS_PROFILE_TIMEOUT_S", "FUSELENS_PROFILE_RUNNER", "FUSELENS_RUNS_DIR", "FUSELENS_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert settings.profile_timeout_s() == 1800.0
    assert settings.profile_runner_argv() is None and settings.runs_dir_path() is None
    assert settings.forced_path() is None
    monkeypatch.setenv("FUSELENS_PROFILE_TIMEOUT_S", " 90 ")
    monkeypatch.setenv("FUSELENS_PROFILE_RUNNER", '["python", "standin.py", 3]')
    monkeypatch.setenv("FUSELENS_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("FUSELENS_PATH", "dual_gemm")
    assert settings.profile_timeout_s() == 90.0
    assert settings.profile_runner_argv() == ["python", "standin.py", "3"]
    assert settings.runs_dir_path() == tmp_path
    assert settings.forced_path() == "dual_gemm"

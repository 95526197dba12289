"""docs/ARCHITECTURE.md names every module of the code it maps, so a newcomer finds each one from that page."""

from __future__ import annotations

import re

from tests.conftest import ROOT

PACKAGES = ("analyzer", "app_core", "app_pages", "kernels", "fuselens")


def _named() -> set[tuple[str, str | None, str]]:
    """(package, subpackage or None, module) for every module the "Every module" section names: a bold `**pkg/**`
    opens a package, a bullet's leading `sub/`: opens its subpackage, and every `name` in backticks after it counts."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Every module", 1)[1].split("\n## ", 1)[0]
    named: set[tuple[str, str | None, str]] = set()
    pkg = None
    for line in section.splitlines():
        for part in re.split(r"(?=\*\*[a-z_]+/\*\*)", line):
            m = re.match(r"\*\*([a-z_]+)/\*\*", part)
            if m:
                pkg = m.group(1)
            body, sub = part, None
            lead = re.match(r"\s*-\s*`([a-z_]+)/`:?", part)
            if lead:
                sub, body = lead.group(1), part[lead.end() :]
            for token in re.findall(r"`([A-Za-z_][A-Za-z0-9_.]*)`", body):
                named.add((pkg, sub, token.removesuffix(".py")))
            for s, token in re.findall(r"`([a-z_]+)/`[^`]*?`([a-z_]+)`", body):  # "`report/`: `blocks`" mid-line
                named.add((pkg, s, token))
            for chunk in re.split(r"(?=`[a-z_]+/`)", body):
                head = re.match(r"`([a-z_]+)/`", chunk)
                if head:
                    for token in re.findall(r"`([A-Za-z_][A-Za-z0-9_.]*)`", chunk[head.end() :]):
                        named.add((pkg, head.group(1), token))
    return named


def test_every_module_is_named():
    named = _named()
    missing = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT / pkg)
            if path.name == "__init__.py":
                continue
            sub = rel.parts[0] if len(rel.parts) > 1 else None
            if (pkg, sub, path.stem) not in named:
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


def test_the_check_fails_for_an_unnamed_module():
    """The parser is not vacuous: a module the page does not name is reported."""
    named = _named()
    assert ("analyzer", "diff", "match") in named and ("analyzer", "diff", "no_such_module") not in named
    assert ("kernels", "ops", "launch_triton") in named and ("app_pages", None, "plan") in named

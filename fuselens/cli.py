"""`fuselens`: the installed command. `fuselens app` starts the dashboard; `fuselens profile` is the GPU runner
(`python -m kernels.profile`); every other subcommand is the analyzer's (`python -m analyzer …`: summary, diff,
ranks, columns, cache and whatever analyzer/cli.py defines), forwarded as is, so a subcommand added there is here too.

Exit codes are the analyzer's: 0 success, 2 a trace error (one line on stderr), 1 anything unexpected.
"""

from __future__ import annotations

import sys

# Subcommands this module owns; everything else goes to analyzer.cli.
APP = "app"
PROFILE = "profile"


def _analyzer_commands() -> dict[str, str]:
    """{name: help} of the analyzer's subcommands, read from its own parser (one definition of them)."""
    import argparse

    from analyzer.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: helps.get(name, "") for name in action.choices}
    return {}


def _usage() -> str:
    rows = [
        (APP, "start the dashboard (bundled H100 samples already compared); Streamlit flags pass through"),
        *_analyzer_commands().items(),
        (PROFILE, "record eager / compile / Liger / FuseLens traces on this machine's GPU (needs the gpu extra)"),
    ]
    width = max(len(n) for n, _ in rows)
    lines = "\n".join(f"  {n.ljust(width)}  {h}" for n, h in rows)
    return (
        "usage: fuselens COMMAND [ARGS…]   (fuselens COMMAND --help for a command's own flags)\n\n"
        f"FuseLens: what did kernel fusion buy us, and where is the rest?\n\ncommands:\n{lines}\n"
    )


def _streamlit_flags(config_toml: str) -> list[str]:
    """`--section.key value` flags from the dashboard's .streamlit/config.toml, so `fuselens app` gets the same safe
    defaults (local address, upload size, no file watcher, …) from any working directory."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: Streamlit depends on `toml`
        import toml as tomllib  # type: ignore[no-redef]
    cfg = tomllib.loads(config_toml)
    flags = []
    for section, values in cfg.items():
        for key, value in values.items():
            if isinstance(value, list):  # Streamlit takes a list option as the flag repeated, one value each
                flags += [f"--{section}.{key}={v}" for v in value]
            elif isinstance(value, bool):
                flags.append(f"--{section}.{key}={'true' if value else 'false'}")
            else:
                flags.append(f"--{section}.{key}={value}")
    return flags


def _app(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(
            "usage: fuselens app [STREAMLIT FLAGS…]\n\nStart the FuseLens dashboard (`streamlit run` on the installed "
            "pages), opening on the bundled samples. Flags go to Streamlit and override the safe defaults, e.g.\n"
            "  fuselens app --server.port 8502 --server.headless true"
        )
        return 0
    from streamlit.web import cli as stcli

    from fuselens.paths import dashboard_script, streamlit_config

    cfg = streamlit_config()
    flags = _streamlit_flags(cfg.read_text()) if cfg.is_file() else []
    given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}  # `--server.port 8502` or `--server.port=8502`
    flags = [f for f in flags if f.split("=", 1)[0] not in given]  # the user's flags win
    sys.argv = ["streamlit", "run", str(dashboard_script()), *flags, *argv]
    try:
        stcli.main()
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def _profile(argv: list[str]) -> int:
    try:
        from kernels.runner.run import main as profile_main
    except ModuleNotFoundError as err:
        print(f"error: fuselens profile needs the GPU extra (pip install 'fuselens[gpu]'): {err}", file=sys.stderr)
        return 2
    sys.argv = ["fuselens profile", *argv]
    try:
        profile_main()
    except SystemExit as done:
        return int(done.code or 0) if not isinstance(done.code, str) else 2
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `fuselens diff … | head`: the reader left; not an error worth a traceback
        sys.stderr.close()
        return 0


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from fuselens import __version__

        print(f"fuselens {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == APP:
        return _app(rest)
    if command == PROFILE:
        return _profile(rest)
    if command not in _analyzer_commands():
        print(f"error: unknown command {command!r}; run `fuselens --help` for the list", file=sys.stderr)
        return 2
    from analyzer.cli import main as analyzer_main

    try:
        return analyzer_main(argv, prog="fuselens")
    except SystemExit as done:  # argparse: --help (0) or a usage error (2)
        return int(done.code or 0) if not isinstance(done.code, str) else 2

"""Typed errors. The UI and CLI decide how to show them; the analyzer never prints."""

from __future__ import annotations


class FuseLensError(Exception):
    """Base class for every error FuseLens raises on purpose."""


class TraceError(FuseLensError):
    """A trace cannot be read. str(err) is one line: '<file>: <problem>'."""

    def __init__(self, source: str, problem: str):
        # One line, always: an upload's name is user text and may hold line breaks (\n, \r, U+2028).
        self.source = " ".join(str(source).split())
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{self.source}: {self.problem}")


class DiffError(FuseLensError):
    """Two traces cannot be compared (e.g. no kernels in one of them). One line, like TraceError."""

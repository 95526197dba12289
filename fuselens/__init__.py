"""FuseLens as an installed tool: the `fuselens` command (fuselens.cli) and where its bundled files live
(fuselens.paths). The analysis is the `analyzer` package; the dashboard is `app_pages` (pages) and `app_core` (their
state and helpers), started by `fuselens app`."""

__version__ = "0.1.0"

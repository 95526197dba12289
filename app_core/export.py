"""PNG / SVG export of charts for design reviews (kaleido, driving the machine's Chromium).

Why a persistent kaleido server: a cold kaleido call starts Chromium (~2 s); the sync server keeps one warm, so a
second export takes ~0.2 s. Why a lock: that server is one browser per process, shared by every session.
Exports use the light slide theme (analyzer.figures.theme) at 16:9, and put the run context (GPU, workload,
shapes, dtype) under the title: a PNG pasted into a review must say what it shows.
"""

from __future__ import annotations

import atexit
import copy
import logging
import threading
import warnings

import plotly.graph_objects as go

from analyzer.figures import theme

log = logging.getLogger("fuselens.app")

_LOCK = threading.Lock()
_SERVER_STARTED = False
WIDTH, HEIGHT = 1600, 900  # 16:9 slide


def for_slide(fig: go.Figure, title: str, subtitle: str) -> go.Figure:
    """A copy of `fig` in the slide theme (analyzer.figures.theme) at 16:9, titled with what it shows and, under it,
    the run context. `title` and `subtitle` are raw text: chart_title escapes them (they can come from uploads).

    The top of a slide is laid out in pixels, top down, so nothing lands on anything else: the title (one line per
    wrapped line), the subtitle, then a legend that sat above the plot, then the subplot titles, then the plot. On
    screen those share Plotly's automatic top margin, and at 16:9 a subplot title met the subtitle and a legend the
    title."""
    out = go.Figure(copy.deepcopy(fig.to_dict()))
    theme.apply_slide_theme(out, title, subtitle=subtitle or "")
    height = max(HEIGHT, int(out.layout.height or 0))
    lines = 1 + (str(out.layout.title.text or "").count("<br>") if out.layout.title else 0)
    y = TITLE_TOP_PX + TITLE_LINE_PX * lines + (SUBTITLE_PX if subtitle else 0)  # bottom of the title block
    out.update_layout(title=dict(yref="container", yanchor="top", y=1.0 - TITLE_TOP_PX / height))
    leg = out.layout.legend
    if out.layout.showlegend is not False and leg.y is not None and leg.y > 1 and leg.yref != "container":
        out.update_layout(legend=dict(yref="container", yanchor="top", y=1.0 - (y + GAP_PX) / height))
        y += GAP_PX + LEGEND_PX
    if any(a.yref == "paper" and (a.y or 0) >= 1 for a in out.layout.annotations or ()):
        y += SUBPLOT_TITLE_PX  # make_subplots' titles hang just above the plot
    out.update_layout(width=WIDTH, height=height, margin=dict(t=int(y + GAP_PX)))
    return out


# The slide's title block, in pixels (16:9 at 1600 × 900; the theme's title 24 px, subtitle 14 px, legend 13 px).
TITLE_TOP_PX = 18
TITLE_LINE_PX = 34
SUBTITLE_PX = 26
LEGEND_PX = 30
SUBPLOT_TITLE_PX = 26
GAP_PX = 14


def _ensure_server() -> None:
    global _SERVER_STARTED
    if _SERVER_STARTED:
        return
    try:
        import kaleido

        kaleido.start_sync_server(silence_warnings=True)
        atexit.register(kaleido.stop_sync_server, silence_warnings=True)
        _SERVER_STARTED = True
    except Exception:  # older kaleido: plain (cold) calls still work
        log.info("kaleido sync server unavailable; exporting with cold starts")
        _SERVER_STARTED = True


_PREWARM: threading.Thread | None = None


def prewarm() -> None:
    """Start kaleido's Chromium and load its plotly.js in the background, once per server (called on every script
    run; the first one starts it): a cold export costs ~2.5 s (Chromium start + the first render), a warm one ~0.3 s, and a user clicking
    PNG should get the warm one. The cost: one headless Chromium per server (~150 MB) whether or not anyone exports."""
    global _PREWARM
    if _PREWARM is not None:
        return
    _PREWARM = threading.Thread(target=_warm, name="fuselens-kaleido-warm", daemon=True)
    _PREWARM.start()


def _warm() -> None:
    try:
        to_image(go.Figure(go.Bar(x=[1], y=[1])), "png")
    except Exception:  # no Chromium for kaleido: the export button says so when clicked
        log.info("kaleido pre-warm failed", exc_info=True)


def to_image(fig: go.Figure, fmt: str) -> bytes:
    """Render `fig` to 'png' (2x scale, crisp on retina slides) or 'svg'. Raises on failure; callers say so inline."""
    with _LOCK:
        _ensure_server()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "kopts ignored with a server": expected
            return fig.to_image(
                format=fmt,
                width=fig.layout.width or WIDTH,
                height=fig.layout.height or HEIGHT,
                scale=2 if fmt == "png" else 1,
            )

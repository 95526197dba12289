"""PNG / SVG export of charts for design reviews (kaleido, driving the machine's Chromium).

Why a persistent kaleido server: a cold kaleido call starts Chromium (~2 s); the sync server keeps one warm, so a
second export takes ~0.2 s. Why a lock: that server is one browser per process, shared by every session.
Exports use the light slide theme (analyzer.figures.theme when present, else a local equivalent) at 16:9, and put
the run context (GPU, workload, shapes, dtype) in the title: a PNG pasted into a review must say what it shows.
"""

from __future__ import annotations

import atexit
import copy
import logging
import threading

import plotly.graph_objects as go

log = logging.getLogger("fuselens.app")

_LOCK = threading.Lock()
_SERVER_STARTED = False
WIDTH, HEIGHT = 1600, 900  # 16:9 slide


def _local_slide_theme(fig: go.Figure) -> go.Figure:
    """Light, high-contrast, large type: readable when projected. Mirrors analyzer.figures.theme until it lands."""
    fig.update_layout(
        template="plotly_white",
        font=dict(family="Inter, Helvetica, Arial, sans-serif", size=16, color="#1F2933"),
        paper_bgcolor="white",
        plot_bgcolor="white",
    )
    return fig


def slide_theme(fig: go.Figure) -> go.Figure:
    try:
        from analyzer.figures import theme as _theme
    except ImportError:
        return _local_slide_theme(fig)
    for name in ("apply_slide_theme", "apply", "slide", "apply_theme"):
        fn = getattr(_theme, name, None)
        if callable(fn):
            try:
                out = fn(fig)
                return out if isinstance(out, go.Figure) else fig
            except Exception:  # a theme bug must not block an export
                log.exception("slide theme failed; using the local one")
                break
    return _local_slide_theme(fig)


def for_slide(fig: go.Figure, title: str, subtitle: str) -> go.Figure:
    """A copy of `fig` in the slide theme with a two-line title: what the chart is, and the run context."""
    out = slide_theme(go.Figure(copy.deepcopy(fig.to_dict())))
    sub = f"<br><span style='font-size:15px;color:#52606D'>{subtitle}</span>" if subtitle else ""
    height = max(HEIGHT, int(out.layout.height or 0))
    top = max(int((out.layout.margin.t or 0)), 110)
    out.update_layout(
        title=dict(text=f"{title}{sub}", x=0.01, xanchor="left", y=0.98, yanchor="top"),
        width=WIDTH,
        height=height,
        margin=dict(t=top + 20),
    )
    return out


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


def to_image(fig: go.Figure, fmt: str) -> bytes:
    """Render `fig` to 'png' (2x scale, crisp on retina slides) or 'svg'. Raises on failure; callers say so inline."""
    import warnings

    with _LOCK:
        _ensure_server()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "kopts ignored with a server": expected
            return fig.to_image(format=fmt, width=fig.layout.width or WIDTH, height=fig.layout.height or HEIGHT, scale=2 if fmt == "png" else 1)

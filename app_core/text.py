"""The dashboard's one Markdown escaper.

Streamlit renders Markdown in st.markdown, st.caption, st.error, metric labels … and trace names, file names and
labels come from files users upload. `esc` keeps `<img onerror=…>`, `[link](javascript:…)`, `![](http://tracker)`,
`$…$` (LaTeX) or `:red[…]` / `:material/…:` (Streamlit's colour and icon syntax) in a kernel name inert text.
"""

from __future__ import annotations

import re

from analyzer.api import safe_text

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'])")


def esc(text: object, limit: int = 300) -> str:
    """Text from a trace or a user, made inert for Streamlit's Markdown, on one line of at most `limit` characters:
    escape sequences, controls and bidi overrides removed (analyzer.fmt.safe_text), then every character Markdown,
    HTML or Streamlit's own syntax acts on backslash-escaped (`$` LaTeX, `:` icons and colours, `<` HTML, links,
    emphasis, tables, headings). The app's one escaper: nothing reaches st.markdown from a file without it."""
    return _MD_SPECIAL.sub(r"\\\1", safe_text(str(text), limit))

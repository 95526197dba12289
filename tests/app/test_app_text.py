"""app_core.text.esc, the dashboard's one Markdown escaper: hostile names render as themselves, on one line."""

from __future__ import annotations

import html
import string

import pytest
from markdown_it import MarkdownIt

from analyzer.report import md_escape
from app_core import ui
from app_core.text import esc

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![](http://tracker.example/p.png)",
    "**bold** _em_ `code` ~~gone~~",
    "# heading",
    "| a | b |",
    "$x^2$ and :red[alarm] and :material/home:",
    "1. not a list",
    "- not a list",
    "&lt;b&gt; entity",
    "a\\*b",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_renders_as_itself(text):
    """CommonMark (markdown-it, the reference parser) renders the escaped text as one paragraph of the same
    characters: no tag, link, image, emphasis, heading, list or entity comes through."""
    out = MarkdownIt("commonmark").enable("table").enable("strikethrough").render(esc(text))
    assert out == f"<p>{html.escape(text, quote=False)}</p>\n"


def test_every_character_the_report_escaper_acts_on_is_escaped_here_too():
    """The safer of the two character sets: whatever analyzer.report.md_escape (Markdown files) changes, esc escapes;
    esc also covers what Streamlit adds to Markdown ($ LaTeX, : icons and colours) and HTML's < > &."""
    for ch in string.printable.strip():
        if md_escape(ch) != ch:
            assert esc(ch) == "\\" + ch, ch
    for ch in "$:<>&()+-.=\"'":
        assert esc(ch) == "\\" + ch, ch
    for ch in string.ascii_letters + string.digits + ",;/?@%^µ→":
        assert esc(ch) == ch


def test_controls_escape_sequences_and_bidi_overrides_go_and_text_stays_on_one_line():
    assert esc("a\x1b[31mred\x1b[0m\u202eb\x07c") == "aredbc"
    assert esc("two\nlines\tand   spaces") == "two lines and spaces"
    assert esc("x" * 500) == "x" * 299 + "…"
    assert esc("kernel_name", 5) == "kern…"
    assert esc(None) == "None" and esc(12.5) == "12\\.5"


def test_pages_reach_the_same_escaper():
    assert ui.esc is esc

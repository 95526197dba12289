"""The report's blocks rendered as one self-contained HTML document or as Markdown.

A report is a list of blocks rendered twice: ("h1"|"h2"|"h3"|"p"|"note"|"lead", text), ("badge", verdict, text),
("cards", [(title, [lines])]), ("table", headers, rows), ("figure", fig) — HTML only, ("bars", rows) — Markdown only,
("list", [items]).
"""

from __future__ import annotations

from analyzer.figures.theme import fit_layout
from analyzer.fmt import html_text, safe_text
from analyzer.report.text import Name

# --- HTML ---------------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:Inter,Helvetica Neue,Helvetica,Arial,sans-serif;color:#1F2933;margin:2rem auto;max-width:1400px;
padding:0 1.5rem;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{margin-top:2.4rem;border-bottom:2px solid #E4E7EB;padding-bottom:.3rem}
h3{margin-top:1.6rem;color:#323F4B}p.ctx{color:#52606D;margin-top:0}
.cards{display:flex;flex-wrap:wrap;gap:1rem;margin:1.2rem 0}
.card{border:1px solid #CBD2D9;border-left:6px solid #0072B2;border-radius:6px;padding:.8rem 1.1rem;min-width:320px;
flex:1;background:#F5F7FA}.card h3{margin:.1rem 0 .5rem 0}.card li{margin:.15rem 0}
table{border-collapse:collapse;margin:.6rem 0 1rem 0;font-size:.88rem;width:100%}
th,td{border:1px solid #E4E7EB;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#F5F7FA}td{word-break:break-word;max-width:520px}
.note{background:#FFF8E1;border-left:4px solid #E69F00;padding:.4rem .8rem;margin:.5rem 0}
.fig{margin:.5rem 0 1rem 0}
.lead{font-size:1.15rem;margin:.3rem 0}
.badge{padding:.45rem .9rem;margin:.4rem 0;border-radius:6px;font-weight:600;border:1px solid}
.badge.ok{background:#E3F9E5;border-color:#2F8132;color:#0E5814}
.badge.bad{background:#FFE3E3;border-color:#CF1124;color:#8A041A}
.badge.unk{background:#F5F7FA;border-color:#9AA5B1;color:#323F4B}
"""


def _cell_html(c) -> str:
    """A cell: text (newlines become <br>), a Name (short, full name as tooltip) or a list of those."""
    if isinstance(c, list):
        return "<br>".join(_cell_html(x) for x in c)
    if isinstance(c, Name):
        return f'<span title="{html_text(c.full, quote=True)}">{html_text(c, quote=True)}</span>'
    return "<br>".join(html_text(x, quote=True) for x in str(c).split("\n"))


def render_html(blocks: list[tuple], title: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title, quote=True)}</title><style>{_CSS}</style></head><body>",
    ]
    plotly_js_done = False
    first_p = True
    for blk in blocks:
        kind = blk[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{html_text(blk[1], quote=True)}</{kind}>")
        elif kind == "lead":
            out.append(f'<p class="lead"><strong>{html_text(blk[1], quote=True)}</strong></p>')
        elif kind == "p":
            cls = ' class="ctx"' if first_p else ""
            first_p = False
            out.append(f"<p{cls}>{_cell_html(blk[1])}</p>")
        elif kind == "note":
            out.append(f'<div class="note">{_cell_html(blk[1])}</div>')
        elif kind == "badge":
            cls = {"comparable": "ok", "skewed": "bad"}.get(blk[1], "unk")
            out.append(
                f'<div class="badge {cls}"><b>{html_text(blk[1].upper(), quote=True)}</b> {html_text(blk[2], quote=True)}</div>'
            )
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{_cell_html(x)}</li>" for x in blk[1]) + "</ul>")
        elif kind == "cards":
            out.append('<div class="cards">')
            for t, lines in blk[1]:
                out.append(f'<div class="card"><h3>{html_text(t, quote=True)}</h3><ul>')
                out.append("".join(f"<li>{html_text(x, quote=True)}</li>" for x in lines))
                out.append("</ul></div>")
            out.append("</div>")
        elif kind == "table":
            _, headers, rows = blk
            out.append(
                "<table><thead><tr>"
                + "".join(f"<th>{html_text(h, quote=True)}</th>" for h in headers)
                + "</tr></thead><tbody>"
            )
            for row in rows:
                out.append("<tr>" + "".join(f"<td>{_cell_html(c)}</td>" for c in row) + "</tr>")
            out.append("</tbody></table>")
        elif kind == "figure":
            fig = fit_layout(blk[1])  # the legend below the x-axis title, not on it (as in the app)
            # plotly.js (~4.6 MB) inlined once, so the file opens offline; later figures reuse it
            div = fig.to_html(
                full_html=False,
                include_plotlyjs=not plotly_js_done,
                config={"displaylogo": False, "responsive": True},
            )
            plotly_js_done = True
            out.append(f'<div class="fig">{div}</div>')
        # 'bars' is Markdown-only: the HTML has the chart
    out.append("</body></html>")
    return "\n".join(out)


# --- Markdown -----------------------------------------------------------------------------------------------------

_MD_SPECIAL = set("\\`*_{}[]#!|~")


def md_escape(s) -> str:
    """Text that renders as itself in Markdown (CommonMark/GFM): HTML inert (&lt; &gt; &amp;), emphasis, code, link,
    table and heading characters backslash-escaped, on one line with no escape sequence, control or bidi override
    (`fmt.safe_text`)."""
    s = safe_text(s)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in s)


def _md_cell(c) -> str:
    if isinstance(c, list):
        return "<br>".join(_md_cell(x) for x in c)
    return "<br>".join(md_escape(x) for x in str(c).split("\n"))


def render_md(blocks: list[tuple]) -> str:
    out: list[str] = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h1":
            out += [f"# {md_escape(blk[1])}", ""]
        elif kind == "h2":
            out += [f"## {md_escape(blk[1])}", ""]
        elif kind == "h3":
            out += [f"### {md_escape(blk[1])}", ""]
        elif kind == "lead":
            out += [f"**{md_escape(blk[1])}**", ""]
        elif kind == "p":
            out += [md_escape(blk[1]), ""]
        elif kind == "note":
            out += [f"> **Note:** {md_escape(blk[1])}", ""]
        elif kind == "badge":
            out += [f"> **{md_escape(blk[1].upper())}** {md_escape(blk[2])}", ""]
        elif kind == "list":
            out += [f"- {md_escape(x)}" for x in blk[1]] + [""]
        elif kind == "cards":
            for t, lines in blk[1]:
                out += [f"### {md_escape(t)}", ""] + [f"- {md_escape(x)}" for x in lines] + [""]
        elif kind == "table":
            _, headers, rows = blk
            out.append("| " + " | ".join(md_escape(h) for h in headers) + " |")
            out.append("|" + "---|" * len(headers))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("")
        elif kind == "bars":
            out.append("```text")
            width = max((len(safe_text(r[0])) for r in blk[1]), default=0)
            for run, bar, total in blk[1]:
                # nothing renders in a code block, but a label could hold ``` and close it; no raw < > either
                safe = safe_text(run).replace("`", "'").replace("<", "‹").replace(">", "›")
                line = f"{safe:<{width}}  {bar}  {total}".rstrip()
                out.append(line)
            out += ["```", ""]
    return "\n".join(out).rstrip() + "\n"

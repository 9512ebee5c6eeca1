"""HTML building blocks of the phifit report: page shell, tables, figures, notes.

Pure string formatting (escaped), no statistics and no JavaScript: the page is one
self-contained file whose figures are embedded as base64 PNG, so it opens offline.
The page never scrolls sideways: a table wider than the column scrolls inside its own box
(``display: block; overflow-x: auto``), long words and code wrap, figures shrink to fit.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from typing import Any

from ..intervals import BOUND_TOL, bound_end, interval_text, param_bounds  # noqa: F401 (used as T.*)

CSS = """
:root { --ink: #1a1a1a; --muted: #555; --rule: #d0d0d0; --accent: #0072B2; --warn: #D55E00;
        --bg-soft: #f6f7f8; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: var(--ink);
       margin: 0; line-height: 1.45; font-size: 15px; background: white; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-top: 8px; border-top: 2px solid var(--rule); }
h3 { font-size: 16px; margin: 20px 0 6px; }
p.meta { color: var(--muted); margin: 0 0 16px; font-size: 13px; }
nav ol { columns: 2; font-size: 14px; margin: 8px 0 0; padding-left: 22px; }
nav a { color: var(--accent); text-decoration: none; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13.5px;
        font-variant-numeric: tabular-nums; display: block; max-width: 100%; overflow-x: auto; }
main, section, p, li, figcaption, .headline { overflow-wrap: anywhere; }
code { overflow-wrap: anywhere; white-space: pre-wrap; }
th, td { border-bottom: 1px solid var(--rule); padding: 4px 10px; text-align: right;
         vertical-align: top; overflow-wrap: normal; }
td { white-space: nowrap; }
td.l { white-space: normal; }
th { background: var(--bg-soft); font-weight: 600; }
td.l, th.l { text-align: left; }
tr.flag td { color: var(--warn); font-weight: 600; }
figure { margin: 10px 0 18px; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; display: block; }
figcaption { font-size: 13px; color: var(--muted); margin-top: 4px; }
figcaption a { color: var(--accent); }
.formula { font-family: "DejaVu Sans Mono", monospace; background: var(--bg-soft);
           padding: 8px 12px; display: inline-block; border-radius: 4px; max-width: 100%; }
ul.warnings li { color: var(--warn); margin-bottom: 3px; }
ul.notes li { color: var(--muted); margin-bottom: 3px; }
.ok { color: #009E73; font-weight: 600; }
.bad { color: var(--warn); font-weight: 600; }
.missing { background: #fff4e5; border-left: 4px solid #E69F00; padding: 6px 12px; }
pre { background: var(--bg-soft); padding: 10px; font-size: 12.5px; white-space: pre-wrap;
      overflow-wrap: anywhere; }
.headline { border: 2px solid var(--accent); background: #f2f7fb; border-radius: 6px;
            padding: 8px 18px 6px; margin: 4px 0 14px; font-size: 14.5px; }
.headline ul { margin: 4px 0; padding-left: 18px; }
.headline li { margin-bottom: 3px; }
.headline .phi { font-size: 17px; font-weight: 700; }
.headline p.hw { margin: 6px 0 0; font-weight: 600; }
.headline ul.warnings { font-size: 13.5px; }
@media print { main { max-width: none; padding: 0; } h2 { page-break-after: avoid; }
               figure { page-break-inside: avoid; } }
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def num(value: Any, digits: int = 4, *, signed: bool = False) -> str:
    """A number with ``digits`` significant figures; n/a for None/NaN."""
    if value is None:
        return "n/a"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return esc(value)
    if not math.isfinite(x):
        return "n/a"
    text = f"{x:+.{digits}g}" if signed else f"{x:.{digits}g}"
    return text


def fixed(value: Any, places: int = 4, *, signed: bool = False) -> str:
    """A number with ``places`` decimals; n/a for None/NaN."""
    if value is None:
        return "n/a"
    x = float(value)
    if not math.isfinite(x):
        return "n/a"
    return f"{x:+.{places}f}" if signed else f"{x:.{places}f}"


def count(value: Any) -> str:
    """Parameter or token counts as 12.3M, 1.03B."""
    if value is None:
        return "n/a"
    x = float(value)
    if not math.isfinite(x):
        return "n/a"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def interval(iv: Sequence[Any] | None, fmt=num, bounds: Sequence[float] | None = None) -> str:
    """``[lo, hi]``; with ``bounds`` (the box searched) an end on a bound says so (:func:`interval_text`)."""
    if not iv or iv[0] is None or iv[1] is None:
        return ""
    if bounds is not None:
        return esc(interval_text(iv[0], iv[1], bounds, fmt=fmt))
    return f"[{fmt(iv[0])}, {fmt(iv[1])}]"


#: An interval end within this distance of a box bound (relative, for bounds beyond +-1) is
#: "at the bound": censored by the search box, not determined by the data.
def table(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    left: int = 1,
    flags: Sequence[bool] | None = None,
    caption: str | None = None,
    left_last: bool = False,
) -> str:
    """An HTML table; the first ``left`` columns (and the last when ``left_last``) are
    left-aligned; cells are pre-escaped strings (use :func:`esc` for text)."""
    n_cols = len(header)
    lefts = set(range(left)) | ({n_cols - 1} if left_last else set())
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append(
        "<thead><tr>"
        + "".join(f'<th class="{"l" if i in lefts else ""}">{h}</th>' for i, h in enumerate(header))
        + "</tr></thead><tbody>"
    )
    for k, row in enumerate(rows):
        cls = ' class="flag"' if flags and flags[k] else ""
        out.append(
            f"<tr{cls}>"
            + "".join(f'<td class="{"l" if i in lefts else ""}">{c}</td>' for i, c in enumerate(row))
            + "</tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


def figure(png: bytes, *, alt: str, caption: str, files: dict[str, str]) -> str:
    """An embedded PNG figure with a caption linking the PNG and SVG files."""
    data = base64.b64encode(png).decode("ascii")
    links = " · ".join(f'<a href="{esc(path)}">{esc(kind.upper())}</a>' for kind, path in files.items())
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
        f"<figcaption>{caption} <span>({links})</span></figcaption></figure>"
    )


def bullet_list(items: Sequence[str], cls: str) -> str:
    if not items:
        return ""
    return f'<ul class="{cls}">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def missing(text: str) -> str:
    return f'<p class="missing">{esc(text)}</p>'


def page(title: str, meta: str, sections: Sequence[tuple[str, str, str]], lead: str = "") -> str:
    """The whole page: ``lead`` (html, the headline box) under the title, then the table of
    contents and ``sections``, each (anchor, heading, body html)."""
    nav = "".join(f'<li><a href="#{esc(a)}">{esc(h)}</a></li>' for a, h, _ in sections)
    body = "\n".join(f'<section id="{esc(a)}"><h2>{esc(h)}</h2>\n{b}\n</section>' for a, h, b in sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="phifit">
<title>{esc(title)}</title>
<style>{CSS}</style>
</head>
<body>
<main>
<h1>{esc(title)}</h1>
<p class="meta">{meta}</p>
{lead}
<nav><ol>{nav}</ol></nav>
{body}
</main>
</body>
</html>
"""

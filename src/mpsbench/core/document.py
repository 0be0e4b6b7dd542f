"""Reports as Markdown and HTML that agree."""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Link:
    text: str
    url: str


@dataclass(frozen=True)
class Flagged:
    """A cell drawn red: a value past its line."""

    text: str


Cell = str | Link | Flagged


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[Cell]]
    marked: list[str] = field(default_factory=list)  # per row: "", "slower" or "faster"


@dataclass(frozen=True)
class Image:
    path: str
    alt: str


Block = str | Table | Image


@dataclass(frozen=True)
class Section:
    title: str
    blocks: list[Block]


def _md_cell(cell: Cell) -> str:
    if isinstance(cell, Flagged):  # Markdown has no cell colour: bold it
        return f"**{_md_cell(cell.text)}**"
    text = f"[{cell.text}]({cell.url})" if isinstance(cell, Link) else cell
    return text.replace("|", "\\|")


def to_markdown(title: str, sections: Sequence[Section]) -> str:
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines += ["| " + " | ".join(block.header) + " |", "|" + "---|" * len(block.header)]
                for row, mark in itertools.zip_longest(block.rows, block.marked, fillvalue=""):
                    cells = [
                        f"**{text}**" if mark and text else text for text in map(_md_cell, row)
                    ]
                    lines.append("| " + " | ".join(cells) + " |")
            elif isinstance(block, Image):
                lines.append(f"![{block.alt}]({block.path})")
            else:
                lines.append(block)
            lines.append("")
    return "\n".join(lines)


_CSS = """
body { font-family: sans-serif; margin: 2em; max-width: 1200px; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.slower, tr.faster, td.flagged { background: #f8d7da; font-weight: bold; }
tr.faster { background: #d4edda; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
"""


def _html_cell(cell: Cell) -> str:
    if isinstance(cell, Link):
        return f'<td><a href="{html.escape(cell.url)}">{html.escape(cell.text)}</a></td>'
    text = cell.text if isinstance(cell, Flagged) else cell
    numeric = bool(re.fullmatch(r"(?=.*\d)[-+\d.,xe% ]+", text))  # not "-" or words
    classes = [name for name, on in (("n", numeric), ("flagged", isinstance(cell, Flagged))) if on]
    return f"<td{_class(' '.join(classes))}>{html.escape(text)}</td>"


def _class(name: str) -> str:
    return f' class="{name}"' if name else ""


def to_html(title: str, sections: Sequence[Section]) -> str:
    parts = [
        "<!doctype html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        '<p><a href="../index.html">&larr; benchmark graphs</a></p>',
        f"<h1>{html.escape(title)}</h1>",
    ]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(
                    "<table><thead><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
                    + "</tr></thead><tbody>"
                )
                for row, mark in itertools.zip_longest(block.rows, block.marked, fillvalue=""):
                    parts.append(f"<tr{_class(mark)}>{''.join(map(_html_cell, row))}</tr>")
                parts.append("</tbody></table>")
            elif isinstance(block, Image):
                parts.append(
                    f'<p><img src="{html.escape(block.path)}" alt="{html.escape(block.alt)}"></p>'
                )
            else:
                parts.append(f"<p>{html.escape(block)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"

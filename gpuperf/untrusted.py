"""One rule for text the suite did not write itself, by the format it leaves in.

Case ids and kernel names come from the tests of whoever wrote them, notes quote them, the branch name and the
commit come from a pull request's author, and results files are handed between CI jobs: every such text is
untrusted. Each writer passes it through the function of its format, here, and nowhere else:

- ``terminal``: control characters (C0, DEL, C1), line and paragraph separators, the bidirectional and
  zero-width format characters (Trojan Source, CVE-2021-42574) and unpaired surrogates are shown escaped
  (``\\x1b``, ``\\n``, ``\\u202e``, ``\\ud800``), so no text moves the cursor, retitles the window or forges a line;
  and the text is cut to a width;
- ``markdown_text``: the same escapes, then Markdown's and HTML's active characters escaped (``\\*``, ``&lt;``);
- ``markdown_code``: a code span that the text cannot break: fenced by more backticks than any run the text
  holds (CommonMark's rule), padded where the text starts or ends with one;
- ``table_cell``: a Markdown table cell: ``|`` escaped, which GitHub requires even inside a code span;
- ``csv_text``: the escapes, then OWASP's rule against formula injection: a cell that starts with ``=``,
  ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``. Only text fields take it: a number
  stays a number (``-3.5`` in a numeric column is a figure, not a formula);
- ``plotly_text``: a plotly label, legend name or tooltip, which plotly renders as its own subset of HTML (``<br>``,
  ``<b>``, ``<a href>``): the escapes, then ``&``, ``<`` and ``>`` as the entities plotly shows as those characters;
- HTML is written by Jinja with autoescape (the trend site), and JSON by its encoders.

Pure, standard library only.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

#: What a terminal or a reader would act on instead of showing: C0 controls, DEL and C1 controls, the Arabic letter
#: mark, zero-width and directional marks, line and paragraph separators, bidirectional embeddings, overrides and
#: isolates, word joiner and invisible operators, the byte-order mark, and unpaired surrogates.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
#: A terminal cell is cut to this many characters: a case id of the suite is under 120, a note is cut at 100.
TERMINAL_WIDTH = 200
#: A Markdown cell or code span is cut to this many characters (summary.md must stay under GitHub's 1 MiB).
MARKDOWN_WIDTH = 500
#: OWASP's formula-injection prefixes (CSV Injection): a spreadsheet evaluates a cell that starts with one.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
#: Characters Markdown (CommonMark, GitHub's extensions) acts on inside a line of text, backslash-escaped.
_MARKDOWN_ACTIVE = re.compile(r"([\\`*_\[\]~!#])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_BACKTICK_RUNS = re.compile("`+")
ELLIPSIS = "…"


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}.get(code) or (f"\\x{code:02x}" if code < 0x100
                                                                  else f"\\u{code:04x}")


def escaped(text: str) -> str:
    """``text`` with every ``UNSAFE`` character written as its escape: nothing left that a terminal or a reader
    acts on, and every character encodable as UTF-8."""
    return UNSAFE.sub(_escape, str(text))


def clip(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters, the cut marked with ``…`` (``None``: not cut)."""
    return text if width is None or len(text) <= width else text[: max(0, width - 1)] + ELLIPSIS


def terminal(text: str, width: int | None = TERMINAL_WIDTH) -> str:
    """``text`` as a terminal may show it: one line, no control or format character, at most ``width`` long."""
    return clip(escaped(text), width)


def markdown_text(text: str, width: int | None = MARKDOWN_WIDTH) -> str:
    """``text`` as Markdown text that renders as written: escaped (``escaped``), cut, then Markdown's active
    characters backslash-escaped and HTML's written as entities, so no link, image, tag or emphasis comes of it."""
    safe = _MARKDOWN_ACTIVE.sub(r"\\\1", clip(escaped(text), width))
    return "".join(_HTML.get(char, char) for char in safe)


def markdown_code(text: str, width: int | None = MARKDOWN_WIDTH) -> str:
    """``text`` as one Markdown code span it cannot break: fenced by one backtick more than its longest run of
    them, with a space inside each fence where the text starts or ends with a backtick (CommonMark strips one
    such space each side). Escaped and cut first; inside a code span nothing else is active."""
    body = clip(escaped(text), width)
    longest = max((len(run) for run in _BACKTICK_RUNS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    edges = body.startswith("`") or body.endswith("`") or body.startswith(" ") and body.endswith(" ")
    pad = " " if edges and body.strip(" ") else ""  # a span of spaces alone keeps them all
    return f"{fence}{pad}{body}{pad}{fence}" if body else ""


def table_cell(markdown: str) -> str:
    """Markdown already made safe (``markdown_text``, ``markdown_code``, or the suite's own) as one cell of a
    GitHub table: ``|`` escaped, which splits cells even inside a code span."""
    return markdown.replace("|", "\\|")


def csv_text(text: str) -> str:
    """A text field as a CSV cell: escaped (``escaped``), and prefixed with ``'`` where a spreadsheet would read it
    as a formula (``FORMULA_PREFIXES``, OWASP). Not for numbers: a figure stays a figure."""
    safe = escaped(text)
    return "'" + safe if safe.startswith(FORMULA_PREFIXES) or str(text).startswith(FORMULA_PREFIXES) else safe


#: The entities plotly decodes in a label's text after it has split off its tags (``svg_text_utils``).
_PLOTLY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def plotly_text(text: str) -> str:
    """``text`` as a plotly label, legend name or tooltip shows it, character for character: escaped (``escaped``),
    then ``&``, ``<`` and ``>`` as entities, so no tag of plotly's HTML subset (a line break, bold, a link) comes of
    it. The suite's own markup goes around the result, never into it."""
    return "".join(_PLOTLY.get(char, char) for char in escaped(text))

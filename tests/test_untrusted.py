"""Untrusted text through every writer (``gpuperf/untrusted.py``): a Hypothesis generator of hostile strings
(control and escape sequences, bidirectional marks, unpaired surrogates, backticks, formula prefixes, HTML,
Markdown, the readme's own markers, a megabyte) is fed to the rule of each format and, inside a results file's
case ids, notes, kernel names, parameters and branch, through every command and writer that prints or writes it:
no raw control character in any output, no code span broken, no CSV text cell a spreadsheet would take for a
formula. Example counts are small: the README's test command stays fast."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fuzzing import FLEET_RUNS, REPO
from gpuperf import untrusted
from gpuperf.cli import main
from gpuperf.output.readme import END, START
from gpuperf.output.results import write_run
from gpuperf.store.baseline import BaselineError, load_baseline
from gpuperf.store.results import ResultsError, load_run, parse_json
from test_plugin import GEMV_S, fake_project

pytest_plugins = ["pytester"]

PIECES = ["`", "``", "```", "\x1b[31m", "\x1b]0;title\x07", "\x1b[2J", "\n", "\r", "\t", "\x00", "\x7f", "\x85",
          "\u202e", "\u2066", "\u200f", "\u2028", "\ufeff", "\ud800", "\udfff", "=", "+", "-", "@", "|", "\\", "*",
          "_", "[x](javascript:alert(1))", "![t](https://tracker.example/p.png)", "<img src=x onerror=alert(1)>",
          "<script>", "&amp;", START, END, "=cmd|' /C calc'!A0", " "]
#: Hostile strings: pieces of the above and any text, joined.
HOSTILE = st.lists(st.sampled_from(PIECES) | st.text(max_size=6), min_size=1, max_size=12).map("".join).filter(bool)
MEGABYTE = "`" * 7 + "\x1b[31m" + "x" * (1 << 20) + "\u202e" + "`"


def code_spans(line: str) -> tuple[list[str], str]:
    """CommonMark's code spans of ``line`` (a run of n backticks up to the next run of exactly n) and the text
    outside them (a backslash there escapes the next character); enough to tell a span that holds from one that
    breaks."""
    spans, outside, i = [], [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            outside.append(line[i:i + 2])
            i += 2
            continue
        if line[i] != "`":
            outside.append(line[i])
            i += 1
            continue
        end = i
        while end < len(line) and line[end] == "`":
            end += 1
        closing, k = None, end
        while k < len(line):
            if line[k] != "`":
                k += 1
                continue
            m = k
            while m < len(line) and line[m] == "`":
                m += 1
            if m - k == end - i:
                closing = (k, m)
                break
            k = m
        if closing is None:
            outside.append(line[i:end])
            i = end
        else:
            spans.append(line[end:closing[0]])
            i = closing[1]
    return spans, "".join(outside)


def span_content(span: str) -> str:
    """A code span's text as rendered: one space stripped each side where both have one."""
    return span[1:-1] if len(span) > 1 and span.startswith(" ") and span.endswith(" ") and span.strip(" ") else span


# --- the rule of each format ---------------------------------------------------------------------------


@settings(max_examples=60)
@given(HOSTILE)
@example(MEGABYTE)
def test_terminal_text_is_one_bounded_line_without_controls(text: str) -> None:
    shown = untrusted.terminal(text)
    assert untrusted.UNSAFE.search(shown) is None and len(shown) <= untrusted.TERMINAL_WIDTH
    shown.encode("utf-8")  # no surrogate left to fail a print


@settings(max_examples=60)
@given(HOSTILE)
@example(MEGABYTE)
def test_a_code_span_cannot_be_broken(text: str) -> None:
    span = untrusted.markdown_code(text)
    spans, outside = code_spans(span)
    assert outside == "" and len(spans) == 1
    assert span_content(spans[0]) == untrusted.clip(untrusted.escaped(text), untrusted.MARKDOWN_WIDTH)


@settings(max_examples=60)
@given(HOSTILE)
def test_markdown_text_holds_no_tag_span_or_link(text: str) -> None:
    shown = untrusted.markdown_text(text)
    spans, outside = code_spans(shown)
    assert spans == [] and "<" not in outside and "](" not in outside.replace("\\]", "")
    assert untrusted.UNSAFE.search(shown) is None


@settings(max_examples=60)
@given(HOSTILE)
def test_a_csv_text_cell_is_never_a_formula(text: str) -> None:
    cell = untrusted.csv_text(text)
    assert not cell.startswith(untrusted.FORMULA_PREFIXES) and untrusted.UNSAFE.search(cell) is None


def test_the_formula_rule_is_owasps_and_leaves_numbers_to_their_columns() -> None:
    assert [untrusted.csv_text(t) for t in ("=1+2", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "plain")] == \
        ["'=1+2", "'+1", "'-1", "'@SUM(A1)", "'\\tx", "'\\rx", "plain"]


# --- through every writer and command --------------------------------------------------------------------


def _documents(hostile: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Runs A and B of one GPU with the hostile text in a case id, a note, a kernel name, a parameter (name and
    value) and the branch; B is A a minute later."""
    a = json.loads(FLEET_RUNS[0].read_text())
    a["records"] = a["records"][:4]
    records = a["records"]
    records[0]["case_id"] = records[0]["nodeid"] = f"perf_tests/test_x.py::test_x[{hostile}]"
    records[1]["note"] = hostile
    records[2]["kernel"] = hostile
    records[3]["params"] = {**records[3]["params"], hostile[:40] or "p": hostile}
    a["run"]["extra"]["provenance"] = {"branch": hostile}
    b = copy.deepcopy(a)
    b["run"]["started"] = "2026-11-30T13:00:00+00:00"
    return a, b


def _no_controls(text: str) -> None:
    for line in text.split("\n"):
        assert untrusted.UNSAFE.search(line) is None, f"raw control or format character in {line[:200]!r}"


def _markdown_sound(text: str, own_html: tuple[str, ...] = ()) -> None:
    """No line of ``text`` holds HTML outside a code span but the writer's own lines (``own_html``)."""
    for line in text.splitlines():
        if line.strip() in own_html or line.startswith(("<details>", "<summary>", "</details>")):
            continue
        assert "<" not in code_spans(line)[1], f"raw HTML in {line[:200]!r}"


def _csv_sound(text: str) -> None:
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            if cell.startswith(untrusted.FORMULA_PREFIXES):
                float(cell)  # only a number may start so


@pytest.mark.long
@settings(max_examples=8)
@given(text=HOSTILE)
def test_hostile_text_in_a_run_reaches_no_output_raw(tmp_path_factory: pytest.TempPathFactory,
                                                      capsys: pytest.CaptureFixture[str], text: str) -> None:
    text = text.replace("\ud800", "").replace("\udfff", "")  # an unpaired surrogate is refused on reading (below)
    tmp = tmp_path_factory.mktemp("hostile")
    a_doc, b_doc = _documents(text)
    a, b = tmp / "a.json", tmp / "b.json"
    a.write_text(json.dumps(a_doc))
    b.write_text(json.dumps(b_doc))
    page = tmp / "page.md"
    page.write_text(f"# page\n{START}\n{END}\n")
    (tmp / "baselines").mkdir()
    commands = [["compare", str(a), str(b)], ["compare", str(a), str(b), "--markdown"],
                ["baseline", "diff", str(a), str(b)], ["baseline", "diff", str(a), str(b), "--markdown"],
                ["fleet", str(a), str(b)], ["fleet", str(a), str(b), "--markdown"],
                ["readme", str(b), "--page", str(page)],
                ["baseline", "from-runs", str(tmp / "baselines" / "nvidia-h200.yaml"), str(a), str(b)]]
    for command in commands:
        assert main(command) in (0, 1), command
        out, err = capsys.readouterr()
        _no_controls(out + err)
        if "--markdown" in command:
            _markdown_sound(out)
    assert main(["readme", str(b), "--page", str(page)]) == 0  # the page's markers survived the first rewrite
    capsys.readouterr()
    _no_controls(page.read_text())
    _markdown_sound(page.read_text(), own_html=(START, END))
    run, records = load_run(b)
    files = write_run(tmp / "out", run, records)
    summary = files.summary_md.read_text()
    _no_controls(summary)
    _markdown_sound(summary)
    csv_text = files.results_csv.read_text()
    _no_controls(csv_text)
    _csv_sound(csv_text)


def test_a_megabyte_case_id_is_cut_in_every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_doc, b_doc = _documents(MEGABYTE)
    (tmp_path / "a.json").write_text(json.dumps(a_doc))
    (tmp_path / "b.json").write_text(json.dumps(b_doc))
    for markdown in ([], ["--markdown"]):
        assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), *markdown]) == 0
        out = capsys.readouterr().out
        _no_controls(out)
        assert max(map(len, out.splitlines())) < 2 * untrusted.MARKDOWN_WIDTH + 200


def test_an_unpaired_surrogate_is_refused_naming_its_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_doc, _ = _documents("ok")
    text = json.dumps(a_doc).replace("test_x[ok]", "test_x[\\ud800]")
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(ResultsError, match=r"records\[0\]\.case_id holds an unpaired surrogate"):
        parse_json(path, text)
    for command in (["compare", str(path), str(path)], ["fleet", str(path)], ["baseline", "diff", str(path), str(path)],
                    ["readme", str(path), "--page", str(tmp_path / "p.md")],
                    ["baseline", "from-runs", str(tmp_path / "nvidia-h200.yaml"), str(path)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unpaired surrogate" in err and "Traceback" not in err


def test_a_baseline_key_with_an_unpaired_surrogate_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = REPO / "baselines" / "nvidia-h200.yaml"
    text = baseline.read_text()
    first = text.index("\n  perf_tests/") + 3
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text(text[:first] + '"\\ud800' + text[first:text.index(":", first)] + '"' + text[text.index(":", first):])
    with pytest.raises(BaselineError, match="invalid Unicode character escape"):  # YAML's reader refuses it
        load_baseline(path)
    assert main(["baseline", "check", str(path)]) == 1
    assert "invalid Unicode character escape" in capsys.readouterr().out


PLOT_HOSTILE = ["$\\frac{a$", "\x1b[31m$x^$\n`<b>`", "=cmd|' /C calc'!A0", "\u202e$$"]


@pytest.mark.long
def test_plot_draws_hostile_kernel_and_family_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One plot holds them all: each hostile text is a kernel's name and a family's, in the same figures."""
    a_doc, _ = _documents("ok")
    assert len(a_doc["records"]) >= len(PLOT_HOSTILE)
    for index, record in enumerate(a_doc["records"]):
        record["kernel"] = PLOT_HOSTILE[index % len(PLOT_HOSTILE)]
    for record, text in zip(a_doc["records"], PLOT_HOSTILE):
        record["family"] = text
    (tmp_path / "a.json").write_text(json.dumps(a_doc))
    assert main(["plot", str(tmp_path / "a.json"), "--out", str(tmp_path / "plots")]) == 0
    out, err = capsys.readouterr()
    _no_controls(out + err)
    assert (tmp_path / "plots" / "roofline.png").stat().st_size > 0
    assert len(list((tmp_path / "plots").glob("*.png"))) >= len(PLOT_HOSTILE) + 1  # a page per family, a roofline


HOSTILE_TESTS = '''
import pytest

from gpuperf.measure.metrics import gemv_work


@pytest.mark.gemv
@pytest.mark.perf
@pytest.mark.parametrize("shape", ["16384x16384"], ids=["x`<img src=x onerror=alert(1)>`|=cmd|' /C calc'!A0"])
def test_gemv(shape, measure, perf):
    perf.check(measure(lambda: "gemv", gemv_work(16384, 16384, "fp32")))
'''


def test_a_sessions_hostile_case_id_reaches_its_files_safe(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A pull request's own test id, through a real session: summary.md (and $GITHUB_STEP_SUMMARY) keeps it in
    one unbroken code span, results.csv holds it as text a spreadsheet does not evaluate."""
    project = fake_project(pytester, monkeypatch, {"test_hostile": HOSTILE_TESTS}, gemv=GEMV_S)
    monkeypatch.setenv("GITHUB_HEAD_REF", "=cmd|' /C calc'!A0")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "step.md"))
    result = project.runpytest("-p", "no:cacheprovider", "--results-dir", "results", "--history", "none",
                               "--missing-baseline=pass")
    assert result.ret == pytest.ExitCode.OK
    [directory] = (project.path / "results").iterdir()
    for summary in ((directory / "summary.md").read_text(), (project.path / "step.md").read_text()):
        _no_controls(summary)
        _markdown_sound(summary)
        rows = [line for line in summary.splitlines() if "onerror" in line]
        assert rows and all(len(code_spans(row)[0]) == 1 for row in rows)
    csv_text = (directory / "results.csv").read_text()
    _csv_sound(csv_text)
    assert "'=cmd|' /C calc'!A0" in csv_text  # the branch, as text
    _no_controls(result.stdout.str())


@settings(max_examples=60)
@given(HOSTILE)
@example("fix<br>4000-GB/s-PASS<br><b>approved-by-lead</b>")
@example('<a href="https://evil.example/">x</a>&lt;')
def test_plotly_text_holds_no_tag_and_reads_back_as_the_escaped_text(text: str) -> None:
    """Plotly splits a label at its tags, then decodes ``&amp;``, ``&lt;`` and ``&gt;`` in the text between: a label
    with no ``<`` or ``>`` has no tag, and decoded it is the text itself (escaped)."""
    shown = untrusted.plotly_text(text)
    assert "<" not in shown and ">" not in shown and not untrusted.UNSAFE.search(shown)
    decoded = shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert decoded == untrusted.escaped(text)

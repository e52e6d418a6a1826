"""The HTML report in a real headless Chromium: it renders, draws its chart, loads nothing, and
logs nothing to the console. The screenshot is kept in tests/artifacts/ for CI to publish.

Chromium comes from Debian (``apt-get install chromium``, in scripts/install-test-deps). Console
messages reach stderr through ``--enable-logging=stderr`` as ``...:CONSOLE:<line>] "..."``; the
page's Content-Security-Policy (``default-src 'none'``) turns any attempted request into such a
message, so "no console message" also means "no request". The negative controls show that the
console check and the pixel check do fail on a page that breaks those rules: no chart, a chart
without lines, dots without lines, lines off the plot, no link-rate line. A last test measures the
laid-out page (in a copy with a probe script) so that nothing scrolls sideways at 1280 px.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from png import colours, read_png
from report_fixtures import REPORTS, documents
from ncclcheck.charts import PALETTE, REFERENCE_COLOUR
from ncclcheck.report.documents import load_documents
from ncclcheck.report.page import make_report
from ncclcheck.report.view import build_view

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
# In CI (CI=true) a missing browser fails the test instead of hiding it.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                 reason="needs chromium (scripts/install-test-deps)")]
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?(?::\d+)?\]|Uncaught")


def chromium(tmp_path: Path, page: Path, *action: str) -> subprocess.CompletedProcess:
    """Run headless Chromium once on ``page``; the whole process group dies at the deadline."""
    argv = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--mute-audio", f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr", "--v=0", *action, page.resolve().as_uri()]
    # Chromium's singleton socket lives in TMPDIR, and a Unix socket's path has 107 bytes at most:
    # under xdist in CI the test's own TMPDIR is longer ("Socket path too long"), so it gets a
    # short one of its own, removed after the run
    with tempfile.TemporaryDirectory(prefix="ncb-", dir="/tmp") as short:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True,
                                env={**os.environ, "HOME": str(tmp_path), "TMPDIR": short})
        try:
            out, err = proc.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # helpers (zygote, gpu) outliving it
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def write_page(tmp_path: Path, paths: list[str], name: str) -> Path:
    page = tmp_path / name
    page.write_text(make_report(paths, "html"))
    return page


def test_full_report_renders_with_its_chart_and_a_clean_console(tmp_path):
    page = write_page(tmp_path, documents("h100-ib"), "h100-ib.html")
    out = chromium(tmp_path, page, "--dump-dom")
    assert out.returncode == 0, out.stderr[-2000:]
    assert console_lines(out.stderr) == []
    dom = out.stdout
    assert "Content-Security-Policy" in dom and "default-src 'none'" in dom
    polylines = re.findall(r'<polyline points="([^"]+)"', dom)
    assert len(polylines) == 1 and len(polylines[0].split()) == 31
    view = build_view(load_documents(documents("h100-ib")))
    assert dom.count('class="finding ') == view["findings"]["total"] > 5
    assert 'id="nodes"' in dom


def chart_problems(shot: Path, series: int) -> list[str]:
    """What is missing from a screenshot of a page with one bandwidth chart.

    A line is drawn when its colour covers at least :data:`LINE_COLUMNS` pixel columns: the
    legend swatch of a series covers 22 and its dots alone about 150, a polyline across the plot
    some 400 to 800. The link rate is drawn when one pixel row holds :data:`REFERENCE_RUN` pixels
    of its colour: its dashed line does (about 480), its label and the page's grey text do not.
    """
    width, _, bpp, rows = read_png(shot)
    wanted = {colour: rgb(colour) for colour in (*PALETTE[:series], REFERENCE_COLOUR)}
    columns: dict[str, set[int]] = {c: set() for c in wanted}
    longest_row = 0
    for row in rows:
        for colour, value in wanted.items():
            needle, at, hits = bytes(value), row.find(bytes(value)), 0
            while at != -1:
                if at % bpp == 0:
                    columns[colour].add(at // bpp)
                    hits += colour == REFERENCE_COLOUR
                at = row.find(needle, at + 1)
            longest_row = max(longest_row, hits)
    problems = [f"series colour {c} covers {len(columns[c])} columns, not a line"
                for c in PALETTE[:series] if len(columns[c]) < LINE_COLUMNS]
    if longest_row < REFERENCE_RUN:
        problems.append(f"no dashed link-rate line (longest run of {REFERENCE_COLOUR}: "
                        f"{longest_row} pixels in a row)")
    return problems


LINE_COLUMNS = 300
REFERENCE_RUN = 200
BENCH = REPORTS / "roce-compare" / "bench-compare.json"


def screenshot(tmp_path: Path, page: Path, name: str) -> Path:
    shot = tmp_path / name
    out = chromium(tmp_path, page, "--hide-scrollbars", "--window-size=1280,2000",
                   f"--screenshot={shot}")
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    assert console_lines(out.stderr) == []
    return shot


def test_screenshot_shows_the_chart(tmp_path):
    """The bench page's chart is drawn: each run's line and the dashed link rate are pixels."""
    page = write_page(tmp_path, [str(BENCH)], "bench.html")
    shot = screenshot(tmp_path, page, "report.png")
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report-screenshot.png")
    shutil.copyfile(page, ARTIFACTS / "report-screenshot.html")
    width, height, _, _ = read_png(shot)
    assert (width, height) == (1280, 2000) and shot.stat().st_size > 20_000
    assert len(colours(shot)) > 200, "a page, not a blank screen"
    assert chart_problems(shot, series=3) == []


#: Ways a chart can break while the page around it still renders.
BROKEN_CHARTS = {
    "no lines": lambda html: re.sub(r'<g class="series".*?</g>', "", html, flags=re.S),
    "dots without lines": lambda html: re.sub(r"<polyline[^>]*/>", "", html),
    "no link rate": lambda html: re.sub(r'<g class="reference">.*?</g>', "", html, flags=re.S),
    "points off the plot": lambda html: re.sub(r'points="[^"]*"', 'points="-50,-50 -40,-40"',
                                               html),
}


@pytest.mark.parametrize("how", sorted(BROKEN_CHARTS))
def test_negative_control_a_broken_chart_fails_the_pixel_check(tmp_path, how):
    """The check above does fail on a chart that is broken but still leaves legend, dots or
    title on the page."""
    html = write_page(tmp_path, [str(BENCH)], "bench.html").read_text()
    broken = BROKEN_CHARTS[how](html)
    assert broken != html
    page = tmp_path / "broken.html"
    page.write_text(broken)
    assert chart_problems(screenshot(tmp_path, page, "broken.png"), series=3) != []


def test_negative_controls_the_checks_catch_a_broken_page(tmp_path):
    """A page without a chart fails the pixel check; a page that fetches or errors fails the
    console check."""
    page = write_page(tmp_path, documents("cloud-vm"), "nochart.html")
    assert len(chart_problems(screenshot(tmp_path, page, "nochart.png"), series=3)) == 4
    bad = tmp_path / "bad.html"
    bad.write_text(page.read_text().replace(
        "</body>", '<img src="http://198.18.0.1/x.png"><script>missing()</script></body>'))
    lines = console_lines(chromium(tmp_path, bad, "--dump-dom").stderr)
    assert any("198.18.0.1" in line for line in lines) and len(lines) >= 2


#: Measures, after layout, which scroll boxes, code blocks and charts are wider than the page.
OVERFLOW_PROBE = """<script>
window.addEventListener('load', () => {
  const wide = [];
  document.querySelectorAll('.scroll, pre, figure.chart').forEach(el => {
    if (el.scrollWidth > el.clientWidth + 1)
      wide.push(((el.closest('section') || {}).id || '?') + ' ' + el.scrollWidth + '>' + el.clientWidth);
  });
  document.body.setAttribute('data-overflow', wide.join('; ') || 'none');
});
</script></body>"""


def overflowing(tmp_path: Path, html: str) -> str:
    """What needs a horizontal scrollbar at 1280 px (the probe needs scripts: a test copy of the
    page without its Content-Security-Policy)."""
    probe = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    page = tmp_path / "probe.html"
    page.write_text(probe.replace("</body>", OVERFLOW_PROBE))
    dom = chromium(tmp_path, page, "--window-size=1280,2000", "--dump-dom").stdout
    found = re.search(r'data-overflow="([^"]*)"', dom)
    assert found, dom[-2000:]
    return found.group(1).replace("&gt;", ">")


def test_full_report_fits_a_laptop_screen(tmp_path):
    """At 1280 px nothing of the full report scrolls sideways: long NCCL_IB_HCA lists wrap
    instead of pushing the reasons off the page."""
    html = write_page(tmp_path, documents("h100-ib"), "h100-ib.html").read_text()
    assert overflowing(tmp_path, html) == "none"
    # negative control: without the wrapping rules the env table does overflow
    unwrapped = re.sub(r"\.envvars td:nth-child\(\d\) \{[^}]*\}", "", html)
    assert unwrapped != html and overflowing(tmp_path, unwrapped).startswith("env ")

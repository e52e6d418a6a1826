"""The HTML report in a real headless Chromium: it renders, draws its chart, loads nothing, and
logs nothing to the console. The screenshot is kept in tests/artifacts/ for CI to publish.

Chromium comes from Debian (``apt-get install chromium``, in scripts/install-test-deps). Console
messages reach stderr through ``--enable-logging=stderr`` as ``...:CONSOLE:<line>] "..."``; the
page's Content-Security-Policy (``default-src 'none'``) turns any attempted request into such a
message, so "no console message" also means "no request". The negative controls show that the
console check and the pixel check do fail on a page that breaks those rules.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from png import colours, read_png
from report_fixtures import REPORTS, documents
from ncclcheck import report
from ncclcheck.charts import PALETTE, REFERENCE_COLOUR

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
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "HOME": str(tmp_path)})
    try:
        out, err = proc.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # helpers (zygote, gpu) outliving the browser
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def write_page(tmp_path: Path, paths: list[str], name: str) -> Path:
    page = tmp_path / name
    page.write_text(report.make_report(paths, "html"))
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
    view = report.build_view(report.load_documents(documents("h100-ib")))
    assert dom.count('class="finding ') == view["findings"]["total"] > 5
    assert 'id="nodes"' in dom


def test_screenshot_shows_the_chart(tmp_path):
    """The bench page's chart is drawn: each line's colour and the dashed link rate are pixels."""
    page = write_page(tmp_path, [str(REPORTS / "roce-compare" / "bench-compare.json")],
                      "bench.html")
    shot = tmp_path / "report.png"
    out = chromium(tmp_path, page, "--hide-scrollbars", "--window-size=1280,2000",
                   f"--screenshot={shot}")
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    assert console_lines(out.stderr) == []
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report-screenshot.png")
    shutil.copyfile(page, ARTIFACTS / "report-screenshot.html")
    width, height, _, _ = read_png(shot)
    assert (width, height) == (1280, 2000) and shot.stat().st_size > 20_000
    seen = colours(shot)
    assert len(seen) > 200, "a page, not a blank screen"
    for colour in PALETTE[:3]:
        assert seen[rgb(colour)] > 50, f"series colour {colour} is not drawn"
    assert seen[rgb(REFERENCE_COLOUR)] > 50, "link-rate line is not drawn"


def test_negative_controls_the_checks_catch_a_broken_page(tmp_path):
    """A page without a chart has none of the series pixels; a page that fetches logs errors."""
    page = write_page(tmp_path, documents("cloud-vm"), "nochart.html")
    shot = tmp_path / "nochart.png"
    out = chromium(tmp_path, page, "--window-size=1280,2000", f"--screenshot={shot}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert colours(shot)[rgb(PALETTE[1])] < 10
    bad = tmp_path / "bad.html"
    bad.write_text(page.read_text().replace(
        "</body>", '<img src="http://198.18.0.1/x.png"><script>missing()</script></body>'))
    lines = console_lines(chromium(tmp_path, bad, "--dump-dom").stderr)
    assert any("198.18.0.1" in line for line in lines) and len(lines) >= 2

"""The HTML report in a real browser: headless Chromium (Debian's ``chromium`` package) loads a
report of finished, failed and interrupted runs; every image must decode (``naturalWidth > 0``)
and be laid out with a size, and the page must raise no JavaScript or resource error.

A probe script is added to a copy of the page: an error listener at the top of ``<head>``
(before anything else runs) and, on ``load``, a ``<pre id="probe">`` holding its findings as
JSON, which ``--dump-dom`` prints. Nothing is downloaded; without Chromium the test skips with
the reason, and fails under ``CI=true`` (``.ci/run`` installs it).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from conftest import require_program
from fault_helpers import NAME
from trainleak.audit import ResultStore, record_run, write_report

HEAD_PROBE = """<script>
window.__errors = [];
window.addEventListener("error", function (e) {
  var t = e.target && e.target !== window ? (e.target.tagName || "") + " " + (e.target.src || "")
                                          : (e.message || "error");
  window.__errors.push(String(t).slice(0, 200));
}, true);
</script>"""

BODY_PROBE = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = {
    title: document.title,
    images: imgs.length,
    broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                .map(function (i) { return i.alt; }),
    unsized: imgs.filter(function (i) { var r = i.getBoundingClientRect();
                                        return !(r.width > 0 && r.height > 0); })
                 .map(function (i) { return i.alt; }),
    headings: document.querySelectorAll("h2").length,
    errors: window.__errors
  };
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def render_in_chromium(page: Path, tmp_path: Path) -> dict[str, Any]:
    """Load a probed copy of ``page`` in headless Chromium; return the probe's findings."""
    chromium = require_program("chromium", "apt-get install -y chromium")
    text = page.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    text = re.sub(r"<head>", "<head>" + HEAD_PROBE, text, count=1)
    probed.write_text(text.replace("</body>", BODY_PROBE + "</body>"), encoding="utf-8")
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=10000",
        "--window-size=1280,2000",
        "--dump-dom",
        probed.resolve().as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', res.stdout, re.S)
    assert found, f"no probe output (exit {res.returncode}):\n{res.stderr[-2000:]}"
    return dict(json.loads(html.unescape(found.group(1))))


def test_report_renders_in_chromium_with_every_image(tmp_path: Path) -> None:
    store = tmp_path / "runs" / "trainleak.sqlite"
    for value in (1, 2):
        record_run(NAME, {"value": value, "seconds": 0}, tmp_path / "runs" / "r", store_path=store)
    interrupted = ResultStore(store).start(NAME, {"value": 3})
    ResultStore(store).interrupt(interrupted, "interrupted by SIGTERM")
    page = write_report([store], tmp_path / "report.html")
    probe = render_in_chromium(page, tmp_path)
    assert probe["title"] == "trainleak report" and probe["headings"] == 3
    assert probe["images"] == 2  # one image per finished run
    assert probe["broken"] == [] and probe["unsized"] == []
    assert probe["errors"] == []
    assert 'class="status interrupted"' in page.read_text()


def test_the_probe_sees_a_broken_image(tmp_path: Path) -> None:
    """The check can fail: a page with an undecodable image is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title></head><body><h2>x</h2>"
        '<img alt="bad" src="data:image/png;base64,AAAA"></body></html>'
    )
    probe = render_in_chromium(page, tmp_path)
    assert probe["broken"] == ["bad"] and probe["errors"]

"""The HTML report in a real browser: headless Chromium (Debian's ``chromium`` package) loads a
report of finished and interrupted runs, and the report of ``trainleak attack`` on a saved
checkpoint; every image must decode (``naturalWidth > 0``) and be laid out with a size, the
risk card must be visible above the images, and the page must raise no JavaScript or resource
error.

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

from safetensors.torch import save_file
from typer.testing import CliRunner

from conftest import require_program
from fault_helpers import NAME
from release_fixtures import tiny_binary_checkpoint
from trainleak import cli
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
    cards: Array.prototype.slice.call(document.querySelectorAll(".card")).map(function (c) {
      var r = c.getBoundingClientRect(), first = document.images[0];
      return {visible: r.width > 0 && r.height > 0 && getComputedStyle(c).display !== "none",
              title: (c.querySelector("h3") || {}).textContent || "",
              level: c.getAttribute("data-level") || "",
              beforeImages: !first || !!(c.compareDocumentPosition(first) & 4)};
    }),
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
    assert [c["visible"] for c in probe["cards"]] == [True, True]  # one per finished run
    assert 'class="status interrupted"' in page.read_text()


def test_risk_card_of_an_attack_on_a_saved_checkpoint_in_chromium(tmp_path: Path) -> None:
    ckpt, _ = tiny_binary_checkpoint()
    root = tmp_path / "release"
    root.mkdir()
    save_file({k: v.contiguous() for k, v in ckpt.final.items()}, str(root / "model.safetensors"))
    spec = {
        "type": "checkpoint",
        "architecture": {"kind": "homogeneous_mlp", "kwargs": ckpt.architecture.kwargs},
        "weights": "model.safetensors",
        "training": {"loss": "logistic", "steps": 200, "n_train": 8},
    }
    (root / "release.json").write_text(json.dumps(spec))
    (root / "knowledge.yaml").write_text("value_range: [-1, 1]\nlabel_set: [0, 1]\n")
    out = tmp_path / "kkt"
    args = ["attack", "kkt", "--release", str(root), "-k", str(root / "knowledge.yaml")]
    res = CliRunner().invoke(cli.app, [*args, "--set", "steps=40", "--out", str(out)])
    assert res.exit_code == 0, res.output
    probe = render_in_chromium(out / "report.html", tmp_path)
    assert probe["errors"] == [] and probe["broken"] == [] and probe["unsized"] == []
    assert probe["images"] >= 1
    (card,) = probe["cards"]
    assert card == {
        "visible": True,
        "title": "Risk card",
        "level": "review",
        "beforeImages": True,
    }


def test_the_probe_sees_a_broken_image(tmp_path: Path) -> None:
    """The check can fail: a page with an undecodable image is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title></head><body><h2>x</h2>"
        '<img alt="bad" src="data:image/png;base64,AAAA"></body></html>'
    )
    probe = render_in_chromium(page, tmp_path)
    assert probe["broken"] == ["bad"] and probe["errors"]

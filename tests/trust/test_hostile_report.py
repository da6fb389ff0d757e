"""Hostile strings of ``params.yaml`` in the report: HTML that a careless or hostile user writes into
the report's title, a frontier's ``mark_label`` or its ``paper_label`` is shown as text in
``reports/index.html``, never run.

One row per payload (:data:`PAYLOADS`); each payload, when run, marks the page's ``<body>`` with
``data-xss="<place>/<payload>"``. The end-to-end check builds the report of a populated work folder
with every payload in every place and loads ``index.html`` in headless Chromium: no mark may
appear. Its control loads the same page with the escaped text turned back into HTML: every mark
appears, so the check can fail.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.trust.conftest import SWEEP, trust_params, with_user_path, write_params

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: payload name → HTML that sets ``data-xss`` on ``<body>`` to ``{tag}`` when a browser runs it
PAYLOADS: dict[str, str] = {
    "script": "<script>document.body.setAttribute('data-xss', '{tag}')</script>",
    "img-onerror": "<img src=x onerror=\"document.body.setAttribute('data-xss', '{tag}')\">",
    "svg-onload": "<svg onload=\"document.body.setAttribute('data-xss', '{tag}')\">",
}
#: where a user string reaches the report
PLACES = ("title", "mark_label", "paper_label")


def _payloads(place: str) -> str:
    return " ".join(p.format(tag=f"{place}/{name}") for name, p in PAYLOADS.items())


@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_markdown_converter_shows_raw_html_as_text(payload: str) -> None:
    """The converter of ``index.html`` passes no raw HTML through, in a heading, a paragraph or a
    table cell: each payload comes out escaped."""
    from tasks.report.html_page import markdown_to_html

    text = PAYLOADS[payload].format(tag="x")
    body, toc = markdown_to_html(f"# Report {text}\n\nLabel: {text}\n\n| a | b |\n|---|---|\n| {text} | 1 |\n")
    assert "<script" not in body and "<img" not in body and "<svg" not in body, body
    assert body.count(html.escape(text, quote=False)) == 3, body
    assert "<script" not in toc and "<svg" not in toc and "<img" not in toc


def test_links_with_a_script_scheme_lose_their_url() -> None:
    from tasks.report.html_page import markdown_to_html

    body, _ = markdown_to_html("[a](javascript:alert(1)) [b](JaVa&#x09;Script:alert(1)) ![c](javascript:alert(2)) "
                               "[ok](#glossary) [page](scoreshield.md) [web](https://example.org)")
    assert "javascript" not in body.lower().replace("&#x09;", "")
    assert 'href="#glossary"' in body and 'href="scoreshield.md"' in body and 'href="https://example.org"' in body


def _marks(page: Path, tmp_path: Path) -> list[str]:
    """The ``data-xss`` marks on ``<body>`` after Chromium loaded ``page`` (a fresh profile)."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    assert "</body>" in dom or "<body" in dom, f"Chromium did not load the page: {dom[:300]!r}"
    return re.findall(r'<body[^>]*\bdata-xss="([^"]*)"', dom)


@pytest.mark.slow  # builds a report and runs headless Chromium twice
def test_payloads_in_title_and_labels_run_no_handler_in_chromium(trust_root: Path, tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.skip("headless Chromium not found: install it with `make install-browser`")
    from tasks.report import report

    params = with_user_path(trust_params(), trust_root, "user/mine.npz")
    params["report"]["title"] = f"trust report {_payloads('title')}"
    params["report"]["frontiers"] = [{
        "name": "ss-frontier", "family": "scoreshield", "x": "param:epsilon", "y": "utility_verification_accuracy",
        "sweeps": [SWEEP], "mark_x": 1.0, "mark_label": f"ε = 1 {_payloads('mark_label')}",
        "paper_y": 0.5, "paper_label": f"Table 2 {_payloads('paper_label')}"}]
    write_params(trust_root / "params.yaml", params)
    report(root=trust_root)
    page = trust_root / "reports" / "index.html"
    assert _marks(page, tmp_path) == [], "a payload ran in the browser"
    text = page.read_text()
    for place in PLACES:  # every payload reached the page, as text
        for name, payload in PAYLOADS.items():
            assert html.escape(payload.format(tag=f"{place}/{name}"), quote=False) in text, (place, name)

    control = tmp_path / "control.html"  # the same page with the escaped payloads turned back into HTML
    control.write_text(re.sub(r"&lt;(script|img|svg)\b.*?&gt;",
                              lambda m: html.unescape(m.group(0)), text.replace("&lt;/script&gt;", "</script>")))
    assert _marks(control, tmp_path / "c"), "the check cannot fail: the unescaped payloads set no mark"

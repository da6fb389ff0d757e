"""The HTML report: self-contained (figures as data URIs, nothing fetched), a table of contents,
the family pages as sections, and every figure loading in a real browser (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.report.html_page import build_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _png(path: Path, colour: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.plot([0, 1], [0, 1], color=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


@pytest.fixture
def report_dir(tmp_path: Path) -> Path:
    _png(tmp_path / "figures" / "a.png", "C0")
    _png(tmp_path / "figures" / "fam-pareto.png", "C1")
    (tmp_path / "index.md").write_text(
        "# The report\n\nIntro.\n\n## fam\n\nQuestion. Details: [fam.md](fam.md).\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n![a](figures/a.png)\n\n## Glossary\n\n* `x`: a thing\n")
    (tmp_path / "fam.md").write_text("# fam: details\n\n[Back](index.md)\n\n![p](figures/fam-pareto.png)\n")
    return tmp_path


def test_html_is_self_contained_with_contents_and_family_sections(report_dir: Path) -> None:
    page = build_html(report_dir / "index.md")
    srcs = re.findall(r'\bsrc="([^"]*)"', page)
    assert len(srcs) == 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r'\b(src|href)="https?:', page), "nothing fetched from the network"
    assert '<nav class="toc">' in page and 'href="#fam"' in page and 'href="#glossary"' in page
    assert 'id="fam-details"' in page and 'href="#fam-details"' in page, "page links point at their sections"
    assert "<table>" in page


def test_a_missing_figure_is_never_fetched(report_dir: Path) -> None:
    (report_dir / "figures" / "a.png").unlink()
    page = build_html(report_dir / "index.md")
    assert 'src="figures/a.png"' not in page and 'src="data:,"' in page


#: writes each image's natural width and the section ids into the DOM once the page has loaded
PROBE = """<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre'); out.id = 'probe';
  out.textContent = JSON.stringify({widths: [...document.images].map(i => i.naturalWidth),
                                    ids: [...document.querySelectorAll('h1[id], h2[id]')].map(h => h.id)});
  document.body.appendChild(out);
});
</script>"""


def _render(html_path: Path, tmp_path: Path) -> dict:
    import json

    if CHROMIUM is None:
        pytest.skip("headless Chromium not found: install it with `make install-browser` "
                    "(Debian/Ubuntu: `apt-get install -y chromium`)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=5000", "--dump-dom", html_path.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m, f"the page did not finish loading in Chromium: {dom[:300]!r}"
    import html

    return json.loads(html.unescape(m.group(1)))


@pytest.mark.slow  # headless Chromium in a subprocess
def test_every_figure_loads_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    page = build_html(report_dir / "index.md").replace("</body>", PROBE + "</body>")
    out = tmp_path / "rendered" / "index.html"  # elsewhere: relative paths would not resolve
    out.parent.mkdir()
    out.write_text(page)
    probe = _render(out, tmp_path)
    assert len(probe["widths"]) == 2 and all(w > 0 for w in probe["widths"]), probe
    assert {"fam", "glossary", "fam-details"} <= set(probe["ids"])


@pytest.mark.slow  # headless Chromium in a subprocess
def test_a_broken_figure_is_detected_by_the_browser_check(report_dir: Path, tmp_path: Path) -> None:
    """The check above can fail: a figure that does not load has naturalWidth 0."""
    page = build_html(report_dir / "index.md").replace("</body>", PROBE + "</body>")
    page = re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,AAAA"', page, count=1)
    out = tmp_path / "broken.html"
    out.write_text(page)
    probe = _render(out, tmp_path)
    assert sorted(w > 0 for w in probe["widths"]) == [False, True]

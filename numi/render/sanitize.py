"""The allow-list sanitiser: the last word over every piece of rendered markdown.

Whatever the parser lets through, no `on*`, `hx-*`, `ws-*`, `style` or `id` attribute and no
script-capable element survives. MathML's presentation elements are allowed, since math is
typeset to MathML on the server (`numi.render.math`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..lazy_modules import lazy_module

# nh3's library (1.5 MiB of an idle server's memory) is loaded by the first render.
if TYPE_CHECKING:
    import nh3
else:
    nh3 = lazy_module("nh3")

MATHML_TAGS = {
    "math",
    "mrow",
    "mi",
    "mn",
    "mo",
    "ms",
    "mtext",
    "mspace",
    "msub",
    "msup",
    "msubsup",
    "mfrac",
    "msqrt",
    "mroot",
    "munder",
    "mover",
    "munderover",
    "mtable",
    "mtr",
    "mtd",
    "mstyle",
    "mpadded",
    "mphantom",
    "menclose",
    "semantics",
    "annotation",
    "mmultiscripts",
    "mprescripts",
    "none",
}
# Presentation attributes only: nothing that links (href, xlink:href), runs (on*), styles
# (style, mathcolor) or names (id) anything.
MATHML_ATTRIBUTES = {
    "display",
    "mathvariant",
    "stretchy",
    "fence",
    "separator",
    "lspace",
    "rspace",
    "accent",
    "accentunder",
    "columnalign",
    "rowspacing",
    "columnspacing",
    "displaystyle",
    "scriptlevel",
    "minsize",
    "maxsize",
    "movablelimits",
    "linethickness",
    "symmetric",
    "largeop",
    "width",
    "height",
    "depth",
    "notation",
    "encoding",
}
ALLOWED_TAGS = {
    "a",
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "span",
    "div",
    "sup",
    "sub",
} | MATHML_TAGS
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
    "code": {"class"},
    "pre": {"class"},
    "span": {"class"},
    "div": {"class"},
    "ul": {"class"},
    "li": {"class"},
    "sup": {"class"},
    "section": {"class"},
    "ol": {"start"},
    "th": {"class"},
    "td": {"class"},
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}
URL_SCHEMES = {"http", "https", "mailto"}


@lru_cache(maxsize=1)
def _cleaner() -> nh3.Cleaner:
    # Built once: converting the allow-lists on every call costs more than the cleaning.
    return nh3.Cleaner(
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def sanitize(html: str) -> str:
    """Run the allow-list sanitiser over HTML that may hold untrusted parts."""
    return _cleaner().clean(html)

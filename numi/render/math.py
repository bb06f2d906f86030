"""LaTeX typeset on the server as MathML (latex2mathml): browsers render MathML Core natively,
so no client-side renderer and no relaxed CSP. LaTeX that does not convert is shown as code.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from functools import lru_cache

from markupsafe import escape


@lru_cache(maxsize=512)
def mathml(latex: str, place: str) -> str:
    """LaTeX -> MathML (`place`: inline, display or block); LaTeX that does not convert is
    shown as code."""
    from latex2mathml.converter import convert  # lazy: start-up time

    try:
        mathml = convert(latex.strip(), display="inline" if place == "inline" else "block")
        # latex2mathml copies \text{…} verbatim: a round trip through an XML parser
        # rejects what is not well-formed and escapes the text of what is.
        tree = ElementTree.fromstring(mathml)
        for element in tree.iter():
            element.tag = element.tag.rsplit("}", 1)[-1]
        _typeset(tree, display=place != "inline")
        mathml = ElementTree.tostring(tree, encoding="unicode", short_empty_elements=False)
    except Exception:  # noqa: BLE001 - any failure of the converter means "not valid LaTeX"
        if place == "block":
            return f'<pre class="math-error"><code>{escape(latex.strip())}</code></pre>\n'
        return f'<code class="math-error">{escape(latex)}</code>'
    if place == "block":
        return f'<div class="math-block">{mathml}</div>\n'
    return f'<span class="math-display">{mathml}</span>' if place == "display" else mathml


# Operators whose limits go under and over them in display math and beside them inline, as
# in TeX: MathML's movablelimits does both from one markup, so a sub/superscript of one
# becomes an under/over script (latex2mathml writes scripts for inline math).
LIMIT_OPERATORS = set("∑∏∐⋂⋃⨀⨁⨂⨄⨆⋀⋁") | {"lim", "max", "min", "sup", "inf", "det", "gcd", "Pr"}
INTEGRALS = set("∫∬∭∮∯∰⨌")
SCRIPTS_AS_LIMITS = {"msub": "munder", "msup": "mover", "msubsup": "munderover"}


def _typeset(tree, display: bool) -> None:
    """MathML's own attributes for what TeX does by itself: display math in display style,
    limits of ∑ and lim movable (under and over when displayed), integrals large when
    displayed. Brackets of \\left…\\right come stretchy from latex2mathml."""
    if display:
        tree.set("displaystyle", "true")
    for element in tree.iter():
        text = (element.text or "").strip()
        if element.tag == "mo" and text in INTEGRALS:
            # Large in display style, limits beside it. Not stretchy: Chromium then sizes
            # it to its own scripts, smaller than the display size.
            element.set("largeop", "true")
            element.set("movablelimits", "false")
            continue
        base = element[0] if len(element) else None
        limits = SCRIPTS_AS_LIMITS.get(element.tag, element.tag)
        if (
            base is not None
            and base.tag == "mo"
            and (base.text or "").strip() in LIMIT_OPERATORS
            and limits in SCRIPTS_AS_LIMITS.values()
        ):
            element.tag = limits
            base.set("movablelimits", "true")
            if len(base.text.strip()) == 1:  # ∑, not lim: a large operator
                base.set("largeop", "true")

"""Characters a reader cannot see, made visible wherever a user approves text (issue 34).

A card that asks "run this?" or "remember this?" must show exactly what would run or be
kept. Some characters draw nothing, or change the order the rest is drawn in: Unicode tag
characters hide a whole instruction in a memory, a right-to-left override makes
`touch HIDDEN` read as a comment. `reveal_hidden` escapes the text first and then shows
each such character as its code point, `<U+202E>`, in a marked span
(partials/_hidden_character.html); `has_hidden` tells a card to wear its warning badge.
The text itself is never changed: what runs, what is kept and the approval's digest stay
those of the raw text, the card only stops hiding part of it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from jinja2 import pass_environment
from markupsafe import Markup, escape

# Inclusive ranges of code points that draw nothing or reorder what is drawn around them.
# Tab and newline are left alone: the cards show them as the layout they are.
HIDDEN_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0008),  # C0 controls...
    (0x000B, 0x001F),  # ...but tab and newline (carriage return and escape are marked)
    (0x007F, 0x009F),  # DEL and the C1 controls
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark (bidi)
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels, drawn as nothing
    (0x180B, 0x180F),  # Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; LRM, RLM (bidi)
    (0x2028, 0x2029),  # line and paragraph separators
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF9, 0xFFFB),  # interlinear annotation controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE007F),  # tag characters: a whole hidden ASCII text
    (0xE0100, 0xE01EF),  # variation selectors supplement
)

_HIDDEN = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in HIDDEN_RANGES) + "]"
)


def hidden_characters(text: Any) -> list[str]:
    """The hidden characters of `text` in order (a non-string is read as its `str`)."""
    return _HIDDEN.findall(text if isinstance(text, str) else str(text))


def has_hidden(value: Any) -> bool:
    """Whether `value` (a text, or arguments: a dict or list of them) holds a hidden
    character anywhere, keys included."""
    if isinstance(value, str):
        return _HIDDEN.search(value) is not None
    if isinstance(value, dict):
        return any(has_hidden(key) or has_hidden(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_hidden(item) for item in value)
    return False


def code_point(character: str) -> str:
    """`<U+202E>`: how a hidden character is written on a card."""
    return f"<U+{ord(character):04X}>"


def character_name(character: str) -> str:
    """The character's Unicode name (its code point when it has none, as controls do)."""
    return unicodedata.name(character, f"U+{ord(character):04X}")


def reveal_hidden(environment, text: Any) -> Markup:
    """`text` escaped, with each hidden character drawn as its code point in a marked span.

    The visible parts go through `escape` before anything is joined, and the span comes
    from a template, so no raw text is ever marked safe."""
    if text is None:
        return Markup("")
    text = text if isinstance(text, str) else str(text)
    if _HIDDEN.search(text) is None:
        return escape(text)
    mark = environment.get_template("partials/_hidden_character.html").module.mark
    out = []
    position = 0
    for match in _HIDDEN.finditer(text):
        out.append(escape(text[position : match.start()]))
        character = match.group()
        out.append(Markup(mark(code_point(character), character_name(character))))
        position = match.end()
    out.append(escape(text[position:]))
    return Markup("").join(out)


def init_app(app) -> None:
    app.jinja_env.filters["reveal_hidden"] = pass_environment(reveal_hidden)
    app.jinja_env.tests["hiding_characters"] = has_hidden

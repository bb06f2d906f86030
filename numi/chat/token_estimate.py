"""How many tokens a text is, estimated per script, without the model's tokenizer.

Byte-pair tokenizers spend very different amounts on different scripts: English prose is
about four characters a token, but a CJK character is about a token by itself (three
UTF-8 bytes, few of them merged), a word with letters outside ASCII (German's umlauts and
ß) is cut around them, and code's punctuation and indentation are tokens of their own.
One rate of four characters a token was a quarter off on a history that mixed English,
code, German and Japanese; a rate per kind of run keeps each part near its own cost.
What is left between this and a given model's tokenizer is learned from what its server
reports (`agent/calibration.py`).

The runs, by what byte-pair vocabularies (cl100k, o200k and the like) do with them:

- an ASCII word: one token up to 7 letters (a common word with its leading space), else
  a token per 5 letters;
- a word with letters outside ASCII (diacritics, Cyrillic, Greek...): a token per 3
  characters;
- CJK ideographs, kana and Hangul: a token per character;
- digits: a token per 3;
- whitespace: a single space goes with the next word; a longer run (a line break and
  indentation) is a token per 4 characters after the first;
- other symbols: a token per 2 (brackets and operators merge in pairs), and an emoji or
  other character beyond the basic plane 2 more.
"""

from __future__ import annotations

import re

import gevent

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f"
_RUNS = re.compile(
    rf"(?P<cjk>[{_CJK}]+)"
    r"|(?P<ascii>[A-Za-z]+)(?![^\W\d_])"
    rf"|(?P<word>[^\W\d_{_CJK}]+)"
    r"|(?P<digits>\d+)"
    r"|(?P<space>\s+)"
    r"|(?P<symbol>[^\w\s]+|_+)"
)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


# What was estimated, by text: a history's messages are estimated again at every turn and
# every trim step. Bounded by its texts' characters; the oldest go first.
_known: dict[str, int] = {}
_known_chars = 0
_KNOWN_CHARS = 8_000_000
# Texts not estimated yet and longer than this together are estimated in a native thread:
# on the hub their CPU (about 0.4 ms per 1,000 characters) would stall every stream.
OFF_HUB_CHARS = 20_000


def text_tokens(text: str) -> int:
    """The estimated tokens of `text` (the module's rules)."""
    if not text:
        return 0
    found = _known.get(text)
    if found is None:
        found = _remember(text, _tokens(text))
    return found


def estimate_all(texts: list[str]) -> None:
    """Estimate `texts` ahead, so that `text_tokens` finds them: in the hub's threadpool
    when those not estimated yet are long together (the caller's greenlet waits, the hub
    does not)."""
    cold = [text for text in texts if text and text not in _known]
    if sum(len(text) for text in cold) <= OFF_HUB_CHARS:
        return

    counts = gevent.get_hub().threadpool.apply(lambda: [_tokens(text) for text in cold])
    for text, count in zip(cold, counts):
        _remember(text, count)


def _remember(text: str, count: int) -> int:
    global _known_chars
    if text not in _known:
        _known[text] = count
        _known_chars += len(text)
        while _known_chars > _KNOWN_CHARS and len(_known) > 1:
            oldest = next(iter(_known))
            _known_chars -= len(oldest)
            del _known[oldest]
    return count


def _tokens(text: str) -> int:
    tokens = 0
    for match in _RUNS.finditer(text):
        kind, size = match.lastgroup, match.end() - match.start()
        if kind == "ascii":
            tokens += 1 if size <= 7 else -(-size // 5)
        elif kind == "cjk":
            tokens += size
        elif kind in ("word", "digits"):
            tokens += -(-size // 3)
        elif kind == "space":
            tokens += -(-(size - 1) // 4)
        elif kind == "symbol":
            tokens += -(-size // 2) + 2 * len(_ASTRAL.findall(match.group()))
    return tokens

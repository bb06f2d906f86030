"""The detectors of the privacy gateway: where in a text each built-in rule, and the
user's list of words, finds what to replace. `rules.RedactionRules.build` picks them by the
endpoint's setting; `placeholders.redact_text` runs them.

Every built-in detector is a linear-time pattern with a cheap pre-check (a text with no `@`
skips the email scan) and a validator where the format has one (Luhn for cards, mod 97 for
IBANs, ranges for IP addresses, Shannon entropy for unknown tokens). `bench/redaction.py`
measures what they cost together.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import os.path
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# An unknown token counts as a secret from this many characters and this entropy (bits
# per character: random base64 has about 5.5, English words under 4, a hex hash under 4).
ENTROPY_MIN_LENGTH = 32
ENTROPY_MIN_BITS = 4.0

# Each pattern begins with a character (class) rather than a look-behind, so that `re` can
# skip ahead to where a match may start; what must not come before a match is checked by its
# validator (`_after`). That keeps every pass well under 0.1 ms per 10 KB of ordinary text.
_EMAIL_DOMAIN = re.compile(r"@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b")
_EMAIL_LOCAL = re.compile(r"[A-Za-z0-9._%+-]{1,64}")  # read backwards from the @
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]{1,20000}?-----END [A-Z ]*PRIVATE KEY-----"
)
_KNOWN_SECRET = re.compile(
    r"(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|sk_live_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
    r"|glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{%d,}" % ENTROPY_MIN_LENGTH)
# A run of 20 or more characters a key can hold: the one pass over the text for both the
# known prefixes and the high-entropy tokens, which are then looked for inside each run.
# It is looked for from the character before it (`_RUN_START` at the text's start): `re`
# skips to a pattern's first class, so a run is tried at each word's start rather than at
# every character of every word (a quarter less CPU on prose).
_KEY_CHARS = "A-Za-z0-9+/_=.-"
_RUN_START = re.compile(rf"[{_KEY_CHARS}]{{20,}}")
_RUN = re.compile(rf"[^{_KEY_CHARS}]([{_KEY_CHARS}]{{20,}})")
# `[A-Z][A-Z]`, not `[A-Z]{2}`: `re` skips ahead only to a pattern's first class, not a repeat.
_IBAN = re.compile(r"[A-Z][A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
# 13 to 19 digits, in groups split by single spaces or dashes.
_CARD = re.compile(r"[0-9](?:[ -]?[0-9]){12,18}(?![0-9-])")
_IPV4 = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![0-9]|\.[0-9])")
_IPV6 = re.compile(r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
_COLONS = re.compile(r":[0-9A-Fa-f]{0,4}:")
# Where a phone, card or IPv4 address can be: a digit, + or bracket and at least five more
# digits or separators. One pass finds these few regions; the three detectors scan only
# them, not the whole text. (ASCII digits as `[0-9]`, which `re` tests faster than `\d`.)
# Seven characters at least: the shortest phone number, IPv4 address or card is no shorter.
_NUMERIC = re.compile(r"[0-9+(][0-9 .()/+-]{6,}")
# International (+ or 00 and a country code) or national (a leading 0, or an area code in
# brackets) numbers; 7 to 15 digits in all.
_PHONE = re.compile(
    r"(?:(?:\+|00)[1-9][0-9]{0,2}[ .-]?(?:\(0?[0-9]{1,4}\)[ .-]?)?|\([0-9]{2,5}\)[ .-]?|0)"
    r"[0-9]{1,5}(?:[ ./-]?[0-9]{2,5}){1,4}(?!\w)"
)


def _after(match: re.Match[str], refused: str) -> bool:
    """Whether the character before `match` is not a word character or one of `refused`."""
    start = match.start()
    if start == 0:
        return True
    before = match.string[start - 1]
    return not (before.isalnum() or before == "_" or before in refused)


def _luhn(digits: str) -> bool:
    total, double = 0, False
    for char in reversed(digits):
        value = ord(char) - 48
        if double:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
        double = not double
    return total % 10 == 0


def _card(match: re.Match[str]) -> bool:
    digits = match.group(0).replace(" ", "").replace("-", "")
    return _after(match, "-") and 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn(digits)


def _iban(match: re.Match[str]) -> bool:
    compact = match.group(0).replace(" ", "")
    if not (_after(match, "") and 15 <= len(compact) <= 34):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ipv4(match: re.Match[str]) -> bool:
    return _after(match, ".") and all(
        int(part) <= 255 and (part == "0" or part[0] != "0") for part in match.group(0).split(".")
    )


def _ipv6(match: re.Match[str]) -> bool:
    if not _after(match, ":"):
        return False
    try:
        return ipaddress.IPv6Address(match.group(0)).compressed != "::"
    except ValueError:
        return False


def _phone(match: re.Match[str]) -> bool:
    value = match.group(0)
    return _after(match, "+.") and 7 <= sum(c.isdigit() for c in value) <= 15


def _secrets(text: str) -> Iterator[tuple[int, int]]:
    """Keys and tokens: a known prefix anywhere in a run, else a run (split at dots) of
    ENTROPY_MIN_LENGTH characters or more that looks random."""
    first = _RUN_START.match(text)
    runs = _RUN.finditer(text)
    for run in itertools.chain((first,) if first else (), runs):
        value, offset = run.group(run.lastindex or 0), run.start(run.lastindex or 0)
        known = [m.span() for m in _KNOWN_SECRET.finditer(value) if _secret_start(value, m)]
        if known:
            for start, end in known:
                yield offset + start, offset + end
            continue
        if len(value) < ENTROPY_MIN_LENGTH:
            continue
        for token in _TOKEN.finditer(value.replace(".", " ")):
            if _high_entropy(token):
                yield offset + token.start(), offset + token.end()


def _secret_start(run: str, match: re.Match[str]) -> bool:
    start = match.start()
    return start == 0 or not (run[start - 1].isalnum() or run[start - 1] in "_-")


def _entropy(token: str) -> float:
    length = len(token)
    return -sum(n / length * math.log2(n / length) for n in Counter(token).values())


def _high_entropy(match: re.Match[str]) -> bool:
    value = match.group(0)
    has_digit = any(c.isdigit() for c in value)
    has_letter = any(c.isalpha() for c in value)
    return has_digit and has_letter and _entropy(value) >= ENTROPY_MIN_BITS


def _emails(text: str) -> Iterator[tuple[int, int]]:
    """Email addresses, found from their `@` (a literal `re` finds at once) rather than
    from every word that could begin one."""
    for domain in _EMAIL_DOMAIN.finditer(text):
        at = domain.start()
        window = text[max(0, at - 64) : at][::-1]
        local = _EMAIL_LOCAL.match(window)
        if local is None:
            continue
        start = at - local.end()
        while start < at and not text[start].isalnum():
            start += 1  # an address begins with a letter or digit
        if start < at and (
            start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "._%+-")
        ):
            yield start, domain.end()


class WordFinder:
    """The user's words, whatever their case, as whole words.

    The text is lower-cased and searched with a case-sensitive alternation (re.IGNORECASE
    tried the whole alternation at every character: 20 names cost 2.5 ms per 10 KB). When
    the words share a first letter or more, `re` finds that prefix at once and one pass is
    cheapest; otherwise the words are tried only where a word can start: after a space (a
    literal `re` finds at once), after another character that is not a letter, digit or
    `_`, and at the text's start. A text whose length lower-casing changes (a few
    non-Latin letters) is searched with IGNORECASE.

    A word inside an email address yields to the email rule when that rule is on, so that
    `jane.roe@example.com` goes out as one `[EMAIL_1]` rather than as
    `jane.[NAME_1]@example.com`, which would leave the rest of the address readable. With
    the email rule off, and anywhere else (a URL, a file name), the word is still replaced:
    the user listed it so that it never leaves.
    """

    def __init__(self, words: tuple[str, ...], emails: bool):
        ordered = sorted({w.lower() for w in words}, key=len, reverse=True)
        word = rf"(?:{'|'.join(re.escape(w) for w in ordered)})(?!\w)"
        self.at_start = re.compile(word)
        self.after_space = re.compile(rf" ({word})")
        self.after_other = re.compile(rf"[^a-z0-9_ ]({word})")
        self.any_case = re.compile(word, re.IGNORECASE)
        self.one_pass = bool(os.path.commonprefix(ordered))
        self.emails = emails

    def __call__(self, text: str) -> Iterator[tuple[int, int]]:
        lowered = text.lower()
        if len(lowered) != len(text):
            spans = [m.span() for m in self.any_case.finditer(text)]
        elif self.one_pass:
            spans = [m.span() for m in self.at_start.finditer(lowered)]
        else:
            spans = [m.span(1) for m in self.after_space.finditer(lowered)]
            spans += [m.span(1) for m in self.after_other.finditer(lowered)]
            first = self.at_start.match(lowered)
            if first:
                spans.append(first.span())
            spans.sort()
        last_end = 0
        for start, end in spans:
            if start < last_end:
                continue  # inside a longer word of the list found from an earlier start
            if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
                continue  # inside a longer word
            if self.emails and _in_email(text, start, end):
                continue
            last_end = end
            yield start, end


# What an address can hold around a word: its local part's and its domain's characters.
_ADDRESS_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-@")


def _in_email(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is part of an email address the email rule replaces."""
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    if not ((before and before in "._%+-@") or (after and after in "._%+-@")):
        return False  # the common case: a word between spaces or punctuation
    left, right = start, end
    while left > 0 and text[left - 1] in _ADDRESS_CHARS:
        left -= 1
    while right < len(text) and text[right] in _ADDRESS_CHARS:
        right += 1
    token = text[left:right]
    if "@" not in token:
        return False
    return any(s <= start - left and end - left <= e for s, e in _emails(token))


@dataclass(frozen=True)
class Detector:
    """One pass over a text: matches of `pattern` (or the spans `find` yields) that `valid`
    accepts become placeholders of `label`. `needs` is a cheap pre-check of the whole text."""

    rule: str
    label: str
    pattern: re.Pattern[str] | None = None
    valid: Callable[[re.Match[str]], bool] | None = None
    needs: Callable[[str], Any] | None = None
    labels: dict[str, str] | None = None  # the user's words: label per lower-cased word
    find: Callable[[str], Iterator[tuple[int, int]]] | None = None
    within: re.Pattern[str] | None = None  # only inside these regions (the numeric ones)
    # A cheap test of one region (text, start, end) before the pattern runs on it.
    region_may_hold: Callable[[str, int, int], bool] | None = None

    def spans(
        self, text: str, regions: list[tuple[int, int]] | None = None
    ) -> Iterator[tuple[int, int]]:
        """Where this detector matches in `text`. `regions`: `self.regions(text)`, when the
        caller has them already (the detectors `within` one pattern share one scan)."""
        if self.needs is not None and not self.needs(text):
            return
        if self.find is not None:
            yield from self.find(text)
            return
        assert self.pattern is not None
        valid = self.valid
        if self.within is None:
            regions = [(0, len(text))]
        elif regions is None:
            regions = self.regions(text)
        may_hold = self.region_may_hold
        for start, end in regions:
            if may_hold is not None and not may_hold(text, start, end):
                continue
            for match in self.pattern.finditer(text, start, end):
                if valid is None or valid(match):
                    yield match.span()

    def regions(self, text: str) -> list[tuple[int, int]]:
        """The parts of `text` this detector scans (its `within` pattern's matches)."""
        if self.within is None:
            return [(0, len(text))]
        return [region.span() for region in self.within.finditer(text)]


BUILTIN_DETECTORS: dict[str, list[Detector]] = {
    "secret": [
        Detector("secret", "SECRET", _PRIVATE_KEY, needs=lambda t: "-----BEGIN" in t),
        Detector("secret", "SECRET", find=_secrets),
    ],
    "email": [Detector("email", "EMAIL", find=_emails, needs=lambda t: "@" in t)],
    "iban": [Detector("iban", "IBAN", _IBAN, _iban)],
    "card": [
        Detector(
            "card",
            "CARD",
            _CARD,
            _card,
            within=_NUMERIC,
            region_may_hold=lambda text, start, end: end - start >= 13,  # 13 digits at least
        )
    ],
    "ip": [
        Detector(
            "ip",
            "IP",
            _IPV4,
            _ipv4,
            within=_NUMERIC,
            region_may_hold=lambda text, start, end: text.count(".", start, end) >= 3,
        ),
        Detector("ip", "IP", _IPV6, _ipv6, needs=_COLONS.search),
    ],
    "phone": [Detector("phone", "PHONE", _PHONE, _phone, within=_NUMERIC)],
}

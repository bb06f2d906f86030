"""What an endpoint's privacy gateway replaces: its `redaction` setting, checked, and the
detectors that setting switches on.

The setting (`Endpoint.settings["redaction"]`, `PATCH /api/endpoints/<id>` with
`redaction`):

    {"enabled": true | false | null,   null: by the endpoint's address (default_enabled)
     "rules": ["email", "phone", "iban", "card", "ip", "secret"],   the built-ins switched on
     "words": [{"text": "Jane Roe", "label": "NAME"}, ...],         the user's own words
     "patterns": [{"pattern": "ACME-\\d{4}", "label": "PROJECT"}]}  the user's own regexes

A pattern is compiled and its shape checked when it is saved: one that cannot compile
(`redaction_pattern_invalid`) or that could backtrack for minutes on a hostile text (a
repeat inside a repeat, or a repeated alternation whose branches can start alike:
`redaction_pattern_slow`) is refused, since Python's `re` has no timeout. Every built-in
detector is a linear-time pattern with a cheap pre-check (a text with no `@` skips the email
scan) and a validator where the format has one (Luhn for cards, mod 97 for IBANs, ranges for
IP addresses, Shannon entropy for unknown tokens).
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from ..addresses import is_public
from ..errors import invalid

# The built-in rules, in the order they run, and the label of their placeholders.
BUILTIN_RULES: dict[str, str] = {
    "secret": "SECRET",
    "email": "EMAIL",
    "iban": "IBAN",
    "card": "CARD",
    "ip": "IP",
    "phone": "PHONE",
}
RULE_NAMES = {
    "secret": "API keys and tokens",
    "email": "Email addresses",
    "iban": "IBANs",
    "card": "Payment card numbers",
    "ip": "IP addresses",
    "phone": "Phone numbers",
}
MAX_WORDS = 500
MAX_WORD_CHARS = 200
MAX_PATTERNS = 50
MAX_PATTERN_CHARS = 300
LABEL = re.compile(r"[A-Z][A-Z0-9]{0,19}")
# An unknown token counts as a secret from this many characters and this entropy (bits
# per character: random base64 has about 5.5, English words under 4, a hex hash under 4).
ENTROPY_MIN_LENGTH = 32
ENTROPY_MIN_BITS = 4.0

# --- the detectors ------------------------------------------------------------------------------

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


class _WordFinder:
    """The user's words, whatever their case, as whole words.

    The text is lower-cased and searched with a case-sensitive alternation: `re` then skips
    to the words' first letters, where re.IGNORECASE tries the whole alternation at every
    character (20 names cost 2.5 ms per 10 KB that way, 0.3 ms this way). A text whose
    length lower-casing changes (a few non-Latin letters) is searched with IGNORECASE.

    A word inside an email address yields to the email rule when that rule is on, so that
    `jane.roe@example.com` goes out as one `[EMAIL_1]` rather than as
    `jane.[NAME_1]@example.com`, which would leave the rest of the address readable. With
    the email rule off, and anywhere else (a URL, a file name), the word is still replaced:
    the user listed it so that it never leaves.
    """

    def __init__(self, words: tuple[str, ...], emails: bool):
        ordered = sorted({w.lower() for w in words}, key=len, reverse=True)
        alternation = "|".join(re.escape(w) for w in ordered)
        self.lowered = re.compile(rf"(?:{alternation})(?!\w)")
        self.any_case = re.compile(rf"(?:{alternation})(?!\w)", re.IGNORECASE)
        self.emails = emails

    def __call__(self, text: str) -> Iterator[tuple[int, int]]:
        lowered = text.lower()
        if len(lowered) == len(text):
            found = self.lowered.finditer(lowered)
        else:
            found = self.any_case.finditer(text)
        for match in found:
            start, end = match.span()
            if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
                continue  # inside a longer word
            if self.emails and _in_email(text, start, end):
                continue
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


_BUILTIN_DETECTORS: dict[str, list[Detector]] = {
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


# --- the setting ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RedactionRules:
    """An endpoint's redaction, checked and compiled: what `redact_text` runs."""

    enabled: bool
    rules: tuple[str, ...] = tuple(BUILTIN_RULES)
    words: tuple[tuple[str, str], ...] = ()  # (word, label)
    patterns: tuple[tuple[str, str], ...] = ()  # (pattern, label)
    detectors: tuple[Detector, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def build(
        cls,
        enabled: bool,
        rules: tuple[str, ...],
        words: tuple[tuple[str, str], ...],
        patterns: tuple[tuple[str, str], ...],
    ) -> RedactionRules:
        """The rules with their detectors: the user's words and patterns first (the most
        specific), then the built-ins in BUILTIN_RULES' order."""
        detectors: list[Detector] = []
        if words:
            detectors.append(
                Detector(
                    "words",
                    "NAME",
                    labels={w.lower(): label for w, label in words},
                    find=_WordFinder(tuple(w for w, _ in words), "email" in rules),
                )
            )
        for pattern, label in patterns:
            detectors.append(Detector("patterns", label, re.compile(pattern)))
        for rule in BUILTIN_RULES:
            if rule in rules:
                detectors.extend(_BUILTIN_DETECTORS[rule])
        return cls(enabled, rules, words, patterns, tuple(detectors))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": list(self.rules),
            "words": [{"text": w, "label": label} for w, label in self.words],
            "patterns": [{"pattern": p, "label": label} for p, label in self.patterns],
        }


def default_enabled(base_url: str) -> bool:
    """Whether an endpoint at `base_url` is outside this machine and its private network
    (redaction is on by default there). An address is judged as it is; a host name is
    local when it is `localhost`, a single label (`ollama` in a compose network) or under
    a local-only suffix; any other name counts as outside (no DNS look-up: the answer
    must not change with the network the server happens to be on)."""
    host = (urlsplit(base_url).hostname or "").rstrip(".").lower()
    if not host:
        return True
    try:
        return is_public(ipaddress.ip_address(host))
    except ValueError:
        pass
    local_suffixes = (".localhost", ".local", ".lan", ".internal", ".home.arpa", ".localdomain")
    return not (host == "localhost" or "." not in host or host.endswith(local_suffixes))


def rules_for(setting: Any, base_url: str) -> RedactionRules:
    """An endpoint's stored setting as rules (stored settings were checked when saved; an
    absent one is the default: on outside the local network, every built-in rule)."""
    setting = setting if isinstance(setting, dict) else {}
    enabled = setting.get("enabled")
    return _compiled(
        default_enabled(base_url) if enabled is None else bool(enabled),
        tuple(setting.get("rules", BUILTIN_RULES)),
        tuple((w["text"], w["label"]) for w in setting.get("words", ())),
        tuple((p["pattern"], p["label"]) for p in setting.get("patterns", ())),
    )


def setting_view(setting: Any, base_url: str) -> dict[str, Any]:
    """An endpoint's redaction as it applies: `enabled`, whether that is `automatic` (by
    its address; `outside` says what the address decides), its rules, words and patterns."""
    stored = setting if isinstance(setting, dict) else {}
    return {
        "enabled": rules_for(setting, base_url).enabled,
        "automatic": stored.get("enabled") is None,
        "outside": default_enabled(base_url),
        **rules_for(setting, base_url).to_dict(),
    }


_COMPILED: dict[tuple, RedactionRules] = {}


def _compiled(enabled, rules, words, patterns) -> RedactionRules:
    # A turn reads its endpoint's rules per step; compiling the words' alternation each time
    # would cost more than the redaction. Settings are few: the cache stays small.
    key = (enabled, rules, words, patterns)
    found = _COMPILED.get(key)
    if found is None:
        if len(_COMPILED) > 256:
            _COMPILED.clear()
        found = _COMPILED[key] = RedactionRules.build(enabled, rules, words, patterns)
    return found


def check_rules(value: Any) -> dict[str, Any]:
    """The `redaction` field of an endpoint edit, checked, as it is stored (the fields it
    gives; an edit keeps the others). Refused with
    `invalid_redaction` (its shape), `redaction_pattern_invalid` (a regex that does not
    compile or matches the empty text) or `redaction_pattern_slow` (one that could take
    exponential time)."""
    if not isinstance(value, dict) or set(value) - {"enabled", "rules", "words", "patterns"}:
        raise invalid(
            "redaction must be an object with enabled, rules, words and patterns.",
            "invalid_redaction",
        )
    # Only the fields given: an edit changes those and keeps the others (endpoints.py).
    clean: dict[str, Any] = {}
    if "enabled" in value:
        enabled = value["enabled"]
        if enabled is not None and not isinstance(enabled, bool):
            raise invalid(
                "redaction.enabled must be true, false or null (by address).", "invalid_redaction"
            )
        clean["enabled"] = enabled
    if "rules" in value:
        rules = value["rules"]
        if not isinstance(rules, list) or not all(r in BUILTIN_RULES for r in rules):
            raise invalid(
                f"redaction.rules must be a list of {', '.join(BUILTIN_RULES)}.",
                "invalid_redaction",
            )
        clean["rules"] = [r for r in BUILTIN_RULES if r in rules]
    if "words" in value:
        clean["words"] = _entries(value["words"] or [], "text", MAX_WORDS, MAX_WORD_CHARS, "NAME")
    if "patterns" in value:
        clean["patterns"] = _entries(
            value["patterns"] or [], "pattern", MAX_PATTERNS, MAX_PATTERN_CHARS, "MATCH"
        )
        for entry in clean["patterns"]:
            check_pattern(entry["pattern"])
    return clean


def _entries(value: Any, key: str, most: int, longest: int, label: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or len(value) > most:
        raise invalid(f"redaction: at most {most} {key} entries.", "invalid_redaction")
    out: list[dict[str, str]] = []
    for entry in value:
        if isinstance(entry, str):
            entry = {key: entry}
        if not isinstance(entry, dict) or set(entry) - {key, "label"}:
            raise invalid(
                f'redaction: each entry is {{"{key}": …, "label": …}}.', "invalid_redaction"
            )
        text = entry.get(key)
        if not isinstance(text, str) or not text.strip() or len(text) > longest:
            raise invalid(f"redaction: a {key} is 1 to {longest} characters.", "invalid_redaction")
        name = entry.get("label") or label
        if not isinstance(name, str) or not LABEL.fullmatch(name.strip().upper()):
            raise invalid(
                "redaction: a label is 1 to 20 letters and digits, starting with a letter "
                "(NAME, CLIENT2).",
                "invalid_redaction",
            )
        out.append({key: text.strip() if key == "text" else text, "label": name.strip().upper()})
    return out


def check_pattern(pattern: str) -> None:
    """Refuse a regular expression that does not compile, matches the empty text, or has
    a shape that backtracks exponentially (see the module docstring)."""
    try:
        compiled = re.compile(pattern)
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise invalid(
            f"The pattern {pattern[:60]!r} is not a valid regular expression: {exc}.",
            "redaction_pattern_invalid",
        ) from None
    if compiled.fullmatch(""):
        raise invalid(
            f"The pattern {pattern[:60]!r} matches an empty text: it would replace nothing "
            "useful everywhere.",
            "redaction_pattern_invalid",
        )
    if _slow(parsed):
        raise invalid(
            f"The pattern {pattern[:60]!r} could take exponential time on some texts (a "
            "repeat inside a repeat, or alternatives that overlap under a repeat). Write it "
            "without the nesting, e.g. (ab)+ instead of (a+b?)+.",
            "redaction_pattern_slow",
        )


_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)


def _slow(items: Any) -> bool:
    """Whether an unbounded repeat holds something that can match the same text in more
    than one way: a repeat of varying length, or alternatives that can start alike."""
    for op, arg in items:
        if op in _REPEATS:
            low, high, body = arg
            unbounded = high == sre_constants.MAXREPEAT or high > 10
            if op != sre_constants.POSSESSIVE_REPEAT and unbounded and _ambiguous(body):
                return True
            if _slow(body):
                return True
        elif op == sre_constants.SUBPATTERN:
            if _slow(arg[-1]):
                return True
        elif op == sre_constants.BRANCH:
            if any(_slow(branch) for branch in arg[1]):
                return True
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            if _slow(arg[1]):
                return True
        elif op == sre_constants.GROUPREF:
            return True  # a back-reference can make any engine exponential
    return False


def _ambiguous(items: Any) -> bool:
    for op, arg in items:
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT) and arg[0] != arg[1]:
            return True
        if op == sre_constants.SUBPATTERN and _ambiguous(arg[-1]):
            return True
        if op == sre_constants.BRANCH:
            seen: set[int] = set()
            for branch in arg[1]:
                chars = _first(branch)
                if chars is None or chars & seen:
                    return True
                seen |= chars
            if any(_ambiguous(branch) for branch in arg[1]):
                return True
    return False


def _first(items: Any) -> set[int] | None:
    """The characters a sequence can start with, or None when that is not simple to say."""
    if not items:
        return None
    op, arg = items[0]
    if op == sre_constants.LITERAL:
        return {arg}
    if op == sre_constants.SUBPATTERN:
        return _first(arg[-1])
    if op == sre_constants.IN:
        chars: set[int] = set()
        for kind, value in arg:
            if kind == sre_constants.LITERAL:
                chars.add(value)
            elif kind == sre_constants.RANGE and value[1] - value[0] < 512:
                chars.update(range(value[0], value[1] + 1))
            else:
                return None
        return chars
    return None


_FORM_LINE = re.compile(r"([A-Za-z][A-Za-z0-9]{0,19}):\s*(.+)")


def rules_from_form(enabled: str, rules: list[str], words: str, patterns: str) -> dict[str, Any]:
    """The endpoint form's privacy fields as a `redaction` setting for `check_rules`:
    `enabled` "" (by address), "1" or "0"; the ticked rules; words and patterns one a line,
    each optionally after its label (`CLIENT: Jane Roe`, `CASE: CASE-\\d{4}`)."""

    def lines(text: str, key: str, label: str) -> list[dict[str, str]]:
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            labelled = _FORM_LINE.fullmatch(line.strip())
            if labelled:
                out.append({key: labelled.group(2), "label": labelled.group(1).upper()})
            else:
                out.append({key: line.strip(), "label": label})
        return out

    return {
        "enabled": {"1": True, "0": False}.get(enabled),
        "rules": rules,
        "words": lines(words, "text", "NAME"),
        "patterns": lines(patterns, "pattern", "MATCH"),
    }

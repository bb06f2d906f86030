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
`redaction_pattern_slow`) is refused, since Python's `re` has no timeout. The detectors
themselves are in `detectors.py`.
"""

from __future__ import annotations

import ipaddress
import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..addresses import is_public
from ..errors import invalid
from .detectors import BUILTIN_DETECTORS, Detector, WordFinder

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
                    find=WordFinder(tuple(w for w, _ in words), "email" in rules),
                )
            )
        for pattern, label in patterns:
            detectors.append(Detector("patterns", label, re.compile(pattern)))
        for rule in BUILTIN_RULES:
            if rule in rules:
                detectors.extend(BUILTIN_DETECTORS[rule])
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

"""The privacy gateway's rules and placeholders (issue 41): what each detector replaces and
what it leaves, placeholders stable in a chat, restoring a stream split anywhere, and
refused settings. Pure functions: no server needed."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from numi.errors import NumiError
from numi.providers.events import (
    ChatRequest,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallComplete,
)
from numi.redaction import (
    Placeholders,
    Restorer,
    check_rules,
    default_enabled,
    redact_request,
    redact_text,
    restored_events,
)
from numi.redaction.placeholders import matches
from numi.redaction.rules import rules_for

OUTSIDE = "https://api.example.com/v1"


def redact(text: str, setting: dict | None = None, placeholders: Placeholders | None = None):
    counts: Counter[str] = Counter()
    out = redact_text(text, rules_for(setting, OUTSIDE), placeholders or Placeholders(), counts)
    return out, counts


@pytest.mark.parametrize(
    "value, label",
    [
        ("jane.roe+work@mail.example.co.uk", "EMAIL"),
        ("+49 30 1234567", "PHONE"),
        ("(555) 123-4567", "PHONE"),
        ("030 12345678", "PHONE"),
        ("DE89 3704 0044 0532 0130 00", "IBAN"),
        ("GB82WEST12345698765432", "IBAN"),
        ("4111 1111 1111 1111", "CARD"),
        ("5500-0000-0000-0004", "CARD"),
        ("192.168.1.20", "IP"),
        ("2001:db8::8a2e:370:7334", "IP"),
        ("sk-proj-abcdefghijklmnopqrstuvwxyz0123", "SECRET"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "SECRET"),
        ("AKIAIOSFODNN7EXAMPLE", "SECRET"),
        ("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1u", "SECRET"),
    ],
)
def test_each_rule_replaces_its_kind(value, label):
    out, counts = redact(f"Here: {value}. Thanks")
    assert out == f"Here: [{label}_1]. Thanks"
    assert counts == {label: 1}


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 fails Luhn",  # not a card number
        "IBAN DE89 3704 0044 0532 0130 01 fails mod 97",
        "on 2024-01-15 at 12:30:00, version 3.11, 999.1.1.1",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b and uuid 123e4567-e89b-12d3-a456-426614174000",
        "a_long_snake_case_identifier_name_for_a_function",
        "no @ here, no digits either",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == (text, Counter())


def test_a_value_keeps_its_placeholder_in_a_chat_across_requests_and_endpoints():
    stored = Placeholders()
    first, _ = redact("mail a@example.com, then b@example.com", placeholders=stored)
    kept = Placeholders(list(stored.values.items()))  # as the chat reads them back
    second, counts = redact("b@example.com wrote to a@example.com", None, kept)
    assert first == "mail [EMAIL_1], then [EMAIL_2]"
    assert second == "[EMAIL_2] wrote to [EMAIL_1]" and counts == {"EMAIL": 2}
    assert kept.added == []  # nothing new to store
    third, _ = redact("c@example.com", None, kept)
    assert third == "[EMAIL_3]" and kept.added == [("[EMAIL_3]", "c@example.com")]


def test_the_users_words_and_patterns_with_their_labels():
    setting = check_rules(
        {
            "words": [{"text": "Jane Roe", "label": "client"}, "Acme"],
            "patterns": [{"pattern": r"CASE-\d{4}", "label": "CASE"}],
            "rules": ["email"],
        }
    )
    out, counts = redact("JANE ROE of acme, case CASE-0042, +49 30 1234567", setting)
    assert out == "[CLIENT_1] of [NAME_1], case [CASE_1], +49 30 1234567"  # phone: off
    assert counts == {"CLIENT": 1, "NAME": 1, "CASE": 1}


def test_a_word_inside_an_email_address_yields_to_the_email_rule():
    """The word "Roe" in jane.roe@example.com: the address goes out whole as one
    placeholder, not as jane.[CLIENT_1]@example.com, which the email rule then no longer
    recognised (leaving the rest of the address readable)."""
    setting = check_rules({"words": [{"text": "Roe", "label": "client"}]})
    text = "Mail jane.roe@example.com, roe@example.com or jane-roe@example.com; ROE. Roe's"
    out, counts = redact(text, setting)
    assert out == "Mail [EMAIL_1], [EMAIL_2] or [EMAIL_3]; [CLIENT_1]. [CLIENT_1]'s"
    assert counts == {"EMAIL": 3, "CLIENT": 2}
    panel = matches(text, rules_for(setting, OUTSIDE))
    assert [label for _, _, label in panel] == ["EMAIL", "EMAIL", "EMAIL", "CLIENT", "CLIENT"]


def test_a_word_in_an_address_the_rules_leave_is_still_replaced():
    """With the email rule off, or in a URL (no rule replaces a URL whole), the word is
    replaced where it stands: a listed name never leaves, and a word in another word stays."""
    words = {"words": [{"text": "Roe", "label": "client"}]}
    assert redact("to jane.roe@example.com", check_rules({**words, "rules": ["phone"]}))[0] == (
        "to jane.[CLIENT_1]@example.com"
    )
    text = "see https://roe.example.com/team/roe?x=1 and Roebuck, jane_roe"
    out, _ = redact(text, check_rules(words))
    assert out == "see https://[CLIENT_1].example.com/team/[CLIENT_1]?x=1 and Roebuck, jane_roe"


@pytest.mark.parametrize("text", ["JANE ROE", "jane roe", "Jane Roe", "İstanbul: Jane ROE"])
def test_the_users_words_match_whatever_their_case(text):
    """Lower-casing İ makes the text longer: such a text is searched case-insensitively."""
    out, counts = redact(text, check_rules({"words": ["Jane Roe"]}))
    assert out.endswith("[NAME_1]") and counts == {"NAME": 1}


@pytest.mark.parametrize("prefix", ["", "İ "])  # lower-cased as it is, and case-insensitively
def test_the_users_words_are_found_after_any_separator_and_the_longest_wins(prefix):
    setting = check_rules(
        {"words": [{"text": "Jane Roe", "label": "CLIENT"}, "Roe", "Zoë", "Ann-Marie"]}
    )
    text = prefix + "Jane Roe, (roe) «Roe» —Roe\nroe\tZOË 'ann-marie' Roebuck xroe Roe_1 ROE"
    out, counts = redact(text, setting)
    assert out == prefix + (
        "[CLIENT_1], ([NAME_1]) «[NAME_1]» —[NAME_1]\n[NAME_1]\t[NAME_2] '[NAME_3]' Roebuck "
        "xroe Roe_1 [NAME_1]"
    )
    assert counts == {"CLIENT": 1, "NAME": 7}


@pytest.mark.parametrize("prefix", ["", "İ "])
def test_words_that_share_a_prefix_are_found_in_one_pass_alike(prefix):
    setting = check_rules({"words": ["Roe", "Roeland", "ROE-2"]})
    out, counts = redact(prefix + "Roe, (roe) «Roeland» —roe-2 Roebuck xroe Roe_1 ROE", setting)
    assert out == prefix + "[NAME_1], ([NAME_1]) «[NAME_2]» —[NAME_3] Roebuck xroe Roe_1 [NAME_1]"
    assert counts == {"NAME": 5}


def test_rules_switched_off_one_by_one():
    setting = check_rules({"rules": ["phone"]})
    assert redact("a@example.com +49 30 1234567", setting)[0] == "a@example.com [PHONE_1]"


@pytest.mark.parametrize(
    "value, code",
    [
        ({"patterns": [{"pattern": "(unclosed", "label": "X"}]}, "redaction_pattern_invalid"),
        ({"patterns": [{"pattern": "a*", "label": "X"}]}, "redaction_pattern_invalid"),
        ({"patterns": [{"pattern": "(a+)+$", "label": "X"}]}, "redaction_pattern_slow"),
        ({"patterns": [{"pattern": r"(\w+|\d)+x", "label": "X"}]}, "redaction_pattern_slow"),
        ({"patterns": [{"pattern": "(a|ab)*c", "label": "X"}]}, "redaction_pattern_slow"),
        ({"patterns": [{"pattern": r"(\d+\s?)+!", "label": "X"}]}, "redaction_pattern_slow"),
        ({"patterns": [{"pattern": r"(a)\1", "label": "X"}]}, "redaction_pattern_slow"),
        ({"rules": ["email", "dna"]}, "invalid_redaction"),
        ({"words": [{"text": "x", "label": "no spaces"}]}, "invalid_redaction"),
        ({"words": [""]}, "invalid_redaction"),
        ({"enabled": "yes"}, "invalid_redaction"),
        ({"surprise": 1}, "invalid_redaction"),
        ("on", "invalid_redaction"),
    ],
)
def test_bad_settings_are_refused_with_a_stable_code(value, code):
    with pytest.raises(NumiError) as refused:
        check_rules(value)
    assert refused.value.code == code and refused.value.status == 400


def test_safe_patterns_are_accepted():
    for pattern in (
        r"CASE-\d{4}",
        r"(ab)+",
        r"[A-Z]{2}\d+",
        r"(?:Mr|Mrs)\.? \w+",
        r"(\d|[a-f])+",
        r"(?:x[0-9]{2})+",
    ):
        check_rules({"patterns": [{"pattern": pattern, "label": "X"}]})


@pytest.mark.parametrize(
    "url, outside",
    [
        ("https://api.openai.com/v1", True),
        ("https://8.8.8.8/v1", True),
        ("http://127.0.0.1:11434/v1", False),
        ("http://localhost:8080", False),
        ("http://192.168.1.5:8000/v1", False),
        ("http://[fd00::5]:8000", False),
        ("http://ollama:11434", False),
        ("http://gpu-box.lan:8000", False),
    ],
)
def test_on_by_default_only_outside_this_machines_network(url, outside):
    assert default_enabled(url) is outside
    assert rules_for(None, url).enabled is outside


VALUES = {"[EMAIL_1]": "jane@example.com", "[NAME_12]": 'Jane "JR" Roe'}
ANSWER = "Write to [EMAIL_1], [NAME_12] said; [NOTE_1] and [x] stay."
RESTORED = 'Write to jane@example.com, Jane "JR" Roe said; [NOTE_1] and [x] stay.'


@pytest.mark.parametrize("cut", range(len(ANSWER) + 1))
def test_a_placeholder_split_at_any_position_is_restored(cut):
    restorer = Restorer(VALUES)
    out = restorer.feed(ANSWER[:cut]) + restorer.feed(ANSWER[cut:]) + restorer.flush()
    assert out == RESTORED


def test_a_stream_of_single_characters_is_restored_and_holds_back_at_most_a_placeholder():
    restorer = Restorer(VALUES)
    pieces = [restorer.feed(char) for char in ANSWER]
    assert "".join(pieces) + restorer.flush() == RESTORED
    assert pieces[:9] == list("Write to ")  # text without "[" passes at once


def test_restored_events_cover_the_answer_the_reasoning_and_tool_arguments():
    arguments = {"to": "[EMAIL_1]", "names": ["[NAME_12]"]}
    events = [
        ReasoningDelta("ask [EMA"),
        ReasoningDelta("IL_1]"),
        TextDelta("to [NAME_"),
        TextDelta("12]"),
        ToolCallComplete(0, "c1", "send", arguments, json.dumps(arguments)),
        Finish("tool_calls"),
    ]
    out = list(restored_events(events, VALUES))
    assert "".join(e.text for e in out if isinstance(e, ReasoningDelta)) == "ask jane@example.com"
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == 'to Jane "JR" Roe'
    (call,) = [e for e in out if isinstance(e, ToolCallComplete)]
    expected = {"to": "jane@example.com", "names": ['Jane "JR" Roe']}
    assert call.arguments == expected and json.loads(call.arguments_json) == expected
    assert isinstance(out[-1], Finish)


def test_a_request_is_redacted_everywhere_and_the_original_is_untouched():
    request = ChatRequest(
        model="m",
        system="Owner: jane@example.com",
        messages=[
            {
                "role": "user",
                "content": [{"type": "document", "name": "a.txt", "text": "IP 10.1.2.3"}],
            },
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "call +49 30 1234567",
                "tool_calls": [
                    {
                        "id": "c",
                        "function": {"name": "f", "arguments": '{"to": "jane@example.com"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "sent to jane@example.com"},
        ],
    )
    before = json.dumps(request.messages)
    redacted = redact_request(request, rules_for(None, OUTSIDE), Placeholders())
    sent = json.dumps([redacted.request.system, redacted.request.messages])
    for raw in ("jane@example.com", "10.1.2.3", "1234567"):
        assert raw not in sent
    assert json.dumps(request.messages) == before
    assert redacted.counts == {"EMAIL": 3, "IP": 1, "PHONE": 1}


def test_the_context_panel_highlights_where_replacements_fall():
    text = "Jane Roe: jane@example.com"
    spans = matches(text, rules_for(check_rules({"words": ["Jane Roe"]}), OUTSIDE))
    assert [(text[s:e], label) for s, e, label in spans] == [
        ("Jane Roe", "NAME"),
        ("jane@example.com", "EMAIL"),
    ]

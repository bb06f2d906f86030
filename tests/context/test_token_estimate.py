"""The token estimate per script (issue 35): one rate of four characters a token was a
quarter off on a history mixing English, code, German and Japanese. No tokenizer library
is installed here (tiktoken is not a dependency), so the estimate is held to counts that
tiktoken's cl100k_base published (OpenAI's cookbook, "How to count tokens with
tiktoken"): the same texts, the counts it printed."""

from __future__ import annotations

from numi.chat.context import estimate_tokens
from numi.chat.token_estimate import text_tokens

# (text, its cl100k_base token count as the cookbook printed it)
KNOWN = [
    ("The quick brown fox jumps over the lazy dog", 9),
    ("antidisestablishmentarianism", 6),
    ("2 + 2 = 4", 7),
    ("お誕生日おめでとう", 9),
]


def test_a_history_of_several_scripts_is_estimated_within_a_quarter():
    history = [{"role": "user", "content": text} for text, _ in KNOWN]
    known = sum(count for _, count in KNOWN)
    framing = 4 * len(history)
    estimate = estimate_tokens(history) - framing
    assert abs(estimate - known) / known <= 0.25, (estimate, known)
    # Each text on its own stays near its count too; Japanese is no longer a quarter of it.
    for text, count in KNOWN:
        assert abs(text_tokens(text) - count) <= 2, (text, text_tokens(text), count)


def test_each_script_costs_its_own_rate():
    japanese = "吾輩は猫である。名前はまだ無い。"
    assert text_tokens(japanese) >= len(japanese) * 0.8  # about a token a character
    english = "the answer is in the second paragraph of the report"
    assert len(english) / 6 <= text_tokens(english) <= len(english) / 3
    # German words with umlauts cost more than English words of the same length.
    assert text_tokens("Größenänderung") > text_tokens("Sizeadjustment")
    # Indentation and brackets are tokens of their own; a single space is not.
    assert text_tokens("if x:\n        y()") > text_tokens("if x: y")
    assert text_tokens("") == 0

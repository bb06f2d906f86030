"""The privacy gateway's cost (issue 41): CPU per 10 KB of request text redacted, and per
streamed token restored.

Redacting: a request of mixed prose, code and personal data (an email, a phone number, an
IBAN, a card number, an IP address and a key in every 2 KB; the user's 20 words and a
pattern), 10 KB in 20 messages, redacted with every rule on (once with 20 words that share
a prefix, once with 20 names that do not), against a floor in the same
run: the same text scanned once by `str.count` (the least any pass can cost). Restoring:
an answer of 4-character tokens with a placeholder in every 40 tokens, split at every
position, against a floor of the loop that only joins the tokens. Targets: at most 1 ms of
CPU per 10 KB, at most 5 µs per token.

    python bench/redaction.py [--runs 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numi.providers.events import ChatRequest  # noqa: E402
from numi.redaction import Placeholders, Restorer, check_rules, redact_request  # noqa: E402
from numi.redaction.rules import rules_for  # noqa: E402

PROSE = [
    "The quarterly report shows a steady rise in the second half of the year. ",
    "def total(items):\n    return sum(item.price for item in items)\n",
    "Please send the revised contract to the client before Friday, as agreed. ",
    "Die Größenordnung der Änderung ist überraschend groß, schreibt sie. ",
    "Version 3.11 fixed it on 2024-01-15 at 12:30; see commit 3f786850e387550f. ",
]
PERSONAL = [
    "Write to jane.roe@example.com. ",
    "Call +49 30 1234567 after nine. ",
    "IBAN DE89 3704 0044 0532 0130 00. ",
    "Card 4111 1111 1111 1111. ",
    "Server 192.168.1.20 answers. ",
    "Key sk-proj-abcdefghijklmnopqrstuvwxyz0123. ",
]
WORDS = [{"text": f"Client Name{n}", "label": "CLIENT"} for n in range(20)]
# Words that share no prefix, as a user's list of clients does: `re` cannot skip ahead to
# one literal start, so this is the dearer case of the two.
NAMES = [
    {"text": name, "label": "CLIENT"}
    for name in (
        "Jane Roe, Acme Corp, Miller, Schmidt, Okonkwo, Tanaka, Project Falcon, Berlin Office, "
        "Dr. Weiss, Hartmann, Nguyen, Rossi, Kowalski, Larsen, Patel, Silva, Dubois, Novak, "
        "Fischer, Ivanova"
    ).split(", ")
]


def request_text(rng: random.Random, size: int = 10_240) -> list[str]:
    """20 messages of about size/20 characters each, personal data in every 2 KB."""
    messages = []
    for _ in range(20):
        text = ""
        while len(text) < size // 20:
            text += rng.choice(PROSE)
            if rng.random() < 0.12:
                text += rng.choice(PERSONAL)
        messages.append(text[: size // 20])
    return messages


def cpu_ms(work, repeat: int) -> float:
    started = time.process_time()
    for _ in range(repeat):
        work()
    return (time.process_time() - started) / repeat * 1000


def measure(runs: int = 7) -> list[dict]:
    """The rows of bench/run.py: redacting 10 KB (every rule on; and with 20 names that share
    no prefix) and restoring a streamed token, each with its floor from the same run."""
    from stats import row

    result = run(runs)
    return [
        row(
            "redaction",
            "CPU to redact 10 KB of request, every rule on",
            result["redact"],
            "ms",
            "≤ 1 ms",  # issue 45
            note=f"{result['items']} items found; floor (one str.count pass) "
            f"{statistics.median(result['floor']):.3f} ms",
            ratio=[r / max(f, 1e-6) for r, f in zip(result["redact"], result["floor"])],
        ),
        row(
            "redaction",
            "CPU to redact 10 KB with 20 names that share no prefix",
            result["redact_names"],
            "ms",
            "≤ 1 ms",
        ),
        row(
            "redaction",
            "CPU to restore a streamed token",
            result["restore"],
            "µs",
            "≤ 5 µs",  # issue 45
            note=f"floor (joining the tokens) {statistics.median(result['restore_floor']):.3f} µs",
            ratio=[r / max(f, 1e-6) for r, f in zip(result["restore"], result["restore_floor"])],
        ),
    ]


def run(runs: int) -> dict:
    pattern = [{"pattern": r"CASE-\d{4}", "label": "CASE"}]
    rules = rules_for(check_rules({"words": WORDS, "patterns": pattern}), "https://api.example.com")
    names = rules_for(check_rules({"words": NAMES, "patterns": pattern}), "https://api.example.com")
    redact, redact_names, floor, items = [], [], [], 0
    restore, restore_floor = [], []
    for each in range(runs):
        rng = random.Random(each)
        texts = request_text(rng)
        request = ChatRequest(model="m", messages=[{"role": "user", "content": t} for t in texts])
        redact.append(cpu_ms(lambda: redact_request(request, rules, Placeholders()), 50))
        redact_names.append(cpu_ms(lambda: redact_request(request, names, Placeholders()), 50))
        floor.append(cpu_ms(lambda: [t.count("@") for t in texts], 50))
        items = sum(redact_request(request, rules, Placeholders()).counts.values())

        values = {f"[EMAIL_{n}]": f"person{n}@example.com" for n in range(1, 50)}
        tokens: list[str] = []
        for n in range(4000):
            tokens.append("[EMAIL_" if n % 40 == 0 else " wor")
            if n % 40 == 0:
                tokens.append(f"{n % 49 + 1}] ")

        def restored() -> None:
            restorer = Restorer(values)
            "".join(restorer.feed(token) for token in tokens) + restorer.flush()

        restore.append(cpu_ms(restored, 20) * 1000 / len(tokens))
        restore_floor.append(cpu_ms(lambda: "".join(t for t in tokens), 20) * 1000 / len(tokens))
    return {
        "redact": redact,
        "redact_names": redact_names,
        "floor": floor,
        "items": items,
        "detectors": len(rules.detectors),
        "restore": restore,
        "restore_floor": restore_floor,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    result = run(args.runs)
    redact, redact_names, floor = result["redact"], result["redact_names"], result["floor"]
    restore, restore_floor, items = result["restore"], result["restore_floor"], result["items"]
    print(
        f"redact 10 KB ({items} items, {result['detectors']} detectors): "
        f"median {statistics.median(redact):.3f} ms CPU (floor {statistics.median(floor):.3f} ms; "
        f"min {min(redact):.3f}, max {max(redact):.3f}; target <= 1 ms)"
    )
    print(
        f"redact 10 KB with 20 names that share no prefix: median "
        f"{statistics.median(redact_names):.3f} ms CPU (min {min(redact_names):.3f}, "
        f"max {max(redact_names):.3f}; target <= 1 ms)"
    )
    print(
        f"restore a streamed token: median {statistics.median(restore):.3f} µs CPU "
        f"(floor {statistics.median(restore_floor):.3f} µs; target <= 5 µs)"
    )


if __name__ == "__main__":
    main()

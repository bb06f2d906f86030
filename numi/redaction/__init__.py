"""The privacy gateway: personal data replaced by placeholders before a request leaves, and
put back in what streams in.

- `rules`: the endpoint's `redaction` setting, checked (`check_rules`), and the detectors
  it switches on; `default_enabled` says whether an endpoint is outside this machine's
  network.
- `detectors`: where each rule finds what to replace (emails, phones, IBANs, cards, IP
  addresses, keys, the user's words).
- `placeholders`: `Placeholders`, a chat's mapping (`[EMAIL_1]` ⇄ the value), and
  `redact_text`, one text through the rules.
- `restore`: `Restorer`, placeholders put back in a stream, also when one is split across
  chunks; `restore_json` for a tool call's arguments.
- `request`: `redact_request`, every text a `ChatRequest` carries, and `restored_events`,
  the provider's events with their text restored.

Pure: no database, no Flask. The chat keeps its mapping (`numi/chat/redactions.py`).
"""

from .placeholders import Placeholders, redact_text
from .request import Redacted, redact_request, restored_events
from .restore import Restorer, restore_json
from .rules import BUILTIN_RULES, RedactionRules, check_rules, default_enabled

__all__ = [
    "BUILTIN_RULES",
    "Placeholders",
    "Redacted",
    "RedactionRules",
    "Restorer",
    "check_rules",
    "default_enabled",
    "redact_request",
    "redact_text",
    "restore_json",
    "restored_events",
]

"""Saved prompts ("prompt shortcuts"): a user's texts, each reached as `/command` in the composer.

Every function takes the owner's user id and reads or writes only that user's prompts (a
foreign id is a 404, as if it did not exist). Validation happens before anything is written
and fails with a stable code:

- `invalid_command`: 1 to 32 characters of a-z, 0-9, "-" and "_" (lowercase, so that what
  you type after "/" is what you find);
- `invalid_title` (1 to 100 characters), `invalid_text` (1 to MAX_TEXT_CHARS);
- `command_taken` (409): the user already has that command;
- `too_many_prompts`: more than MAX_PROMPTS.

The text may hold placeholders, filled in the browser before sending (static/js/prompts.js):
`{{input}}` (what was typed after the command, or the cursor's place) and `{{clipboard}}`.

Export and import use a small document of their own, `numi.prompts` version 1 (chats keep
`numi.chat`): the Import form and POST /api/import recognise it. Importing never replaces
a prompt: one identical to an existing one (same title and text, under the same command or
one an earlier import gave it) is skipped, so a second import of the same file changes
nothing; one whose command is taken by a different prompt is kept under the next free
command (`summary` -> `summary-2`), and the answer says so.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from .errors import NumiError, invalid
from .extensions import db
from .models import Prompt, get_owned, utcnow

COMMAND = re.compile(r"[a-z0-9_-]{1,32}")
MAX_COMMAND_CHARS = 32
MAX_TITLE_CHARS = 100
MAX_TEXT_CHARS = 10_000
# The chat page carries every prompt's text (the `/` list fills the box without a request),
# so these bound what a page can weigh: 200 × 10,000 characters at the very most.
MAX_PROMPTS = 200
FORMAT_TAG = "numi.prompts"
FORMAT_VERSION = 1
FIELDS = ("command", "title", "text")


def list_prompts(user_id: int) -> list[Prompt]:
    """The user's prompts, sorted by command (the order of the `/` list)."""
    return list(
        db.session.execute(
            select(Prompt).where(Prompt.user_id == user_id).order_by(Prompt.command)
        ).scalars()
    )


def get_prompt(user_id: int, prompt_id: int) -> Prompt:
    """The user's prompt `prompt_id`, or NotFound (also for another user's prompt)."""
    return get_owned(Prompt, prompt_id, user_id, "prompt")


def clean(data: Any, *, partial: bool = False) -> dict[str, str]:
    """The validated fields of `data` (all three, or with `partial` the ones present)."""
    if not isinstance(data, dict):
        raise invalid("Expected an object with command, title and text.")
    out: dict[str, str] = {}
    for key in FIELDS:
        if key not in data and partial:
            continue
        value = data.get(key)
        if not isinstance(value, str):
            raise invalid(f"{key} is required (text).", f"invalid_{key}")
        out[key] = value
    if "command" in out:
        command = out["command"].strip().removeprefix("/")
        if not COMMAND.fullmatch(command):
            raise invalid(
                f"The command must be 1 to {MAX_COMMAND_CHARS} characters: lowercase letters, digits, "
                "“-” and “_”.",
                "invalid_command",
            )
        out["command"] = command
    if "title" in out:
        title = " ".join(out["title"].split())
        if not title or len(title) > MAX_TITLE_CHARS:
            raise invalid(f"The title must be 1 to {MAX_TITLE_CHARS} characters.", "invalid_title")
        out["title"] = title
    if "text" in out:
        text = out["text"].replace("\r\n", "\n")
        if not text.strip() or len(text) > MAX_TEXT_CHARS:
            raise invalid(f"The text must be 1 to {MAX_TEXT_CHARS:,} characters.", "invalid_text")
        out["text"] = text
    return out


def _command_taken(user_id: int, command: str, except_id: int | None = None) -> bool:
    stmt = select(Prompt.id).where(Prompt.user_id == user_id, Prompt.command == command)
    if except_id is not None:
        stmt = stmt.where(Prompt.id != except_id)
    return db.session.execute(stmt).first() is not None


def _taken_error(command: str) -> NumiError:
    return NumiError("command_taken", f"You already have a prompt /{command}.", 409)


def _count(user_id: int) -> int:
    return db.session.execute(
        select(func.count()).select_from(Prompt).where(Prompt.user_id == user_id)
    ).scalar_one()


def create_prompt(user_id: int, data: Any) -> Prompt:
    """Save a new prompt for the user."""
    fields = clean(data)
    if _command_taken(user_id, fields["command"]):
        raise _taken_error(fields["command"])
    if _count(user_id) >= MAX_PROMPTS:
        raise invalid(f"You can keep at most {MAX_PROMPTS} prompts.", "too_many_prompts")
    prompt = Prompt(user_id=user_id, **fields)
    db.session.add(prompt)
    db.session.commit()
    return prompt


def update_prompt(prompt: Prompt, data: Any) -> Prompt:
    """Change some of a prompt's fields (the others stay)."""
    fields = clean(data, partial=True)
    if "command" in fields and _command_taken(
        prompt.user_id, fields["command"], except_id=prompt.id
    ):
        raise _taken_error(fields["command"])
    for key, value in fields.items():
        setattr(prompt, key, value)
    db.session.commit()
    return prompt


def delete_prompt(prompt: Prompt) -> None:
    db.session.delete(prompt)
    db.session.commit()


# --- export and import ---------------------------------------------------------------------


def export_document(user_id: int) -> dict[str, Any]:
    """The user's prompts as a `numi.prompts` document (what `import_prompts` reads)."""
    return {
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
        "exported_at": utcnow().isoformat() + "Z",
        "prompts": [
            {key: value for key, value in p.to_dict().items() if key != "id"}
            for p in list_prompts(user_id)
        ],
    }


def is_prompts_document(document: Any) -> bool:
    return isinstance(document, dict) and document.get("format") == FORMAT_TAG


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.removesuffix("Z"))
    except ValueError:
        return None


def import_prompts(user_id: int, document: Any) -> dict[str, Any]:
    """Add the prompts of a `numi.prompts` document to the user's, all or none.

    Answers {"created": [Prompt], "skipped": [command], "renamed": {command in file: saved as}}."""
    if document.get("version") != FORMAT_VERSION:
        raise invalid(
            f"This prompts file has version {document.get('version')!r}; this Numi reads "
            f"version {FORMAT_VERSION}.",
            "invalid_import",
        )
    items = document.get("prompts")
    if not isinstance(items, list):
        raise invalid("prompts: expected a list.", "invalid_import")
    existing = {p.command: p for p in list_prompts(user_id)}
    if len(existing) + len(items) > MAX_PROMPTS:
        raise invalid(f"You can keep at most {MAX_PROMPTS} prompts.", "too_many_prompts")
    created: list[Prompt] = []
    skipped: list[str] = []
    renamed: dict[str, str] = {}
    for index, raw in enumerate(items):
        try:
            fields = clean(raw)
        except NumiError as exc:
            raise invalid(f"prompts[{index}]: {exc.message}", "invalid_import") from None
        if any(_same(prompt, fields) for prompt in existing.values()):
            skipped.append(fields["command"])
            continue
        command = fields["command"]
        if command in existing:
            command = _free_command(fields["command"], existing)
            renamed[fields["command"]] = command
        prompt = Prompt(user_id=user_id, **{**fields, "command": command})
        # Kept as exported (lossless); a missing or unreadable time becomes now.
        prompt.created_at = _time(raw.get("created_at")) or utcnow()
        prompt.updated_at = _time(raw.get("updated_at")) or prompt.created_at
        existing[command] = prompt
        created.append(prompt)
    db.session.add_all(created)
    db.session.commit()
    return {"created": created, "skipped": skipped, "renamed": renamed}


def _same(prompt: Prompt, fields: dict[str, str]) -> bool:
    """Whether `prompt` is the imported one already: same title and text, under the same
    command or under a name an earlier import gave it (`command-2`...)."""
    return (prompt.title, prompt.text) == (fields["title"], fields["text"]) and re.fullmatch(
        re.escape(fields["command"]) + r"(-[0-9]+)?", prompt.command
    ) is not None


def _free_command(command: str, taken: dict[str, Any]) -> str:
    """`command-2`, `command-3`, ...: the first one not taken (shortened to fit 32 characters)."""
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = command[: MAX_COMMAND_CHARS - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1

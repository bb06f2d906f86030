"""Time to load the model context of a 2,000-message chat (issue 5's closing measurement).

Builds the chat directly in a fresh SQLite database (user turns, answers, tool calls with
their results, some long messages), then times, each over several runs:

- `ChatContextService.history()` with a new service (cold cache), default budgets;
- the same with a compaction checkpoint halfway;
- `GET /api/session/<id>/context_info` and `/context` through the app (test client);
- what the request holds: messages, characters, estimated tokens.

    python bench/context.py [--messages 2000] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numi import create_app  # noqa: E402
from numi.chat.context import ChatContextService, estimate_tokens  # noqa: E402
from numi.database import upgrade  # noqa: E402
from numi.extensions import db  # noqa: E402
from numi.models import Chat, Checkpoint, Message, User  # noqa: E402


def build_chat(count: int) -> tuple[int, str, list[int]]:
    from numi.identity import LOCAL_USERNAME

    user = User(
        username=LOCAL_USERNAME, is_admin=True
    )  # single-user mode's user: the API sees the chat
    db.session.add(user)
    db.session.flush()
    chat = Chat(user_id=user.id, title="long chat")
    db.session.add(chat)
    db.session.flush()
    rows = []
    n = 0
    while len(rows) < count:
        rows.append(
            Message(
                chat_id=chat.id, role="user", content=f"Question {n}: " + "words " * (20 + n % 50)
            )
        )
        if n % 5 == 0:
            call = {
                "id": f"call{n}",
                "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"q": f"topic {n}"})},
            }
            assistant = Message(chat_id=chat.id, role="assistant", content="")
            assistant.tool_calls = [call]
            rows.append(assistant)
            rows.append(
                Message(
                    chat_id=chat.id, role="tool", tool_call_id=f"call{n}", content="result " * 200
                )
            )
        rows.append(
            Message(
                chat_id=chat.id,
                role="assistant",
                content=f"Answer {n}. " + "text " * (60 + n % 300),
            )
        )
        n += 1
    rows = rows[:count]
    db.session.add_all(rows)
    db.session.commit()
    return user.id, chat.id, [r.id for r in rows]


def timed(fn, runs: int) -> tuple[float, float, object]:
    values, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        values.append((time.perf_counter() - started) * 1000)
        db.session.remove()
    return statistics.median(values), max(values), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(
            {
                "NUMI_DATA_DIR": tmp,
                "NUMI_DATABASE_URL": f"sqlite:///{tmp}/numi.db",
                "NUMI_SECRET_KEY": "bench",
                "NUMI_AUTO_ENDPOINTS": False,
                "TESTING": True,
                "NUMI_ACCESS_TOKEN": "bench-access-token",
            }
        )
        import logging

        logging.getLogger("alembic").setLevel(logging.WARNING)
        upgrade(app)
        with app.app_context():
            user_id, chat_id, ids = build_chat(args.messages)
            config = app.config

            def load():
                service = ChatContextService(
                    chat_id,
                    user_id,
                    max_messages=config["PROMPT_MAX_HISTORY_MESSAGES"],
                    max_chars=config["PROMPT_MAX_HISTORY_CHARS"],
                )
                return service.history()

            median, worst, history = timed(load, args.runs)
            print(
                f"chat: {len(ids)} messages; budget {config['PROMPT_MAX_HISTORY_MESSAGES']} messages / "
                f"{config['PROMPT_MAX_HISTORY_CHARS']} characters"
            )
            print(
                f"history() cold, no checkpoint: median {median:.1f} ms, max {worst:.1f} ms -> "
                f"{len(history.messages)} messages sent, {history.omitted} omitted, "
                f"{history.total_chars} chars, ~{estimate_tokens(history.messages)} tokens"
            )
            first = history.messages[2] if history.omitted else history.messages[0]
            print(
                f"  request starts with: notice={history.messages[0].get('_notice', False)}, "
                f"first original role={first['role']}"
            )

            db.session.add(
                Checkpoint(
                    chat_id=chat_id, summary="summary " * 300, through_message_id=ids[len(ids) // 2]
                )
            )
            db.session.commit()
            median, worst, history = timed(load, args.runs)
            print(
                f"history() cold, checkpoint at message {len(ids) // 2}: median {median:.1f} ms, max {worst:.1f} ms -> "
                f"{len(history.messages)} messages sent"
            )
            db.session.execute(db.delete(Checkpoint))
            db.session.commit()

        client = app.test_client()
        for path in ("context_info", "context"):
            values = []
            for _ in range(args.runs):
                started = time.perf_counter()
                response = client.get(
                    f"/api/session/{chat_id}/{path}",
                    headers={"Authorization": "Bearer bench-access-token"},
                )
                values.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, response.get_data(as_text=True)
            print(
                f"GET /api/session/<id>/{path}: median {statistics.median(values):.1f} ms, max {max(values):.1f} ms"
            )


if __name__ == "__main__":
    main()

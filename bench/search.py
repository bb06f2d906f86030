"""Full-text search latency over 100,000 messages.

Builds a database through the real migrations (so the FTS5 triggers fill the index as rows
are inserted, exactly as in production), with the messages spread over many chats of two
users, then times `numi.chat.search.search()` for common words, rare words, prefixes and
multi-word queries, and prints median and p95 latency per kind.

    python bench/search.py [--messages 100000] [--runs 30] [--database URL]

Default database: a temporary SQLite file. Pass a PostgreSQL URL to measure that engine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by "
    "word but not what all were we when your can said there use an each which she do how their if will up "
    "other about out many then them these so some her would make like him into time has look two more write "
    "go see number no way could people my than first water been call who oil its now find long down day did "
    "get come made may part over new sound take only little work know place year live me back give most very "
    "after thing our just name good sentence man think say great where help through much before line right "
    "too mean old any same tell boy follow came want show also around form three small set put end does "
    "another well large must big even such because turn here why ask went men read need land different home "
    "us move try kind hand picture again change off play spell air away animal house point page letter mother "
    "answer found study still learn should america world python database kubernetes recipe garden"
).split()
RARE = ["zanzibar", "quokka", "xylophone", "fjord", "okapi", "narwhal", "sphinx", "tundra"]
QUERIES = {
    "common word": ["the", "time", "water", "people"],
    "rare word": ["quokka", "narwhal", "fjord", "okapi"],
    "prefix": ["data", "kube", "pyth", "gard"],
    "two words": ["python database", "garden recipe", "world water", "animal house"],
}


def build(app, messages: int, seed: int = 7) -> None:
    from sqlalchemy import text

    from numi.extensions import db
    from numi.models import Chat, User

    rng = random.Random(seed)
    with app.app_context():
        users = [User(username=f"bench{i}") for i in range(2)]
        db.session.add_all(users)
        db.session.flush()
        per_chat = 100
        chats = []
        for i in range(messages // per_chat):
            chat = Chat(user_id=users[i % 2].id, title=f"Chat {i} about {rng.choice(WORDS)}")
            chats.append(chat)
        db.session.add_all(chats)
        db.session.commit()
        rows = []
        for i in range(messages):
            length = rng.randint(8, 120)
            words = rng.choices(WORDS, k=length)
            if rng.random() < 0.002:
                words[rng.randrange(length)] = rng.choice(RARE)
            rows.append(
                {
                    "chat_id": chats[i // per_chat].id,
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": " ".join(words).capitalize() + ".",
                }
            )
        insert = text(
            "INSERT INTO messages (chat_id, role, content, created_at) VALUES (:chat_id, :role, "
            ":content, CURRENT_TIMESTAMP)"
        )
        for start in range(0, len(rows), 5000):
            db.session.execute(insert, rows[start : start + 5000])
        db.session.commit()
        if db.engine.dialect.name == "postgresql":
            db.session.execute(text("ANALYZE"))  # what autovacuum would have done by now
            db.session.commit()


def measure(app, runs: int) -> dict[str, dict[str, float]]:
    from sqlalchemy import select

    from numi.chat.search import search
    from numi.extensions import db
    from numi.models import User

    results = {}
    with app.app_context():
        user_id = db.session.execute(select(User.id).order_by(User.id).limit(1)).scalar_one()
        for kind, queries in QUERIES.items():
            timings = []
            for run in range(runs):
                query = queries[run % len(queries)]
                started = time.perf_counter()
                found = search(user_id, query, limit=20)
                timings.append((time.perf_counter() - started) * 1000)
                db.session.remove()
            timings.sort()
            results[kind] = {
                "median_ms": statistics.median(timings),
                "p95_ms": timings[min(len(timings) - 1, int(len(timings) * 0.95))],
                "hits": len(found.messages),
                "engine": found.engine,
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--database", default=None)
    args = parser.parse_args()

    from numi import create_app
    from numi.database import upgrade

    directory = tempfile.mkdtemp(prefix="numi-search-bench-")
    url = args.database or f"sqlite:///{directory}/bench.db"
    app = create_app(
        {
            "NUMI_DATA_DIR": directory,
            "NUMI_DATABASE_URL": url,
            "NUMI_SECRET_KEY": "bench",
            "NUMI_AUTO_ENDPOINTS": False,
            "NUMI_LOG_LEVEL": "WARNING",
        }
    )
    upgrade(app)
    started = time.perf_counter()
    build(app, args.messages)
    print(
        f"built {args.messages:,} messages in {time.perf_counter() - started:.1f}s ({url.split(':')[0]})"
    )
    all_timings = []
    for kind, row in measure(app, args.runs).items():
        all_timings.append(row["p95_ms"])
        print(
            f"{kind:12s} median {row['median_ms']:7.2f} ms   p95 {row['p95_ms']:7.2f} ms   "
            f"({row['hits']} hits shown, engine {row['engine']})"
        )
    print(f"worst p95: {max(all_timings):.2f} ms")


if __name__ == "__main__":
    main()

"""temporary chats are not indexed for search

SQLite: a temporary chat's messages no longer go into fts_messages. FTS5 never rewrites a
segment when an entry is deleted (it adds a delete marker), so a discarded temporary
chat's words stayed readable in the database file until segments happened to merge; a
chat that is never searched need not be indexed at all. The message triggers gain "and
the chat is not temporary"; "Keep this chat" indexes the chat's messages then (a trigger
on chats), and a temporary chat deleted outright first empties its messages, so the
cascade's triggers (which no longer see the chat row) delete nothing that was never
indexed. Entries of temporary chats indexed before are removed here.
PostgreSQL: nothing changes (the GIN expression index covers every message; the old row
versions of a discarded chat stay until VACUUM, see numi/chat/temporary.py).

Revision ID: 1915b47db1af
Revises: b7c3d9e1f2a4
Create Date: 2026-12-06 07:00:10.137827

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "1915b47db1af"
down_revision = "b7c3d9e1f2a4"
branch_labels = None
depends_on = None

# As in a6c1f0e3b7d2: the one condition every trigger uses, so each 'delete' command
# removes exactly what an insert added (external-content tables require that).
LIVE_TEXT = (
    "{row}.deleted_at IS NULL AND {row}.role IN ('user', 'assistant') AND {row}.content IS NOT NULL"
)
IN_TEMPORARY_CHAT = (
    "EXISTS (SELECT 1 FROM chats WHERE chats.id = {row}.chat_id AND chats.temporary)"
)


def _triggers(indexed: str) -> list[str]:
    return [
        f"""CREATE TRIGGER fts_messages_ai AFTER INSERT ON messages WHEN {indexed.format(row="new")} BEGIN
            INSERT INTO fts_messages(rowid, content) VALUES (new.id, new.content);
        END""",
        f"""CREATE TRIGGER fts_messages_ad AFTER DELETE ON messages WHEN {indexed.format(row="old")} BEGIN
            INSERT INTO fts_messages(fts_messages, rowid, content) VALUES ('delete', old.id, old.content);
        END""",
        f"""CREATE TRIGGER fts_messages_au AFTER UPDATE OF content, deleted_at, role ON messages BEGIN
            INSERT INTO fts_messages(fts_messages, rowid, content)
                SELECT 'delete', old.id, old.content WHERE {indexed.format(row="old")};
            INSERT INTO fts_messages(rowid, content) SELECT new.id, new.content WHERE {indexed.format(row="new")};
        END""",
    ]


OLD_INDEXED = LIVE_TEXT
NEW_INDEXED = f"{LIVE_TEXT} AND NOT {IN_TEMPORARY_CHAT}"
DROP_MESSAGE_TRIGGERS = [
    "DROP TRIGGER IF EXISTS fts_messages_ai",
    "DROP TRIGGER IF EXISTS fts_messages_ad",
    "DROP TRIGGER IF EXISTS fts_messages_au",
]
TEMPORARY_MESSAGES = (
    f"FROM messages WHERE {LIVE_TEXT.format(row='messages')} "
    f"AND {IN_TEMPORARY_CHAT.format(row='messages')}"
)
CHAT_TRIGGERS = [
    # Kept: its messages are indexed from now on (the chat is no longer temporary here).
    f"""CREATE TRIGGER fts_messages_kept AFTER UPDATE OF temporary ON chats
        WHEN old.temporary AND NOT new.temporary BEGIN
        INSERT INTO fts_messages(rowid, content)
            SELECT id, content FROM messages WHERE chat_id = new.id AND {LIVE_TEXT.format(row="messages")};
    END""",
    # The app never makes a chat temporary again; were it done, its entries go.
    f"""CREATE TRIGGER fts_messages_made_temporary AFTER UPDATE OF temporary ON chats
        WHEN NOT old.temporary AND new.temporary BEGIN
        INSERT INTO fts_messages(fts_messages, rowid, content)
            SELECT 'delete', id, content FROM messages WHERE chat_id = new.id AND {LIVE_TEXT.format(row="messages")};
    END""",
    # The cascade deletes the messages after the chat row: emptied while the chat still
    # says temporary, they are not taken for indexed ones then.
    """CREATE TRIGGER fts_messages_temporary_deleted BEFORE DELETE ON chats
        WHEN old.temporary BEGIN
        UPDATE messages SET content = NULL WHERE chat_id = old.id;
    END""",
]
DROP_CHAT_TRIGGERS = [
    "DROP TRIGGER IF EXISTS fts_messages_kept",
    "DROP TRIGGER IF EXISTS fts_messages_made_temporary",
    "DROP TRIGGER IF EXISTS fts_messages_temporary_deleted",
]


def _has_index(bind) -> bool:
    return (
        bind.execute(
            sa.text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fts_messages'")
        ).scalar()
        is not None
    )


def upgrade():
    bind = op.get_bind()
    if bind.dialect.name != "sqlite" or not _has_index(bind):
        return
    op.execute(
        f"INSERT INTO fts_messages(fts_messages, rowid, content) SELECT 'delete', id, content {TEMPORARY_MESSAGES}"
    )
    for statement in DROP_MESSAGE_TRIGGERS + _triggers(NEW_INDEXED) + CHAT_TRIGGERS:
        op.execute(statement)


def downgrade():
    bind = op.get_bind()
    if bind.dialect.name != "sqlite" or not _has_index(bind):
        return
    for statement in DROP_CHAT_TRIGGERS + DROP_MESSAGE_TRIGGERS + _triggers(OLD_INDEXED):
        op.execute(statement)
    op.execute(f"INSERT INTO fts_messages(rowid, content) SELECT id, content {TEMPORARY_MESSAGES}")

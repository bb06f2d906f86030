"""ids in URLs never reused

SQLite gives a new row the id of the newest row deleted before it unless the table was
created with AUTOINCREMENT, so `/p/3` could open three different projects in one run.
The tables whose ids are in URLs are rebuilt with AUTOINCREMENT (a batch copy: SQLite
cannot add it to a table in place). PostgreSQL's sequences never hand out an id twice, so
there is nothing to do there.

The copy follows SQLite's own procedure for rebuilding a table: foreign keys off (a DROP
TABLE with them on deletes every row first, and the children's ON DELETE actions would
run: a project's chats would lose their project), every rebuild in one transaction, then
`foreign_key_check` before the commit, and foreign keys on again.

Revision ID: 53cead8a178e
Revises: 1915b47db1af
Create Date: 2026-12-06 07:01:45.655547

"""

from contextlib import contextmanager

from alembic import op


# revision identifiers, used by Alembic.
revision = "53cead8a178e"
down_revision = "1915b47db1af"
branch_labels = None
depends_on = None

TABLES = ("projects", "memories", "attachments", "endpoints", "mcp_servers", "prompts")


@contextmanager
def _rebuilding_sqlite_tables():
    """Foreign keys off and one transaction for the rebuilds (SQLite ignores the pragma
    inside a transaction, so what earlier revisions of this run did is committed first)."""
    connection = op.get_bind().connection.driver_connection
    if connection.in_transaction:
        connection.commit()
    connection.execute("PRAGMA foreign_keys=OFF")
    try:
        connection.execute("BEGIN")
        yield
        broken = connection.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"foreign keys broken by the rebuild: {broken[:5]}")
        connection.commit()
    except BaseException:
        connection.rollback()
        raise
    finally:
        connection.execute("PRAGMA foreign_keys=ON")


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with _rebuilding_sqlite_tables():
        for table in TABLES:
            with op.batch_alter_table(
                table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
            ):
                pass


def upgrade():
    _rebuild(True)


def downgrade():
    _rebuild(False)

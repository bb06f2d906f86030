"""Ids in URLs are never handed out twice (issue 35): a deleted project's, memory's or
saved prompt's id does not come back for a new one, so an old link or a cached page never
opens another object. The migration that rebuilds the SQLite tables with AUTOINCREMENT
keeps every row and every reference to it."""

from __future__ import annotations

import sqlalchemy as sa

import pytest

from migration_support import app_at_revision
from numi.extensions import db


def created_id(client, path: str, body: dict) -> int:
    response = client.post(path, json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


@pytest.mark.parametrize(
    "path, body, delete",
    [
        ("/api/projects", {"name": "Thesis"}, "/api/projects/{id}?chats=delete"),
        ("/api/memories", {"text": "I live in Lyon."}, "/api/memories/{id}"),
    ],
    ids=["project", "memory"],
)
def test_the_newest_deleted_id_is_not_given_again(client, path, body, delete):
    created_id(
        client, path, {**body, **({"name": "Older"} if "name" in body else {"text": "Older."})}
    )
    newest = created_id(client, path, body)
    assert client.delete(delete.format(id=newest)).status_code == 200
    again = created_id(client, path, body)
    assert again > newest
    assert client.get(f"{path}/{newest}").status_code in (404, 405)


BEFORE = "1915b47db1af"  # the revision before the tables were rebuilt


def test_the_rebuild_keeps_every_row_and_reference(empty_database_url, tmp_path):
    from flask_migrate import upgrade as alembic_upgrade

    app, directory = app_at_revision(empty_database_url, tmp_path, BEFORE)
    with app.app_context():
        with db.engine.begin() as conn:
            run = conn.exec_driver_sql
            run(
                "INSERT INTO users (id, username, is_admin, created_at) VALUES (1, 'u', true, CURRENT_TIMESTAMP)"
            )
            for project in (1, 2, 3):
                run(
                    "INSERT INTO projects (user_id, name, created_at, updated_at) "
                    f"VALUES (1, 'P{project}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            run(
                "INSERT INTO chats (id, user_id, title, project_id, created_at, updated_at) "
                "VALUES ('c1', 1, 'T', 3, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
            run(
                "INSERT INTO memories (id, user_id, project_id, text, created_at, updated_at) "
                "VALUES (7, 1, 3, 'm', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
        alembic_upgrade(directory=directory)
        with db.engine.begin() as conn:
            run = conn.exec_driver_sql
            # Nothing lost, no reference cut (a DROP with foreign keys on would have run the
            # children's ON DELETE actions).
            assert run("SELECT project_id FROM chats WHERE id = 'c1'").scalar() == 3
            assert run("SELECT project_id FROM memories WHERE id = 7").scalar() == 3
            assert [r[0] for r in run("SELECT id FROM projects ORDER BY id")] == [1, 2, 3]
            run("DELETE FROM projects WHERE id = 3")  # the newest, with its chats' link
            run(
                "INSERT INTO projects (user_id, name, created_at, updated_at) "
                "VALUES (1, 'new', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
            assert run("SELECT max(id) FROM projects").scalar() == 4
            if conn.dialect.name == "sqlite":
                assert run("PRAGMA foreign_keys").scalar() == 1
        # Every table whose model asks for it was created with AUTOINCREMENT.
        if db.engine.dialect.name == "sqlite":
            with db.engine.connect() as conn:
                for table in db.metadata.sorted_tables:
                    if table.dialect_options["sqlite"]["autoincrement"]:
                        sql = conn.execute(
                            sa.text("SELECT sql FROM sqlite_master WHERE name = :name"),
                            {"name": table.name},
                        ).scalar()
                        assert "AUTOINCREMENT" in sql, table.name

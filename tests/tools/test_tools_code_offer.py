"""Who is offered run_python: administrators (and the single user) by default; in multi-user
mode every user only once an administrator sets NUMI_CODE_ALL_USERS. In-process apps: no
kernel starts here."""

from __future__ import annotations

from fixtures import CODE_EXTRA

from numi.services import services

pytestmark = CODE_EXTRA


def offered(app, *, is_admin: bool) -> list[str]:
    tools = services(app).tools.active(["run_python"], is_admin=is_admin, user_id=None)
    return [tool.name for tool in tools]


def test_only_administrators_until_every_user_is_allowed(make_app):
    app = make_app(NUMI_AUTH="multi")
    assert offered(app, is_admin=True) == ["run_python"]
    assert offered(app, is_admin=False) == []
    app = make_app(NUMI_AUTH="multi", NUMI_CODE_ALL_USERS=True)
    assert offered(app, is_admin=False) == ["run_python"]


def test_each_user_has_folders_of_their_own(make_app):
    from numi.agent.tools.code import state_folder

    app = make_app()
    first = state_folder(app.config, 1, "chat-a")
    second = state_folder(app.config, 2, "chat-a")
    assert first != second and first.startswith(app.config["NUMI_DATA_DIR"])

"""The README documents every setting, the CLI and the two Quick start commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numi.config import SETTINGS, load_config

README = Path(__file__).resolve().parent.parent / "README.md"


def _readme() -> str:
    return README.read_text(encoding="utf-8")


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_setting_is_in_the_readme_table(setting):
    rows = [
        line
        for line in _readme().splitlines()
        if line.startswith("|") and f"`{setting.name}`" in line
    ]
    assert rows, (
        f"{setting.name} (numi/config.py) is not documented in README.md's configuration table"
    )


def test_the_settings_list_is_not_empty():
    names = {s.name for s in SETTINGS}
    assert {
        "NUMI_DATA_DIR",
        "NUMI_DATABASE_URL",
        "NUMI_HOST",
        "NUMI_PORT",
        "NUMI_AUTH",
        "NUMI_SECRET_KEY",
        "PROMPT_MAX_HISTORY_MESSAGES",
        "PROMPT_MAX_HISTORY_CHARS",
    } <= names


def test_quick_start_has_the_two_commands():
    quick = _readme().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^\s*(make \w+)\s*$", quick, re.M)
    # the two commands, and the optional demo for trying Numi without an API key
    assert [c for c in commands if c != "make demo"] == ["make run", "make test"]
    assert "make demo" in commands


def test_documented_cli_commands_exist():
    text = _readme()
    for command in (
        "numi serve",
        "numi db upgrade",
        "numi endpoint add",
        "numi endpoint list",
        "numi endpoint remove",
        "numi endpoint models",
        "numi user create",
        "numi user list",
        "numi token create",
        "numi open",
        "numi token show",
        "numi dev fake-provider",
        "gunicorn -k gevent",
    ):
        assert command in text, command


def test_a_bad_setting_names_the_variable():
    with pytest.raises(ValueError, match="NUMI_AUTH"):
        load_config({"NUMI_AUTH": "everyone"})
    with pytest.raises(ValueError, match="NUMI_PORT"):
        load_config({"NUMI_PORT": "eighty"})
    assert load_config({"NUMI_PORT": "9000", "NUMI_AUTH": "MULTI"})["NUMI_PORT"] == 9000

"""Templates compile once per process, not once per app (numi/web/template_code.py): a second
app renders its pages from the first one's compiled code; an edited template, or an
environment that compiles differently, compiles again."""

from __future__ import annotations

import jinja2
import pytest
from flask import Flask

from numi.web import register
from numi.web.template_code import TEMPLATE_CODE, ProcessTemplateCode


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """The names of the templates Jinja compiles from now on."""
    names: list[str] = []
    compile_source = jinja2.Environment.compile

    def counted(self, source, name=None, filename=None, *args, **kwargs):
        names.append(name)
        return compile_source(self, source, name, filename, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return names


def environment(folder, cache, **options) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder), bytecode_cache=cache, **options
    )


def test_a_second_environment_uses_the_first_ones_code_until_the_source_changes(tmp_path, compiles):
    (tmp_path / "page.html").write_text("<p>{{ name | upper }}</p>")
    cache = ProcessTemplateCode()
    first = environment(tmp_path, cache)
    assert first.get_template("page.html").render(name="ada") == "<p>ADA</p>"
    assert compiles == ["page.html"]

    second = environment(tmp_path, cache)
    second.filters["upper"] = lambda text: f"[{text}]"  # the code looks filters up where it runs
    assert second.get_template("page.html").render(name="ada") == "<p>[ada]</p>"
    assert compiles == ["page.html"]

    (tmp_path / "page.html").write_text("<p>{{ name }}!</p>")
    assert (
        environment(tmp_path, cache).get_template("page.html").render(name="ada") == "<p>ada!</p>"
    )
    assert compiles == ["page.html", "page.html"]


def test_an_environment_that_compiles_differently_compiles_its_own(tmp_path, compiles):
    (tmp_path / "page.html").write_text("<p>\n  {% if on %}yes{% endif %}\n</p>")
    cache = ProcessTemplateCode()
    plain = environment(tmp_path, cache).get_template("page.html").render(on=True)
    trimmed = environment(tmp_path, cache, trim_blocks=True, lstrip_blocks=True)
    assert trimmed.get_template("page.html").render(on=True) != plain
    with_filter = environment(tmp_path, cache)
    with_filter.filters["extra"] = str
    with_filter.get_template("page.html")
    assert compiles == ["page.html"] * 3


def test_a_second_app_renders_its_pages_without_compiling(sqlite_app, compiles):
    assert sqlite_app.jinja_env.bytecode_cache is TEMPLATE_CODE
    TEMPLATE_CODE.clear()  # only costs the next pages a compile
    assert sqlite_app.test_client().get("/settings/appearance").status_code == 200
    used = list(compiles)
    assert "settings/_appearance.html" in used
    compiles.clear()

    other = Flask("numi", template_folder=sqlite_app.template_folder)
    register(other)
    for name in used:
        other.jinja_env.get_template(name)
    assert compiles == []

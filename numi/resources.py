"""Where the templates, static files and migrations are, in a checkout and in a wheel.

The repository keeps them at its top level beside `numi/`; the wheel maps them into the
package (`numi/templates`, `numi/static`, `numi/migrations`: pyproject.toml's package-dir).
Both are found through importlib.resources, so a wheel, an editable install and a checkout
on PYTHONPATH read the same files.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

TEMPLATES = "templates"
STATIC = "static"
MIGRATIONS = "migrations"


def resource_dir(name: str) -> Path:
    """The directory `name` (templates, static, migrations): inside the installed package
    when it is there (a wheel), else beside the package (a checkout, an editable install).

    Flask and Alembic need real directories, so a package imported from a zip file is not
    supported (pip never installs one)."""
    package = Path(str(files("numi")))
    inside = package / name
    if inside.is_dir():
        return inside
    return package.parent / name

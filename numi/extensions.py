"""Flask extensions, created unbound here and bound in create_app()."""

from typing import TYPE_CHECKING

from flask_sock import Sock
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

from .services import services

# Named constraints so Alembic can alter them on every backend (SQLite batch mode needs names).
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


db = SQLAlchemy(model_class=Base)
sock = Sock()
# Flask-Migrate (Alembic) is bound on demand by numi.database.enable_migrations(): start-up
# skips importing Alembic when the schema is already current.

if TYPE_CHECKING:  # for the type only: this module sits below every layer (pyproject.toml)
    from flask import Flask

    from .turns.manager import TurnManager


def turn_manager(app: "Flask | None" = None) -> "TurnManager":
    """The app's TurnManager (the current app's when `app` is None): `services(app).turns`,
    found here, below every layer, so that chat and turns code alike reach it without
    importing each other."""
    return services(app).turns

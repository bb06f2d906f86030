"""The `numi` command: serve, open, db, endpoint, user, token, export, import, dev.

gevent monkey-patches the standard library first, before anything else is imported, so
that sockets, SSL and threads in Flask, SQLAlchemy and the provider SDKs cooperate. Each
command group is a module of this package that adds its commands to `main`.
"""

from gevent import monkey

monkey.patch_all()

from . import accounts, dev, endpoints, export, imports, keys, schema, serve  # noqa: E402, F401  (their commands)
from .base import main  # noqa: E402

__all__ = ["main"]

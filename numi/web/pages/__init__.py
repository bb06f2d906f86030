"""Server-rendered pages, one module per kind of page (datasette's `views/`).

Every module registers its routes on the one `pages` blueprint (`base.bp`), so endpoint
names (`pages.chat_view`, `pages.settings`, ...) are the same whichever module holds them.
Importing this package imports every page module, which registers the routes.
"""

from . import chat, chat_forms, chat_list, health, settings
from .base import bp

__all__ = ["bp", "chat", "chat_forms", "chat_list", "health", "settings"]

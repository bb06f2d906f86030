"""WSGI entry point of an installed Numi: `gunicorn -k gevent numi.wsgi:app` from any
directory (the checkout's app.py is the same app).

Under gunicorn's gevent worker the worker monkey-patches before loading this module.
"""

from . import create_app, settle_heap_for_serving
from .database import enable_migrations

app = create_app()
enable_migrations(app)  # `flask --app numi.wsgi db ...` (migrate, upgrade, heads)
settle_heap_for_serving()  # as `numi serve` does once ready

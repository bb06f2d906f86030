"""WSGI entry point of an installed Numi: `gunicorn -k gevent numi.wsgi:app` from any
directory (the checkout's app.py is the same app).

Under gunicorn's gevent worker the worker monkey-patches before loading this module.
"""

import sys

from . import create_app, settle_heap_for_serving
from .database import enable_migrations
from .errors import NumiError

# gunicorn's "App failed to load": its master stops, rather than starting the worker again.
APP_LOAD_ERROR = 4

try:
    app = create_app()
except NumiError as exc:
    # A setting Numi cannot use: one line, not a traceback (with `-c python:numi.gunicorn_config`
    # gunicorn's master has refused it already, before any worker).
    print(exc.line(), file=sys.stderr, flush=True)
    raise SystemExit(APP_LOAD_ERROR) from None
enable_migrations(app)  # `flask --app numi.wsgi db ...` (migrate, upgrade, heads)
settle_heap_for_serving()  # as `numi serve` does once ready

"""WSGI entry point: `gunicorn -k gevent app:app` or `flask --app app ...`.

Under gunicorn's gevent worker the worker monkey-patches before loading this module.
"""

from numi import create_app, freeze_startup_heap
from numi.database import enable_migrations

app = create_app()
enable_migrations(app)  # `flask --app app db ...` (migrate, upgrade, heads)
freeze_startup_heap()  # as `numi serve` does once ready

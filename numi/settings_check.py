"""`python -m numi.settings_check`: read Numi's settings as the app will (the data directory
made and writable, the database URL usable) and print a refusal as one line, exit status 2.

gunicorn's master runs it before it starts (numi/gunicorn_config.py): in a child process,
since the master must import none of Numi before the gevent worker patches the standard
library, and so that a bad setting is one line rather than a traceback from every worker.
"""

from __future__ import annotations

import sys

from .config import finalize, load_config
from .errors import NumiError


def main() -> int:
    """0 when the settings are usable; 2 after printing the refusal's line on stderr."""
    try:
        finalize(load_config())
    except NumiError as exc:
        print(exc.line(), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

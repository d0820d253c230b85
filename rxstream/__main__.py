"""``python -m rxstream`` and the ``rxstream`` program: the command line (see :mod:`rxstream.cli`).

Without the extra the command line needs, it says so in one line (``rxstream: the rxstream
command needs the 'serve' extra: pip install 'rxstream[serve]'``, exit status 1), not a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rxstream._extras import MissingExtraError


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rxstream`` command (:func:`rxstream.cli.main`); returns the exit status."""
    try:
        from rxstream.cli import main as cli_main
    except MissingExtraError as exc:
        print(f"rxstream: {exc}", file=sys.stderr)
        return 1
    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

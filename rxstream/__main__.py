"""``python -m rxstream`` and the ``rxstream`` program: the command line (see :mod:`rxstream.cli`).

Run as the program, ``chat`` and ``serve`` first start again with transparent huge pages for the
model's weights where that takes a restart (:mod:`rxstream._huge_pages`).

Without the extra the command line needs, it says so in one line (``rxstream: the rxstream
command needs the 'serve' extra: pip install 'rxstream[serve]'``, exit status 1), not a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rxstream._extras import MissingExtraError
from rxstream._huge_pages import start_again_with_huge_pages


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``rxstream`` command (:func:`rxstream.cli.main`); returns the exit status."""
    if argv is None:  # the program itself (never a caller's process): may exec itself again
        start_again_with_huge_pages(sys.argv[1:])
    try:
        from rxstream.cli import main as cli_main
    except MissingExtraError as exc:
        print(f"rxstream: {exc}", file=sys.stderr)
        return 1
    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

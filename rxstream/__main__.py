"""``python -m rxstream``: the command line (see :mod:`rxstream.cli`)."""

from rxstream.cli import main

raise SystemExit(main())

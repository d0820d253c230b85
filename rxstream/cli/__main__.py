"""``python -m rxstream.cli``: the same as the ``rxstream`` command."""

from . import main

if __name__ == "__main__":
    raise SystemExit(main())

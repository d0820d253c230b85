"""``python -m rxstream.server``: the same as ``rxstream serve``."""

from ._args import main

if __name__ == "__main__":
    raise SystemExit(main())

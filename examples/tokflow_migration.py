"""Switching from TokFlow: change one import.

.venv/bin/python examples/tokflow_migration.py
"""

from __future__ import annotations

# from tokflow import TokFlow, SentenceStop          # before
from rxstream.compat.tokflow import SentenceStop, TokFlow  # after

chunks = ["He", "llo", " ", "t", "h", "ere", "!<", "N", "L>m", "y ", "nam", "e ", "is", " tokfl", "ow."]

tf = TokFlow([("<NL>", "\n")])
print([tf.put(c) for c in chunks] + [tf.flush()])

ss = SentenceStop(["\nUser:"])
opts = {"in_type": "full", "out_type": "full", "skip_existing_stop_str": True}
text = ""
for piece in ["User: hi\nAssistant:", " Hello!", "\nUs", "er: next"]:
    text += piece
    result = ss.put(text, opts)
    print(result)
    if result["stop_str_found"]:
        break

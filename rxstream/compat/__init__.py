"""Drop-in facades for other streaming-text libraries, running on rxstream's engines.

- :mod:`rxstream.compat.tokflow` -- ``TokFlow`` and ``SentenceStop`` with TokFlow's API.
"""

"""rxstream backends: sources of token ids (``Observable[int]``) from a language model."""

__all__: list[str] = []

"""Byte-level BPE tokenizers made with ``tokenizers``: a tiny trained one and one from GGUF metadata."""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "byte_level_bpe", "train_tiny_tokenizer"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""The special tokens of the tiny model (ids 0, 1, 2, as in SmolLM2)."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""A ChatML chat template (the tiny model's)."""

_CORPUS = (
    "The quick brown fox jumps over the lazy dog. What is the capital of France? Paris is the capital "
    "of France. Hello, world! Streams of tokens become text as they are generated. 0123456789 "
    "A reactive stream emits items, completes, or fails. Stop strings end the answer early.\n"
    "def main():\n    print('hello')\n"
    "Ünïcödé text: café, naïve, 日本語, emoji 🙂 and more."
)


def _with_pipeline(tok: Tokenizer) -> Tokenizer:
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def train_tiny_tokenizer(vocab_size: int = 384) -> Tokenizer:
    """A small byte-level BPE trained in-process on a fixed corpus (deterministic, milliseconds).

    The pre-tokenizer is SmolLM2's (single digits, then byte-level without a prefix space); the
    special tokens ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` get ids 0, 1 and 2.
    """
    tok = _with_pipeline(Tokenizer(models.BPE()))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    return tok


def byte_level_bpe(
    tokens: Sequence[str],
    merges: Sequence[str],
    *,
    special_ids: Sequence[int],
    user_defined_ids: Sequence[int] = (),
) -> Tokenizer:
    """A byte-level BPE tokenizer from a vocabulary (``tokens[i]`` has id ``i``) and ``"a b"`` merges.

    ``special_ids`` become special added tokens (skipped by ``decode(skip_special_tokens=True)``);
    ``user_defined_ids`` become non-special added tokens.
    """
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs: list[tuple[str, str]] = []
    for m in merges:
        left, sep, right = m.partition(" ")
        if not sep:
            raise ValueError(f"byte_level_bpe: malformed merge {m!r} (expected 'left right')")
        pairs.append((left, right))
    tok = _with_pipeline(
        Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    )
    added = [AddedToken(tokens[i], special=True, normalized=False) for i in sorted(special_ids)]
    tok.add_special_tokens(added)
    if user_defined_ids:
        tok.add_tokens(
            [AddedToken(tokens[i], special=False, normalized=False) for i in sorted(user_defined_ids)]
        )
    return tok

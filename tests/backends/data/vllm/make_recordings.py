"""Writes the recorded vLLM streams of this folder (run once; the JSON files are the test data).

Each file is one completion as vLLM's OpenAI server streams it from ``/v1/completions`` with
``stream: true``, ``return_token_ids: true``, ``logprobs: 5``, ``return_tokens_as_token_ids:
true`` and ``stream_options.include_usage``: the ``choices[0]`` object of every chunk (``text``,
``token_ids``, ``logprobs`` with ``tokens`` spelled ``token_id:N``, ``finish_reason``,
``stop_reason``), several ids per chunk where the engine sent several (its stream interval),
and the usage of the last chunk. The ids are SmolLM2's tokenizer's (the tests' tokenizer); the
completions are greedy, so the sampled token is each position's most likely one.

Usage: ``python tests/backends/data/vllm/make_recordings.py TOKENIZER_JSON``
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from tokenizers import Tokenizer

HERE = Path(__file__).parent
QWEN3 = json.loads((HERE.parents[2] / "channels/data/recorded/qwen3.json").read_text())["recordings"][0]
RECORDINGS = {
    "qwen3_tools": {
        "match": "weather in Zürich and Tokyo",
        "completion": QWEN3["completion"],
        "eos": True,
    },
    "story": {
        "match": "Once upon a time",
        "completion": " there was a cat named Tom. He liked to sleep in the sun, and he dreamt of fish. "
        "One day the sun did not come out. The end.",
        "eos": True,
    },
}
STEPS = [1, 3, 2, 1, 4, 1, 2]  # ids per chunk, in turn


def chunks(tok: Tokenizer, completion: str, eos: bool) -> list[dict[str, object]]:
    ids = tok.encode(completion, add_special_tokens=False).ids + (
        [tok.token_to_id("<|im_end|>")] if eos else []
    )
    out: list[dict[str, object]] = []
    done, text_so_far, step = 0, "", 0
    vocab = tok.get_vocab_size()
    while done < len(ids):
        n = STEPS[step % len(STEPS)]
        step += 1
        part = ids[done : done + n]
        done += len(part)
        full = tok.decode(ids[:done], skip_special_tokens=True)
        if full.endswith("\ufffd"):  # vLLM holds back a partial character
            full = full.rstrip("\ufffd")
        text = full[len(text_so_far) :] if full.startswith(text_so_far) else ""
        offset = len(text_so_far)
        text_so_far += text
        tokens, values, tops = [], [], []
        for j, token in enumerate(part):
            position = done - len(part) + j
            best = -round(0.05 + (position * 37 % 11) / 20, 4)
            alts = {f"token_id:{token}": best}
            for r in range(1, 5):
                alt = (token * 7 + r * 131 + position) % vocab
                if f"token_id:{alt}" not in alts:
                    alts[f"token_id:{alt}"] = round(best - r * 0.75 - math.log(r + 1), 4)
            tokens.append(f"token_id:{token}")
            values.append(best)
            tops.append(alts)
        last = done == len(ids)
        out.append(
            {
                "index": 0,
                "text": text,
                "logprobs": {
                    "text_offset": [offset] * len(part),
                    "token_logprobs": values,
                    "tokens": tokens,
                    "top_logprobs": tops,
                },
                "finish_reason": ("stop" if eos else "length") if last else None,
                "stop_reason": None,
                "token_ids": part,
            }
        )
    return out


def main() -> None:
    tok = Tokenizer.from_file(sys.argv[1])
    for name, rec in RECORDINGS.items():
        data = {
            "engine": "vllm (OpenAI server, /v1/completions, streamed)",
            "request": {"return_token_ids": True, "logprobs": 5, "return_tokens_as_token_ids": True},
            "match": rec["match"],
            "completion": rec["completion"],
            "choices": chunks(tok, str(rec["completion"]), bool(rec["eos"])),
        }
        n = sum(len(c["token_ids"]) for c in data["choices"])  # type: ignore[arg-type,misc]
        data["usage"] = {"completion_tokens": n}
        (HERE / f"{name}.json").write_text(
            json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )


if __name__ == "__main__":
    main()

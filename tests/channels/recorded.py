"""Recorded-style completions of each model family (reasoning, answer, several tool calls).

Written in each family's own format, with the hard cases: nested JSON, unicode, escaped quotes,
empty arguments, text after a tool call, a "</think>" lookalike inside the reasoning.
"""

from __future__ import annotations

QWEN3 = (
    "<think>\nThe user wants the weather in Zürich and Tokyo. I'll call get_weather twice; "
    'units "metric" (not </thinking>). 日本語も.\n</think>\n\n'
    "Let me check both cities.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "units": "metric", '
    '"days": 3, "opts": {"hourly": true, "fields": ["temp", "wind"]}}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京", "note": "say \\"hi\\"\\n"}}\n'
    "</tool_call>\n"
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
)

DEEPSEEK_R1 = (  # the prompt ends with "<think>\n": the output starts inside the reasoning
    "Okay, 2 + 2. That's 4, emoji 🎉 fine.\n</think>\n\nThe answer is **4**."
)
DEEPSEEK_R1_PROMPT = "<｜begin▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜><think>\n"

MISTRAL = (
    "[THINK]Need the stock price; call the tool.[/THINK]Checking now."
    '[TOOL_CALLS][{"name": "get_price", "arguments": {"ticker": "ACME", "precise": false}}, '
    '{"name": "get_news", "arguments": {"query": "ACME \\u00e9t\\u00e9", "limit": 2}}]'
)

QWEN3_CODER = (
    "I'll write the file.\n"
    "<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/main.py\n</parameter>\n"
    '<parameter=content>\ndef main():\n    print("héllo <world>")\n</parameter>\n'
    "<parameter=mode>\n420\n</parameter>\n</function>\n</tool_call>"
)

LLAMA3 = '<|python_tag|>{"name": "search", "parameters": {"q": "rx streams", "top_k": 5}}<|eom_id|>'

HARMONY = (
    "<|channel|>analysis<|message|>User asks for weather in SF; use the tool.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    '{"location": "San Francisco", "unit": "c"}<|call|>'
)
HARMONY_FINAL = (
    "<|channel|>analysis<|message|>Simple greeting.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>"
)

ALL = {
    "qwen3": (QWEN3, ""),
    "deepseek-r1": (DEEPSEEK_R1, DEEPSEEK_R1_PROMPT),
    "mistral": (MISTRAL, ""),
    "qwen3-coder": (QWEN3_CODER, ""),
    "llama3": (LLAMA3, ""),
    "harmony": (HARMONY, ""),
    "harmony-final": (HARMONY_FINAL, ""),
}
"""name -> (completion, prompt); the preset is the name before any "-final"."""


def preset_of(name: str) -> str:
    return name.removesuffix("-final")

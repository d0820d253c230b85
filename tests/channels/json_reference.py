"""Brute-force references for the incremental JSON and schema checks (tests only).

:func:`first_dead` is the length of the first prefix of a text that **no completion** turns into
valid JSON matching a schema. It decides each prefix by trying completions and checking every
candidate as a whole: ``json.loads`` (strict) and :func:`valid`, a plain recursive validator of
the parsed document (every occurrence of a key is checked). The candidates come from a
permissive scan of the prefix (which containers are open, which key or value is under way):
the token under way is finished in every way that can matter (to each allowed key or enum
member that it starts, or simply closed; numbers with ``0``, ``1`` or an exponent; words to
their end), then each open member and item is given a minimal valid value, the missing required
keys are added, and the containers are closed. The scan never rejects anything itself: a wrong
guess only makes a candidate that ``json.loads`` or :func:`valid` refuses. Viability only
shrinks as a text grows, so the first dead prefix is found by bisection.

Sufficient for the schema subset the tests generate (enum members and keys without characters
outside the BMP, no number enums); slow (a few thousand parses per prefix), fine for tests.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

__all__ = ["first_dead", "valid", "viable"]


class Obj(list[tuple[str, Any]]):
    """A parsed JSON object, as its (key, value) pairs in order (duplicates kept)."""


def _load(text: str) -> Any:
    return json.loads(text, object_pairs_hook=Obj)


def _branches(schema: Any) -> list[Any]:
    """The plain schemas ``schema`` stands for (``anyOf``/``oneOf`` merged with the rest)."""
    if not isinstance(schema, dict):
        return [schema]
    for word in ("anyOf", "oneOf"):
        if word in schema:
            rest = {k: v for k, v in schema.items() if k != word}
            out: list[Any] = []
            for b in schema[word]:
                if b is False:
                    continue
                merged = dict(rest)
                if isinstance(b, dict):
                    for k, v in b.items():
                        if k == "type" and "type" in rest:
                            a = [rest["type"]] if isinstance(rest["type"], str) else rest["type"]
                            bb = [v] if isinstance(v, str) else v
                            merged["type"] = [t for t in bb if t in a or (t == "integer" and "number" in a)]
                        else:
                            merged[k] = v
                out.extend(_branches(merged))
            return out
    return [schema]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    if isinstance(a, Obj) and isinstance(b, dict):
        return dict(a) == b
    return type(a) is type(b) and bool(a == b)


def _type_ok(value: Any, t: str) -> bool:
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t == "object":
        return isinstance(value, Obj)
    if t == "array":
        return isinstance(value, list) and not isinstance(value, Obj)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return t == "number" or isinstance(value, int) or value.is_integer()


def valid(value: Any, schema: Any) -> bool:
    """Whether the parsed ``value`` (objects as :class:`Obj`) matches ``schema``."""
    if schema is True or schema == {}:
        return True
    if schema is False:
        return False
    if "anyOf" in schema or "oneOf" in schema:
        return any(valid(value, b) for b in _branches(schema))
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        if not any(_type_ok(value, t) for t in types):
            return False
    if "enum" in schema and not any(_same(value, m) for m in schema["enum"]):
        return False
    if "const" in schema and not _same(value, schema["const"]):
        return False
    if isinstance(value, Obj):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value:
            if k in props:
                if not valid(v, props[k]):
                    return False
            elif extra is False or (extra is not True and not valid(v, extra)):
                return False
        keys = {k for k, _ in value}
        if not all(r in keys for r in schema.get("required", [])):
            return False
    if isinstance(value, list) and not isinstance(value, Obj) and "items" in schema:
        if not all(valid(v, schema["items"]) for v in value):
            return False
    return True


def _minimal(schema: Any) -> list[str]:
    """Short JSON texts valid for ``schema`` (one per branch that has one)."""
    out: list[str] = []
    for s in _branches(schema):
        if s is True or s == {}:
            out.append("0")
            continue
        if s is False:
            continue
        cands: list[str] = []
        if "enum" in s:
            cands += [json.dumps(m) for m in s["enum"]]
        if "const" in s:
            cands.append(json.dumps(s["const"]))
        types = [s["type"]] if isinstance(s.get("type"), str) else s.get("type", ["null", "object"])
        for t in types:
            if t == "object":
                req = s.get("required", [])
                props = s.get("properties", {})
                members = []
                for r in req:
                    sub = _minimal(props.get(r, s.get("additionalProperties", True)))
                    members.append(f"{json.dumps(r)}: {sub[0] if sub else 'null'}")
                cands.append("{" + ", ".join(members) + "}")
            else:
                cands.append({"null": "null", "boolean": "true", "string": '""', "array": "[]"}.get(t, "0"))
        for c in cands:
            if valid(_load(c), s):
                out.append(c)
                break
    return out


def _sub(schemas: list[Any], key: str | None, index: int | None) -> list[Any]:
    """The schemas of a member (``key``) or item of a container with one of ``schemas``."""
    out: list[Any] = []
    for s in schemas:
        for b in _branches(s):
            if not isinstance(b, dict):
                out.append(b)
            elif key is not None:
                props = b.get("properties", {})
                out.append(props[key] if key in props else b.get("additionalProperties", True))
            elif index is not None:
                out.append(b.get("items", True))
    return out


class _Frame:
    def __init__(self, is_obj: bool, schemas: list[Any]) -> None:
        self.is_obj = is_obj
        self.schemas = schemas
        self.keys: list[str] = []
        self.key: str | None = None
        self.phase = "first"  # first | member (after ','), colon, value, after
        self.count = 0


def _scan(p: str, schema: Any) -> tuple[list[_Frame], tuple[str, str, bool] | None, str] | None:
    """A permissive scan: open frames, the token under way (kind, text, is_key), root phase."""
    stack: list[_Frame] = []
    token: tuple[str, str, bool] | None = None
    root = "value"
    i = 0
    n = len(p)

    def value_done() -> None:
        nonlocal root
        if stack:
            stack[-1].phase = "after"
        else:
            root = "done"

    def schemas_here() -> list[Any]:
        if not stack:
            return [schema]
        f = stack[-1]
        return _sub(f.schemas, f.key, None) if f.is_obj else _sub(f.schemas, None, f.count - 1)

    while i < n:
        c = p[i]
        if token is not None:
            kind, text, is_key = token
            if kind == "str":
                if c == '"' and (len(text) - len(text.rstrip("\\"))) % 2 == 0:
                    token = None
                    if is_key:
                        try:
                            key = json.loads('"' + text + '"')
                        except ValueError:
                            return None
                        stack[-1].key = key
                        stack[-1].keys.append(key)
                        stack[-1].phase = "colon"
                    else:
                        value_done()
                else:
                    token = (kind, text + c, is_key)
                i += 1
                continue
            if kind == "num":
                if c in "0123456789+-.eE":
                    token = (kind, text + c, False)
                    i += 1
                    continue
                token = None
                value_done()
            else:  # word
                text += c
                i += 1
                token = (kind, text, False)
                if text in ("true", "false", "null"):
                    token = None
                    value_done()
                continue
        if c in " \t\n\r":
            i += 1
            continue
        top = stack[-1] if stack else None
        if c == '"' and top is not None and top.is_obj and top.phase in ("first", "member"):
            token = ("str", "", True)
        elif c == ":":
            if top is None:
                return None
            top.phase = "value"
        elif c == ",":
            if top is None:
                return None
            top.phase = "member" if top.is_obj else "value"
        elif c in "}]":
            if top is None:
                return None
            stack.pop()
            value_done()
        else:
            if top is not None and not top.is_obj:
                top.count += 1
            here = schemas_here()
            if c in "{[":  # the container is the member's (or the text's) value
                value_done()
            if c == "{":
                stack.append(_Frame(True, here))
            elif c == "[":
                stack.append(_Frame(False, here))
                stack[-1].phase = "first"
            elif c == '"':
                token = ("str", "", False)
            elif c in "-0123456789":
                token = ("num", c, False)
            else:
                token = ("word", c, False)
                if c not in "tfn":
                    return None
        i += 1
    return stack, token, root


_NUMBER_ENDS = ("", "0", "1", "e1", "e2", "e3", "e6", "0e1", "1e1", "e+1")


def _string_ends(text: str, targets: list[str]) -> list[str]:
    """Ways to finish the raw string ``text`` (after its opening quote): closed as it is, or
    continued into each target it starts."""
    # the complete part and an escape still open at the end
    k = 0
    cut = 0
    while k < len(text):
        if text[k] == "\\":
            width = 6 if k + 1 < len(text) and text[k + 1] == "u" else 2
            if k + width > len(text):
                break
            k += width
        else:
            k += 1
        cut = k
    done, partial = text[:cut], text[cut:]
    out = []
    if not partial:
        out.append('"')
    else:
        out += [partial_end + '"' for partial_end in ("n", "u0041", "0041", "041", "41", "1")]
    try:
        decoded = json.loads('"' + done + '"')
    except ValueError:
        return out
    for t in targets:
        if not t.startswith(decoded):
            continue
        rest = t[len(decoded) :]
        if not partial:
            out.append(json.dumps(rest, ensure_ascii=False)[1:-1] + '"')
        elif rest:
            c = rest[0]
            forms = [json.dumps(c)[1:-1], f"\\u{ord(c):04x}", f"\\u{ord(c):04X}"]
            for form in forms:
                if form.startswith(partial):
                    out.append(form[len(partial) :] + json.dumps(rest[1:], ensure_ascii=False)[1:-1] + '"')
    return out


def _targets(schemas: list[Any], what: str) -> list[str]:
    out: list[str] = []
    for s in schemas:
        for b in _branches(s):
            if not isinstance(b, dict):
                continue
            if what == "keys":
                out += list(b.get("properties", {}))
            else:
                out += [m for m in b.get("enum", []) if isinstance(m, str)]
                if isinstance(b.get("const"), str):
                    out.append(b["const"])
    return out


def _close(frame: _Frame, choice: Any) -> list[str]:
    """Ways to finish an open container (after its token under way is finished), for one of
    its schemas."""
    if not frame.is_obj:
        items = [v for sub in _sub([choice], None, 0) for v in _minimal(sub)]
        if frame.phase == "value":
            return [v + "]" for v in items]
        return ["]"]
    b = choice if isinstance(choice, dict) else {}
    props = b.get("properties", {})
    member_value = ["0"]
    if frame.key is not None:
        member_value = [v for sub in _sub([choice], frame.key, None) for v in _minimal(sub)]
    heads: list[str] = []
    if frame.phase == "colon":
        heads = [": " + v for v in member_value]
    elif frame.phase == "value":
        heads = [v for v in member_value]
    else:  # after a member, right after '{', or after ',' (a member follows below)
        heads = [""]
    missing = [r for r in b.get("required", []) if r not in frame.keys]
    outs = []
    for head in heads:
        text = head
        need_comma = frame.phase != "first"
        if frame.phase == "member":  # a member must follow the ','
            need_comma = False
            if not missing:
                extra = b.get("additionalProperties", True)
                key = next(iter(props), None) if extra is False else "zz_free"
                if key is None:
                    continue
                vals = _minimal(props.get(key, extra))
                if not vals:
                    continue
                text += f"{json.dumps(key)}: {vals[0]}"
                need_comma = True
        for r in missing:
            vals = _minimal(props.get(r, b.get("additionalProperties", True)))
            if not vals:
                break
            text += (", " if need_comma else "") + f"{json.dumps(r)}: {vals[0]}"
            need_comma = True
        outs.append(text + "}")
    return outs


def viable(prefix: str, schema: Any = True) -> bool:
    """Whether some completion of ``prefix`` is JSON that ``schema`` accepts."""
    scanned = _scan(prefix, schema)
    if scanned is None:
        return False
    stack, token, root = scanned
    if token is not None and not token[2]:  # the value under way completes its container's member
        if stack:
            stack[-1].phase = "after"
        else:
            root = "done"
    # finish the token under way
    firsts: list[str] = [""]
    if token is not None:
        kind, text, is_key = token
        if kind == "str":
            here = stack[-1].schemas if is_key else None
            if is_key:
                firsts = _string_ends(text, _targets(here or [], "keys"))
            else:
                f = stack[-1] if stack else None
                schemas = (
                    [schema]
                    if f is None
                    else (_sub(f.schemas, f.key, None) if f.is_obj else _sub(f.schemas, None, f.count - 1))
                )
                firsts = _string_ends(text, _targets(schemas, "enum"))
        elif kind == "num":
            firsts = list(_NUMBER_ENDS)
        else:
            firsts = [w[len(text) :] for w in ("true", "false", "null") if w.startswith(text)]
    if token is not None and token[2]:  # a key under way: its member continues after it
        frame = stack[-1]
        keys_firsts = []
        for f in firsts:
            try:
                key = json.loads('"' + token[1] + f)
            except ValueError:
                continue
            keys_firsts.append((f, key))
    # candidates for each frame (innermost first), one schema branch per frame
    options: list[list[str]] = []
    for depth in range(len(stack) - 1, -1, -1):
        frame = stack[depth]
        choices = [c for s in frame.schemas for c in _branches(s)] or [True]
        if token is not None and token[2] and depth == len(stack) - 1:
            per = []
            for f, key in keys_firsts:
                frame.key = key
                frame.keys.append(key)
                frame.phase = "colon"
                per += [f + c for choice in choices for c in _close(frame, choice)]
                frame.keys.pop()
            options.append(per)
        else:
            options.append([c for choice in choices for c in _close(frame, choice)])
    tail = [""]
    if not stack and root == "value" and token is None:
        tail = _minimal(schema)
    if token is not None and token[2]:
        firsts = [""]
    for combo in itertools.product(firsts, *options, tail):
        candidate = prefix + "".join(combo)
        try:
            value = _load(candidate)
        except ValueError:
            continue
        if valid(value, schema):
            return True
    return False


def first_dead(text: str, schema: Any = True) -> int | None:
    """The length of the shortest prefix of ``text`` that no completion makes valid (None:
    every prefix can still be completed)."""
    if viable(text, schema):
        return None
    lo, hi = 0, len(text)  # viable(text[:lo]) holds, viable(text[:hi]) does not
    if not viable("", schema):
        return 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if viable(text[:mid], schema):
            lo = mid
        else:
            hi = mid
    return hi

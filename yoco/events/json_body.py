"""Reading an ingest request body as JSON so that no body can crash the parser (SPEC 3).

* Nesting: a body nested deeper than `MAX_DEPTH` is refused before it is parsed. Python's
  parser recurses once per level and fails at about 1,000; the depth is measured first by a
  linear scan of the bytes with every string taken out.
* Integers: Python refuses to convert one of more than 4,300 digits (a ValueError in the
  middle of parsing). An integer longer than any admitted value is kept as an `OversizedInt`
  instead, which validation rejects for its event alone.
* `NaN`, `Infinity` and `1e999` parse to floats that are not finite; validation rejects the
  event that holds one (PostgreSQL's jsonb cannot store them).
"""

import json
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 32
# 2^53 - 1 has 16 digits: anything with more than 20 characters (sign included) is out of
# range however it is read, so it is never converted.
_LONGEST_INT_TEXT = 20

# A JSON string, or an unterminated one up to the end: the pattern never fails at a quote, so
# the scan never restarts inside a string (linear, whatever the body).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class UnreadableBody(ValueError):
    """The request as a whole cannot be read: the message says why (a 400)."""


class OversizedInt:
    """A JSON integer too long to be converted; only its length is kept."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def nesting_depth(body: bytes) -> int:
    """How many arrays/objects are open at the deepest point (strings' contents ignored).
    Exact for UTF-8, where a byte below 0x80 is always the ASCII character it looks like."""
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", body))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _int_or_oversized(text: str) -> int | OversizedInt:
    return int(text) if len(text) <= _LONGEST_INT_TEXT else OversizedInt(text)


def load(body: bytes) -> Any:
    """The JSON value of `body` (UTF-8), or `UnreadableBody`."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableBody(f"the body is not UTF-8: {exc}") from None
    depth = nesting_depth(body)
    if depth > MAX_DEPTH:
        raise UnreadableBody(f"the body is nested {depth} levels deep; the limit is {MAX_DEPTH}")
    try:
        return json.loads(text, parse_int=_int_or_oversized)
    except json.JSONDecodeError as exc:
        raise UnreadableBody(f"the body is not JSON: {exc}") from None

"""A small, lenient lexer for Spark SQL text: just enough to split scripts and find our clauses.

It knows strings, quoted identifiers, comments (nested, as in Spark), numbers, words and
punctuation, and never fails: an unterminated string or comment runs to the end of the text and
is flagged, so that plain Spark SQL is always passed through for Spark to judge.

>>> [t.text for t in scan("SELECT 'a;b' -- c;\\n, x FROM t")]
['SELECT', "'a;b'", ',', 'x', 'FROM', 't']
>>> [s for s, e in split_statements("SELECT 1; /* ; */ SELECT ';'; ")]
[0, 10]
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: token kinds
WORD, QUOTED, STRING, NUMBER, PUNCT = "word", "quoted", "string", "number", "punct"

_WORD = re.compile(r"[^\W\d]\w*")
_NUMBER = re.compile(r"(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\w*")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Token:
    """A significant token: `text` is `source[start:end]`."""

    kind: str
    text: str
    start: int
    end: int
    unterminated: bool = False

    @property
    def upper(self) -> str:
        """The keyword this token could be (words only), else ''."""
        return self.text.upper() if self.kind == WORD else ""

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.start})"


def scan(text: str, start: int = 0, end: int | None = None) -> list[Token]:
    """The significant tokens of text[start:end] (comments and whitespace dropped)."""
    end = len(text) if end is None else min(end, len(text))
    return [t for t in _lex(text, start, end) if t.kind != "comment"]


def comment_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of every comment in text[start:end]."""
    end = len(text) if end is None else min(end, len(text))
    return [(t.start, t.end) for t in _lex(text, start, end) if t.kind == "comment"]


def unterminated(text: str, start: int = 0, end: int | None = None) -> Token | None:
    """The first string, quoted name or comment of text[start:end] left open, if any.

    >>> unterminated("SELECT 1 /* a */ /* b")
    Token(comment, '/* b', 17)
    """
    end = len(text) if end is None else min(end, len(text))
    return next((t for t in _lex(text, start, end) if t.unterminated), None)


def blank(text: str, spans: list[tuple[int, int]]) -> str:
    """text with each span replaced by spaces, keeping newlines (so positions do not move).

    >>> blank("a /* x\\ny */ b", [(2, 11)])
    'a     \\n     b'
    """
    out = list(text)
    for s, e in spans:
        for i in range(s, e):
            if out[i] != "\n":
                out[i] = " "
    return "".join(out)


def _lex(text: str, pos: int, end: int):
    while pos < end:
        ch = text[pos]
        nxt = text[pos + 1] if pos + 1 < end else ""
        if ch.isspace():
            space = _SPACE.match(text, pos, end)
            assert space is not None  # text[pos] is a space
            pos = space.end()
            continue
        if ch == "-" and nxt == "-":
            stop = text.find("\n", pos, end)
            stop = end if stop < 0 else stop
            yield Token("comment", text[pos:stop], pos, stop)
            pos = stop
            continue
        if ch == "/" and nxt == "*":
            stop, closed = _block_comment_end(text, pos, end)
            yield Token("comment", text[pos:stop], pos, stop, not closed)
            pos = stop
            continue
        if ch in "'\"":
            stop, closed = _quoted_end(text, pos, end, escapes=True)
            yield Token(STRING, text[pos:stop], pos, stop, not closed)
            pos = stop
            continue
        if ch == "`":
            stop, closed = _quoted_end(text, pos, end, escapes=False)
            yield Token(QUOTED, text[pos:stop], pos, stop, not closed)
            pos = stop
            continue
        if ch in "rR" and nxt in ("'", '"'):  # raw string r'...': no escapes
            stop, closed = _quoted_end(text, pos + 1, end, escapes=False)
            yield Token(STRING, text[pos:stop], pos, stop, not closed)
            pos = stop
            continue
        m = _NUMBER.match(text, pos, end) if ch.isdigit() or (ch == "." and nxt.isdigit()) else None
        if m:
            yield Token(NUMBER, m.group(), pos, m.end())
            pos = m.end()
            continue
        m = _WORD.match(text, pos, end)
        if m:
            yield Token(WORD, m.group(), pos, m.end())
            pos = m.end()
            continue
        yield Token(PUNCT, ch, pos, pos + 1)
        pos += 1


def _block_comment_end(text: str, pos: int, end: int) -> tuple[int, bool]:
    depth, i = 0, pos
    while i < end:
        pair = text[i:i + 2]
        if pair == "/*":
            depth, i = depth + 1, i + 2
        elif pair == "*/":
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i, True
        else:
            i += 1
    return end, False


def _quoted_end(text: str, pos: int, end: int, *, escapes: bool) -> tuple[int, bool]:
    quote, i = text[pos], pos + 1
    while i < end:
        ch = text[i]
        if escapes and ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < end and text[i + 1] == quote:  # doubled quote
                i += 2
                continue
            return i + 1, True
        i += 1
    return end, False


# --------------------------------------------------------------------------- statements

# Constructs of Spark SQL scripting whose body holds `;`: BEGIN ... END, CASE ... END [CASE].
_OPENERS = {"BEGIN", "CASE"}
_NOT_CLOSING_AFTER_END = {"IF", "WHILE", "LOOP", "REPEAT", "FOR"}


def split_statements(text: str) -> list[tuple[int, int]]:
    """(start, end) of each statement of a `;`-separated script, whitespace-trimmed.

    Empty statements (only whitespace or comments) are skipped; `;` inside strings, comments,
    and BEGIN ... END blocks of SQL scripting do not split.
    """
    tokens = list(_lex(text, 0, len(text)))
    out: list[tuple[int, int]] = []
    depth, begin, significant = 0, 0, False
    for i, tok in enumerate(tokens):
        if tok.kind == "comment":
            continue
        word = tok.upper
        if word in _OPENERS:
            depth += 1
        elif word == "END" and depth > 0:
            after = next((t for t in tokens[i + 1:] if t.kind != "comment"), None)
            if after is None or after.upper not in _NOT_CLOSING_AFTER_END:
                depth -= 1
        if tok.kind == PUNCT and tok.text == ";" and depth == 0:
            if significant:
                out.append(_trim(text, begin, tok.start))
            begin, significant = tok.end, False
        else:
            significant = True
    if significant:
        out.append(_trim(text, begin, len(text)))
    return out


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end

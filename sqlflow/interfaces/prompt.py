"""The `sqlflow` command's interactive prompt (and stdin that is not a terminal).

A statement may span lines and ends with `;` (outside strings, comments and BEGIN ... END
blocks); `quit;` or `exit;` ends the session, as in spark-sql. History is kept with readline in ~/.sqlflow_history (or $SQLFLOW_HISTORY); Ctrl-C
cancels the running statement or discards the one being typed; Ctrl-D exits. With stdin not a
terminal the same loop reads it without prompts and goes on after errors.
"""
from __future__ import annotations

import os
import sys

PROMPT = "sqlflow> "
CONTINUATION = "       > "


def interactive(cli) -> int:
    """Read statements until end of input, `quit;` or `exit;`; run each as soon as its `;` is
    typed. Statements are numbered, and their lines counted, from the start of the input."""
    tty = sys.stdin.isatty()
    history = _setup_history() if tty else None
    buffer, status = "", 0
    number, line_number = 1, 1  # of the next statement, and of the first line of `buffer`
    if tty and not cli.silent:
        cli.err.write("sqlflow: statements end with ';'. Ctrl-C cancels; quit; or Ctrl-D exits.\n")

    def run(text: str) -> int:
        return cli.run_script(text, name="<stdin>", keep_going=True, first=number, line=line_number)

    while not cli.quitting:
        try:
            line = _read_line((CONTINUATION if buffer else PROMPT) if tty else "", tty)
        except EOFError:
            if tty:
                cli.out.write("\n")
            if not blank(buffer):
                status = run(buffer) or status
            break
        except KeyboardInterrupt:  # Ctrl-C while typing: drop the statement
            cli.out.write("\n")
            line_number += buffer.count("\n")
            buffer = ""
            continue
        buffer += line + "\n"
        if blank(buffer):  # only comments so far: nothing to continue (as spark-sql's prompt)
            line_number += buffer.count("\n")
            buffer = ""
        elif complete(buffer):
            status = run(buffer) or status
            number += statement_count(buffer)
            line_number += buffer.count("\n")
            buffer = ""
    if history:
        history()
    return 0 if tty else status


def blank(text: str) -> bool:
    """Nothing but whitespace and whole comments (an open block comment is not blank).

    >>> blank("-- a note\\n"), blank("/* open\\n"), blank("SELECT 1")
    (True, False, False)
    """
    from ..frontend.scan import scan, unterminated

    return not scan(text) and unterminated(text) is None


def statement_count(text: str) -> int:
    from ..frontend.scan import split_statements

    return len(split_statements(text))


def complete(buffer: str) -> bool:
    """Does the text typed so far end with a `;` that ends a statement (not in a string,
    comment or BEGIN ... END block)?

    >>> complete("SELECT 1;\\n"), complete("SELECT ';\\n"), complete("BEGIN\\n  SELECT 1;\\n")
    (True, False, False)
    """
    from ..frontend.scan import scan, split_statements

    tokens = scan(buffer)
    if not tokens or tokens[-1].text != ";" or any(t.unterminated for t in tokens):
        return False
    spans = split_statements(buffer)
    return not spans or spans[-1][1] <= tokens[-1].start  # that ';' ended the last statement


def _read_line(prompt: str, tty: bool) -> str:
    if tty:
        return input(prompt)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _setup_history():
    """Enable readline history; return a function that saves it (or None without readline)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - e.g. Windows
        return None
    path = os.environ.get("SQLFLOW_HISTORY") or os.path.join(os.path.expanduser("~"), ".sqlflow_history")
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(1000)

    def save():
        try:
            readline.write_history_file(path)
        except OSError:
            pass

    return save

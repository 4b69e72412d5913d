"""One test per kind of error the frontend reports, with the exact text users see.

Every error is a SqlflowError naming the clause, the line and column (1-based, in the whole
query or script), showing the line with a caret, and often a hint.
"""
from __future__ import annotations

import textwrap

import pytest

from sqlflow import ast
from sqlflow.errors import SqlflowError, SqlflowSemanticError, SqlflowSyntaxError
from sqlflow.frontend import parse, parse_script, to_sql, validate

G = "SELECT k, count(*) FROM t GROUP BY k "


def error(sql: str, *, streaming: bool | None = None) -> SqlflowError:
    with pytest.raises(SqlflowError) as info:
        statement = parse(sql)
        if streaming is not None:
            validate(statement, streaming=streaming)
    return info.value


def message(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def expect(sql: str, kind: type[SqlflowError], text: str, **kw) -> SqlflowError:
    e = error(sql, **kw)
    assert type(e) is kind
    assert str(e) == message(text)
    return e


# --------------------------------------------------------------------------- syntax: our clauses


def test_misspelt_clause_keyword_suggests_the_keyword():
    e = expect(G + "WINDOW FIXED(SIZE 5m) ON ts TRIGER REPEAT(COUNT 1)", SqlflowSyntaxError, """
        sqlflow: WINDOW: expected TRIGGER, ALLOWED LATENESS, EMIT, OUTPUT TIMESTAMP or the end of the clauses, got 'TRIGER' (line 1, column 66)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts TRIGER REPEAT(COUNT 1)
                                                                           ^
        did you mean TRIGGER?
    """)
    assert (e.clause, e.line, e.column, e.hint) == ("WINDOW", 1, 66, "did you mean TRIGGER?")


def test_misspelt_accumulation_mode():
    expect(G + "WINDOW FIXED(SIZE 5m) ON ts EMIT ACUMULATING", SqlflowSyntaxError, """
        sqlflow: EMIT: expected DISCARDING or ACCUMULATING, got 'ACUMULATING' (line 1, column 71)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts EMIT ACUMULATING
                                                                                ^
        did you mean ACCUMULATING?
    """)


def test_misspelt_window_function_is_blamed_not_its_arguments():
    expect(G + "WINDOW SESSION(GAP 30m) ON ts", SqlflowSyntaxError, """
        sqlflow: WINDOW: unknown window function SESSION (line 1, column 45)
          SELECT k, count(*) FROM t GROUP BY k WINDOW SESSION(GAP 30m) ON ts
                                                      ^
        did you mean SESSIONS(GAP 30m)?
    """)


def test_misspelt_trigger():
    expect(G + "WINDOW GLOBAL TRIGGER REPEAT(COUNTS 5)", SqlflowSyntaxError, """
        sqlflow: TRIGGER: expected a trigger (WATERMARK, PERIOD, DELAY, COUNT, WHEN, REPEAT, REPEAT_UNTIL, SEQUENCE, FIRST_OF, ALL_OF), got 'COUNTS' (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER REPEAT(COUNTS 5)
                                                                            ^
        did you mean COUNT?
    """)


def test_not_a_duration():
    expect(G + "WINDOW FIXED(SIZE 5min) ON ts", SqlflowSyntaxError, """
        sqlflow: WINDOW: expected a duration (like 30m or INTERVAL 5 MINUTES), got '5min' (line 1, column 56)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5min) ON ts
                                                                 ^
        write 5m or INTERVAL 5 MINUTES
    """)


def test_capital_m_is_refused_not_read_as_minutes():
    """Java's and ISO 8601's `M` is a month; sqlflow's `m` is a minute. `1M` is neither: refused."""
    expect(G + "WINDOW FIXED(SIZE 1M) ON ts", SqlflowSyntaxError, """
        sqlflow: WINDOW: 1M is ambiguous: M is a month in Java and ISO 8601 durations, m a minute (line 1, column 56)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1M) ON ts
                                                                 ^
        write 1m for minutes; a month is not a fixed length of time (write days: 30d)
    """)


@pytest.mark.parametrize("sql, clause, at, hint", [
    # `at` is where the error points: one number and one unit, in one of sqlflow's units
    (G + "WINDOW FIXED(SIZE 1h30m) ON ts", "WINDOW", "1h30m",
     "write 90m: a duration is one number and one unit (us, ms, s, m, h or d)"),
    (G + "WINDOW FIXED(SIZE 1w) ON ts", "WINDOW", "1w", "write 7d or INTERVAL 1 WEEK"),
    (G + "WINDOW FIXED(SIZE 2 weeks) ON ts", "WINDOW", "2 weeks", "write 14d or INTERVAL 2 WEEKS"),
    (G + "WINDOW FIXED(SIZE 1 hour) ON ts", "WINDOW", "1 hour", "write 1h or INTERVAL 1 HOUR"),
    (G + "WINDOW FIXED(SIZE 1.5 hours) ON ts", "WINDOW", "1.5 hours", "write 90m or INTERVAL 1.5 HOURS"),
    (G + "WINDOW FIXED(SIZE 10sec) ON ts", "WINDOW", "10sec", "write 10s or INTERVAL 10 SECONDS"),
    (G + "WINDOW FIXED(SIZE 2hr) ON ts", "WINDOW", "2hr", "write 2h or INTERVAL 2 HOURS"),
    (G + "WINDOW FIXED(SIZE 90 m) ON ts", "WINDOW", "90 m", "write 90m, without a space"),
    (G + "WINDOW FIXED(SIZE 1 M) ON ts", "WINDOW", "1 M",
     "write 1m for minutes; a month is not a fixed length of time (write days: 30d)"),
    (G + "WINDOW FIXED(SIZE 1mo) ON ts", "WINDOW", "1mo",
     "a month is not a fixed length of time: write days (30d) or hours"),
    (G + "WINDOW FIXED(SIZE 1 year) ON ts", "WINDOW", "1 year",
     "a year is not a fixed length of time: write days (365d) or hours"),
    (G + "WINDOW GLOBAL ON ts TRIGGER REPEAT(PERIOD 1 minute)", "TRIGGER", "1 minute",
     "write 1m or INTERVAL 1 MINUTE"),
    (G + "WINDOW GLOBAL ON ts TRIGGER PERIOD 1m OFFSET 10", "TRIGGER", "10",
     "a duration needs a unit: 10s, 10m, 10h ... (us, ms, s, m, h or d), or INTERVAL 10 SECONDS"),
    (G + "WINDOW FIXED(SIZE 1m) ON ts ALLOWED LATENESS 1 day", "ALLOWED LATENESS", "1 day",
     "write 1d or INTERVAL 1 DAY"),
    ("SELECT k, count(*) FROM t WATERMARK ts DELAY OF 5 minutes GROUP BY k WINDOW FIXED(SIZE 1m)",
     "WATERMARK", "5 minutes", "write 5m or INTERVAL 5 MINUTES"),
])
def test_a_duration_written_otherwise_says_what_to_write(sql, clause, at, hint):
    e = error(sql)
    assert type(e) is SqlflowSyntaxError
    assert (e.clause, e.column, e.hint) == (clause, sql.index(at) + 1, hint)
    assert e.message.startswith("expected ") and e.message.endswith(f", got '{at.split()[0]}'")


def test_a_compound_duration_with_a_space_says_what_to_write():
    e = error(G + "WINDOW FIXED(SIZE 1h 30m) ON ts")
    assert (e.message, e.column, e.hint) == (
        "expected ')' or ',', got '30m'", 59, "write 90m: a duration is one number and one unit (us, ms, s, m, h or d)")


@pytest.mark.parametrize("gap, hint", [
    ("1 hour", "write 1h or INTERVAL 1 HOUR"),
    ("1h30m", "write 90m: a duration is one number and one unit (us, ms, s, m, h or d)"),
    ("1w", "write 7d or INTERVAL 1 WEEK"),
])
def test_a_session_gap_written_otherwise_is_not_read_as_spark_sql(gap, hint):
    """GAP also takes a per-row expression: `1 hour` must not reach Spark as one."""
    expect(G + f"WINDOW SESSIONS(GAP {gap}) ON ts", SqlflowSyntaxError, f"""
        sqlflow: WINDOW: GAP needs a duration, got {gap} (line 1, column 58)
          SELECT k, count(*) FROM t GROUP BY k WINDOW SESSIONS(GAP {gap}) ON ts
                                                                   ^
        {hint}
    """)


def test_missing_closing_parenthesis():
    expect(G + "WINDOW FIXED(SIZE 5m ON ts ORDER BY k", SqlflowSyntaxError, """
        sqlflow: WINDOW: expected ')' or ',', got 'ON' (line 1, column 59)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m ON ts ORDER BY k
                                                                    ^
    """)


def test_clause_cut_short_by_order_by():
    expect(G + "WINDOW FIXED(SIZE 5m) ON ts TRIGGER ORDER BY k", SqlflowSyntaxError, """
        sqlflow: TRIGGER: expected a trigger (WATERMARK, PERIOD, DELAY, COUNT, WHEN, REPEAT, REPEAT_UNTIL, SEQUENCE, FIRST_OF, ALL_OF), got 'ORDER' (line 1, column 74)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts TRIGGER ORDER BY k
                                                                                   ^
    """)


def test_clauses_at_the_end_of_the_statement():
    expect(G + "WINDOW GLOBAL EMIT ACCUMULATING AND", SqlflowSyntaxError, """
        sqlflow: EMIT: expected RETRACTING, got the end of the statement (line 1, column 73)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL EMIT ACCUMULATING AND
                                                                                  ^
    """)


def test_unexpected_character():
    expect(G + "WINDOW GLOBAL TRIGGER COUNT 1 @", SqlflowSyntaxError, """
        sqlflow: TRIGGER: expected ALLOWED LATENESS, EMIT, OUTPUT TIMESTAMP or the end of the clauses, got '@' (line 1, column 68)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER COUNT 1 @
                                                                             ^
    """)


def test_trigger_without_a_window_clause():
    expect(G + "TRIGGER REPEAT(COUNT 1)", SqlflowSyntaxError, """
        sqlflow: TRIGGER: TRIGGER needs a WINDOW clause before it (line 1, column 38)
          SELECT k, count(*) FROM t GROUP BY k TRIGGER REPEAT(COUNT 1)
                                               ^
        write WINDOW GLOBAL for one window over all of event time
    """)


def test_clauses_out_of_order():
    expect(G + "WINDOW GLOBAL EMIT DISCARDING TRIGGER COUNT 1", SqlflowSyntaxError, """
        sqlflow: TRIGGER: TRIGGER must come before EMIT (line 1, column 68)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL EMIT DISCARDING TRIGGER COUNT 1
                                                                             ^
    """)


def test_having_after_our_clauses():
    expect(G + "WINDOW GLOBAL HAVING count(*) > 1", SqlflowSyntaxError, """
        sqlflow: WINDOW: expected ON, TRIGGER, ALLOWED LATENESS, EMIT, OUTPUT TIMESTAMP or the end of the clauses, got 'HAVING' (line 1, column 52)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL HAVING count(*) > 1
                                                             ^
        HAVING goes before the WINDOW clause
    """)


def test_count_needs_a_whole_number():
    expect(G + "WINDOW GLOBAL TRIGGER COUNT 2.5", SqlflowSyntaxError, """
        sqlflow: TRIGGER: COUNT needs a whole number, got 2.5 (line 1, column 66)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER COUNT 2.5
                                                                           ^
    """)


def test_unreadable_when_predicate():
    expect(G + "WINDOW GLOBAL TRIGGER WHEN(x > )", SqlflowSyntaxError, """
        sqlflow: TRIGGER: cannot read the WHEN predicate: incomplete expression at '>' (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER WHEN(x > )
                                                                            ^
    """)


def test_when_predicate_with_two_expressions():
    expect(G + "WINDOW GLOBAL TRIGGER WHEN(x y)", SqlflowSyntaxError, """
        sqlflow: TRIGGER: cannot read the WHEN predicate: unexpected 'y' after the expression (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER WHEN(x y)
                                                                            ^
    """)


def test_malformed_interval_range():
    expect(G + "WINDOW FIXED(SIZE INTERVAL '1-30' HOUR TO MINUTE) ON ts", SqlflowSyntaxError, """
        sqlflow: WINDOW: cannot read '1-30' as HOUR TO MINUTE (expected 'h:m') (line 1, column 56)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE INTERVAL '1-30' HOUR TO MINUTE) ON ts
                                                                 ^
    """)


# --------------------------------------------------------------------------- syntax: the source clause


def test_watermark_on_an_expression_is_not_sqlflow():
    expect("SELECT k, count(*) FROM t WATERMARK ts AS et DELAY OF INTERVAL 1 MINUTE GROUP BY k WINDOW GLOBAL",
           SqlflowSyntaxError, """
        sqlflow: WATERMARK: expected DELAY OF, PERFECT, TIMELINE or ASCENDING PER, got 'AS' (line 1, column 40)
          SELECT k, count(*) FROM t WATERMARK ts AS et DELAY OF INTERVAL 1 MINUTE GROUP BY k WINDOW GLOBAL
                                                 ^
        sqlflow needs a column name after WATERMARK; compute the column in a subquery
    """)


def test_misspelt_watermark_model():
    expect("SELECT k, count(*) FROM t WATERMARK ts PERFCT ARRIVAL a GROUP BY k WINDOW GLOBAL",
           SqlflowSyntaxError, """
        sqlflow: WATERMARK: expected DELAY OF, PERFECT, TIMELINE or ASCENDING PER, got 'PERFCT' (line 1, column 40)
          SELECT k, count(*) FROM t WATERMARK ts PERFCT ARRIVAL a GROUP BY k WINDOW GLOBAL
                                                 ^
        did you mean PERFECT?
    """)


# --------------------------------------------------------------------------- syntax: the Spark SQL around


def test_clause_in_a_statement_that_is_not_a_select():
    expect("DELETE FROM t WHERE x > 1 WINDOW GLOBAL", SqlflowSyntaxError, """
        sqlflow: WINDOW: WINDOW can only end a SELECT (after FROM, WHERE, GROUP BY and HAVING) (line 1, column 27)
          DELETE FROM t WHERE x > 1 WINDOW GLOBAL
                                    ^
    """)


def test_spark_sql_error_around_our_clauses():
    expect("SELECT k, count(*)\nFROM t GROUP BY k HAVING count(*) > 1)\nWINDOW GLOBAL", SqlflowSyntaxError, """
        sqlflow: SQL: unexpected ')' (line 2, column 38)
          FROM t GROUP BY k HAVING count(*) > 1)
                                               ^
    """)


def test_unterminated_string():
    expect(G + "WINDOW GLOBAL TRIGGER WHEN(x = 'abc)", SqlflowSyntaxError, """
        sqlflow: SQL: unterminated string (line 1, column 69)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER WHEN(x = 'abc)
                                                                              ^
    """)


def test_unterminated_comment():
    # used to leak the marker standing for our clauses: "Error tokenizing '... __sqlflow_windowing_0 /* oop'"
    expect(G + "WINDOW FIXED(SIZE 1m) ON ts /* oops", SqlflowSyntaxError, """
        sqlflow: SQL: unterminated comment (line 1, column 66)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts /* oops
                                                                           ^
        close it with */ (comments nest, as in Spark: each /* needs its */)
    """)
    expect("SELECT k, count(*) FROM t WATERMARK ts DELAY OF 1m\n/* GROUP BY k WINDOW GLOBAL", SqlflowSyntaxError, """
        sqlflow: SQL: unterminated comment (line 2, column 1)
          /* GROUP BY k WINDOW GLOBAL
          ^
        close it with */ (comments nest, as in Spark: each /* needs its */)
    """)


def test_unterminated_nested_comment():
    e = error(G + "WINDOW GLOBAL ON ts /* a /* b */ EMIT DISCARDING")
    assert (type(e), e.message, e.line, e.column) == (SqlflowSyntaxError, "unterminated comment", 1, 58)


def test_unterminated_comment_after_the_last_statement():
    # it would vanish with the empty statement it is in; Spark, given the text, would refuse it
    for parse_ in (parse, parse_script):
        with pytest.raises(SqlflowSyntaxError) as info:
            parse_(G + "WINDOW GLOBAL ON ts;\n  /* oops")
        assert str(info.value) == message("""
            sqlflow: SQL: unterminated comment (line 2, column 3)
                /* oops
                ^
            close it with */ (comments nest, as in Spark: each /* needs its */)
        """)
    assert parse("SELECT 1 /* Spark judges the text of a plain statement").is_plain


def test_parse_takes_one_statement():
    expect("SELECT 1; SELECT 2", SqlflowSyntaxError, """
        sqlflow: expected one statement, found 2 (line 1, column 11)
          SELECT 1; SELECT 2
                    ^
        use parse_script for several statements
    """)


def test_parse_needs_a_statement():
    expect("  -- nothing", SqlflowSyntaxError, """
        sqlflow: there is no statement to parse (line 1, column 1)
            -- nothing
          ^
    """)


def test_positions_in_a_script_are_in_the_whole_script():
    with pytest.raises(SqlflowSyntaxError) as info:
        parse_script("SELECT 1;\nSELECT 2;\n" + G + "WINDOW FIXD(SIZE 5m) ON ts")
    assert str(info.value) == message("""
        sqlflow: WINDOW: unknown window function FIXD (line 3, column 45)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXD(SIZE 5m) ON ts
                                                      ^
        did you mean FIXED?
    """)


# --------------------------------------------------------------------------- semantics: durations


def test_months_are_not_a_length_of_time():
    expect(G + "WINDOW FIXED(SIZE INTERVAL 1 MONTH) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: INTERVAL in months is not a fixed length of time (use days, hours, minutes ...) (line 1, column 56)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE INTERVAL 1 MONTH) ON ts
                                                                 ^
    """)


def test_zero_duration():
    expect(G + "WINDOW FIXED(SIZE 0s) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: SIZE must be positive, got 0s (line 1, column 56)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 0s) ON ts
                                                                 ^
    """)


def test_negative_duration():
    expect(G + "WINDOW SESSIONS(GAP -5m) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: GAP must be positive, got -5m (line 1, column 58)
          SELECT k, count(*) FROM t GROUP BY k WINDOW SESSIONS(GAP -5m) ON ts
                                                                   ^
    """)


def test_zero_trigger_period():
    expect(G + "WINDOW GLOBAL TRIGGER REPEAT(PERIOD INTERVAL 0 SECONDS)", SqlflowSemanticError, """
        sqlflow: TRIGGER: PERIOD must be positive, got 0s (line 1, column 74)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER REPEAT(PERIOD INTERVAL 0 SECONDS)
                                                                                   ^
    """)


def test_negative_lateness():
    expect(G + "WINDOW GLOBAL ALLOWED LATENESS -1h", SqlflowSemanticError, """
        sqlflow: ALLOWED LATENESS: the lateness cannot be negative, got -1h (line 1, column 69)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ALLOWED LATENESS -1h
                                                                              ^
    """)


def test_negative_offset():
    expect(G + "WINDOW FIXED(SIZE 1h, OFFSET -5m) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: OFFSET cannot be negative, got -5m (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1h, OFFSET -5m) ON ts
                                                                            ^
    """)


def test_offset_not_less_than_size():
    expect(G + "WINDOW FIXED(SIZE 1h, OFFSET 1h) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: OFFSET 1h must be less than SIZE 1h (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1h, OFFSET 1h) ON ts
                                                                            ^
    """)


def test_sliding_period_longer_than_size():
    expect(G + "WINDOW SLIDING(SIZE 5m, PERIOD 10m) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: PERIOD 10m is longer than SIZE 5m, so some elements would be in no window (line 1, column 69)
          SELECT k, count(*) FROM t GROUP BY k WINDOW SLIDING(SIZE 5m, PERIOD 10m) ON ts
                                                                              ^
        use FIXED for windows that do not overlap
    """)


def test_cumulate_size_not_a_multiple_of_step():
    expect(G + "WINDOW CUMULATE(STEP 7m, SIZE 1h) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: SIZE 1h is not a multiple of STEP 7m (line 1, column 68)
          SELECT k, count(*) FROM t GROUP BY k WINDOW CUMULATE(STEP 7m, SIZE 1h) ON ts
                                                                             ^
    """)


def test_negative_watermark_delay():
    expect("SELECT k, count(*) FROM t WATERMARK ts DELAY OF -1m GROUP BY k WINDOW FIXED(SIZE 5m)",
           SqlflowSemanticError, """
        sqlflow: WATERMARK: the delay cannot be negative, got -1m (line 1, column 49)
          SELECT k, count(*) FROM t WATERMARK ts DELAY OF -1m GROUP BY k WINDOW FIXED(SIZE 5m)
                                                          ^
    """)


def test_duration_too_long():
    # 9999999999999 days overflowed int64 microseconds in the engine (OverflowError)
    expect(G + "WINDOW FIXED(SIZE INTERVAL 9999999999999 DAYS) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: SIZE 9999999999999d is too long: a duration is at most 100000d (about 273 years) (line 1, column 56)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE INTERVAL 9999999999999 DAYS) ON ts
                                                                 ^
    """)


@pytest.mark.parametrize("sql, clause, what", [
    (G + "WINDOW SESSIONS(GAP 300000000d) ON ts", "WINDOW", "GAP 300000000d"),
    (G + "WINDOW SLIDING(SIZE 100001d, PERIOD 1d) ON ts", "WINDOW", "SIZE 100001d"),
    (G + "WINDOW CUMULATE(STEP 1d, SIZE 2400024h) ON ts", "WINDOW", "SIZE 100001d"),
    (G + "WINDOW FIXED(SIZE 1d) ON ts TRIGGER REPEAT(PERIOD 100001d)", "TRIGGER", "PERIOD 100001d"),
    (G + "WINDOW FIXED(SIZE 1d) ON ts TRIGGER WATERMARK EARLY DELAY INTERVAL 100001 DAYS", "TRIGGER", "DELAY 100001d"),
    (G + "WINDOW FIXED(SIZE 1d) ON ts ALLOWED LATENESS INTERVAL '100000 days 1 hour'", "ALLOWED LATENESS", "the lateness 2400001h"),
    ("SELECT * FROM t WATERMARK ts DELAY OF 100001d", "WATERMARK", "the delay 100001d"),
    (G + "WINDOW my_fn(1, 100001d) ON ts", "WINDOW", "argument 2 of my_fn, 100001d,"),
])
def test_every_duration_has_a_maximum(sql, clause, what):
    e = error(sql)
    assert type(e) is SqlflowSemanticError and e.line == 1 and e.column is not None
    assert (e.clause, e.message) == (clause, f"{what} is too long: a duration is at most 100000d (about 273 years)")


def test_the_longest_durations_are_accepted():
    statement = parse(G + "WINDOW FIXED(SIZE 100000d, OFFSET 99999d) ON ts TRIGGER REPEAT(DELAY INTERVAL 100000 DAYS) "
                          "ALLOWED LATENESS 2400000h")
    (_, windowing), = statement.windowed_selects()
    assert windowing.allowed_lateness.lateness.micros == 100_000 * 86_400 * 10**6


def test_absurd_literals_are_refused_before_any_arithmetic():
    # Python refuses int() of over 4300 digits, and Decimal would build 10**999999999 exactly
    e = error(G + "WINDOW FIXED(SIZE INTERVAL 1e999999999 DAYS) ON ts")
    assert (type(e), e.clause, e.column, e.message) == (
        SqlflowSemanticError, "WINDOW", 56, "INTERVAL 1e999999999 is too long: a duration is at most 100000d (about 273 years)")
    e = error(G + "WINDOW FIXED(SIZE " + "9" * 5000 + "d) ON ts")
    assert e.message == "the duration 9999999999999999… (5001 digits) is too long: a duration is at most 100000d (about 273 years)"
    e = error(G + "WINDOW GLOBAL ON ts TRIGGER COUNT " + "9" * 5000)
    assert (e.clause, e.column, e.message) == ("TRIGGER", 72, "COUNT must be at most 9223372036854775807, got 9999999999999999… (5000 digits)")
    e = error(G + "WINDOW GLOBAL ON ts TRIGGER WATERMARK PERCENTILE " + "9" * 5000)
    assert e.message == "WATERMARK PERCENTILE must be in (0, 100], got inf"
    e = error(G + "WINDOW my_fn(" + "9" * 5000 + ") ON ts")
    assert e.message.endswith("is too large: a whole number is at most 9223372036854775807 in magnitude")


# --------------------------------------------------------------------------- semantics: triggers


def test_count_larger_than_int64():
    expect(G + "WINDOW GLOBAL ON ts TRIGGER COUNT 9223372036854775808", SqlflowSemanticError, """
        sqlflow: TRIGGER: COUNT must be at most 9223372036854775807, got 9223372036854775808 (line 1, column 66)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER COUNT 9223372036854775808
                                                                           ^
    """)
    parse(G + "WINDOW GLOBAL ON ts TRIGGER COUNT 9223372036854775807")


def test_custom_window_arguments_out_of_range():
    expect(G + "WINDOW my_fn(1, -9223372036854775809) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: argument 2 of my_fn is too large: a whole number is at most 9223372036854775807 in magnitude, got -9223372036854775809 (line 1, column 45)
          SELECT k, count(*) FROM t GROUP BY k WINDOW my_fn(1, -9223372036854775809) ON ts
                                                      ^
    """)
    e = error(G + "WINDOW my_fn(1e400) ON ts")  # inf would print back as `inf`, which is not a literal
    assert e.message == "argument 1 of my_fn is too large: a number is at most 1.7976931348623157e+308"
    parse(G + "WINDOW my_fn(-9223372036854775808, 1e308) ON ts")


def test_count_below_one():
    expect(G + "WINDOW GLOBAL TRIGGER REPEAT(COUNT 0)", SqlflowSemanticError, """
        sqlflow: TRIGGER: COUNT must be at least 1, got 0 (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER REPEAT(COUNT 0)
                                                                            ^
    """)


@pytest.mark.parametrize("value", ["0", "150", "-5"])
def test_percentile_outside_0_100(value):
    e = error(G + f"WINDOW GLOBAL TRIGGER WATERMARK PERCENTILE {value}")
    assert type(e) is SqlflowSemanticError
    assert e.message == f"WATERMARK PERCENTILE must be in (0, 100], got {value}"
    assert (e.clause, e.line, e.column) == ("TRIGGER", 1, 60)


@pytest.mark.parametrize("predicate, what", [
    ("42", "a number"),
    ("'flush'", "a string"),
    ("x * 2", "an arithmetic expression"),
    ("CAST(x AS INT)", "a value of type INT"),
    ("INTERVAL 5 MINUTES", "an interval"),
    ("NULL", "NULL"),
])
def test_when_predicate_that_is_clearly_not_boolean(predicate, what):
    e = error(G + f"WINDOW GLOBAL TRIGGER WHEN({predicate})")
    assert type(e) is SqlflowSemanticError
    assert e.message.startswith(f"WHEN needs a boolean predicate, got {what}: ")
    assert (e.clause, e.column) == ("TRIGGER", 65)


def test_when_predicate_not_boolean_full_message():
    expect(G + "WINDOW GLOBAL TRIGGER WHEN(x * 2)", SqlflowSemanticError, """
        sqlflow: TRIGGER: WHEN needs a boolean predicate, got an arithmetic expression: x * 2 (line 1, column 65)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER WHEN(x * 2)
                                                                          ^
        compare it, e.g. WHEN(x > 0)
    """)


def test_when_predicate_on_a_bare_column_is_allowed():
    (_, windowing), = parse(G + "WINDOW GLOBAL ON ts TRIGGER WHEN(is_flush)").windowed_selects()
    assert windowing.trigger == ast.When(ast.SqlExpr("is_flush"))


def test_when_predicate_with_an_aggregate():
    expect(G + "WINDOW GLOBAL TRIGGER WHEN(max(x) > 10)", SqlflowSemanticError, """
        sqlflow: TRIGGER: WHEN is computed for each element, so it cannot use MAX(x) (line 1, column 65)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER WHEN(max(x) > 10)
                                                                          ^
    """)


def test_session_gap_expression_that_is_not_a_duration():
    expect(G + "WINDOW SESSIONS(GAP x > 5) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: GAP needs a duration, got a boolean: x > 5 (line 1, column 58)
          SELECT k, count(*) FROM t GROUP BY k WINDOW SESSIONS(GAP x > 5) ON ts
                                                                   ^
        write a duration (30m, INTERVAL 30 MINUTES) or an expression giving an interval
    """)


# --------------------------------------------------------------------------- semantics: repeated clauses


def test_repeated_emit():
    expect(G + "WINDOW GLOBAL EMIT ACCUMULATING EMIT ACCUMULATING", SqlflowSemanticError, """
        sqlflow: EMIT: EMIT is given twice (line 1, column 70)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL EMIT ACCUMULATING EMIT ACCUMULATING
                                                                               ^
    """)


def test_contradicting_emit():
    expect(G + "WINDOW GLOBAL EMIT ACCUMULATING EMIT DISCARDING", SqlflowSemanticError, """
        sqlflow: EMIT: EMIT DISCARDING contradicts the earlier EMIT ACCUMULATING (line 1, column 70)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL EMIT ACCUMULATING EMIT DISCARDING
                                                                               ^
        a query has one accumulation mode
    """)


def test_repeated_trigger():
    expect(G + "WINDOW GLOBAL TRIGGER COUNT 1 TRIGGER COUNT 2", SqlflowSemanticError, """
        sqlflow: TRIGGER: TRIGGER is given twice (line 1, column 68)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL TRIGGER COUNT 1 TRIGGER COUNT 2
                                                                             ^
        combine triggers in one clause with SEQUENCE, FIRST_OF or ALL_OF
    """)


def test_repeated_window():
    expect(G + "WINDOW GLOBAL WINDOW FIXED(SIZE 1m)", SqlflowSemanticError, """
        sqlflow: WINDOW: WINDOW is given twice (line 1, column 52)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL WINDOW FIXED(SIZE 1m)
                                                             ^
        a SELECT has one window function; to window twice, window the result of a subquery
    """)


def test_repeated_allowed_lateness():
    expect(G + "WINDOW GLOBAL ALLOWED LATENESS 1m ALLOWED LATENESS 2m", SqlflowSemanticError, """
        sqlflow: ALLOWED LATENESS: ALLOWED LATENESS is given twice (line 1, column 72)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ALLOWED LATENESS 1m ALLOWED LATENESS 2m
                                                                                 ^
    """)


# --------------------------------------------------------------------------- semantics: the SELECT


def test_windowed_select_without_group_by_or_aggregate():
    expect("SELECT k FROM t WINDOW GLOBAL", SqlflowSemanticError, """
        sqlflow: WINDOW: a windowed SELECT needs GROUP BY or an aggregate (line 1, column 17)
          SELECT k FROM t WINDOW GLOBAL
                          ^
        without GROUP BY the aggregates are computed per window over all rows
    """)


def test_too_many_windows_per_element():
    expect("SELECT k, count(*) FROM t GROUP BY k\nWINDOW SLIDING(SIZE 100000d, PERIOD 1us) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: each element would be in 8,640,000,000,000,000 windows (SIZE / PERIOD); at most 100,000 are allowed (line 2, column 37)
          WINDOW SLIDING(SIZE 100000d, PERIOD 1us) ON ts
                                              ^
        use a longer period (or step), or aggregate in two stages
    """)
    expect("SELECT k, count(*) FROM t GROUP BY k WINDOW CUMULATE(STEP 1s, SIZE 30d) ON ts", SqlflowSemanticError, """
        sqlflow: WINDOW: each element would be in 2,592,000 windows (SIZE / STEP); at most 100,000 are allowed (line 1, column 59)
          SELECT k, count(*) FROM t GROUP BY k WINDOW CUMULATE(STEP 1s, SIZE 30d) ON ts
                                                                    ^
        use a longer period (or step), or aggregate in two stages
    """)
    parse("SELECT k, count(*) FROM t GROUP BY k WINDOW SLIDING(SIZE 100000s, PERIOD 1s) ON ts")  # the limit


def test_is_retraction_needs_the_retracting_mode():
    expect("SELECT k, is_retraction, count(*)\nFROM t GROUP BY k WINDOW GLOBAL ON ts EMIT ACCUMULATING",
           SqlflowSemanticError, """
        sqlflow: SELECT: is_retraction is a pane column only with EMIT ACCUMULATING AND RETRACTING (line 1, column 11)
          SELECT k, is_retraction, count(*)
                    ^
        add EMIT ACCUMULATING AND RETRACTING, or drop is_retraction (without it no row is a retraction)
    """)


def test_column_inside_an_unknown_function_names_the_function():
    expect("SELECT k, nosuchfn(v) AS x\nFROM t GROUP BY k WINDOW GLOBAL ON ts", SqlflowSemanticError, """
        sqlflow: SELECT: v is neither in GROUP BY nor inside an aggregate: nosuchfn(...) is not a Spark aggregate function sqlflow knows (line 1, column 20)
          SELECT k, nosuchfn(v) AS x
                             ^
        check the function's name; user-defined aggregate functions are not supported in a windowed SELECT (group by v, or aggregate it with a built-in aggregate)
    """)


def test_selected_column_neither_grouped_nor_aggregated():
    expect("SELECT k,\n       v,\n       count(*)\nFROM t GROUP BY k WINDOW GLOBAL", SqlflowSemanticError, """
        sqlflow: SELECT: v is neither in GROUP BY nor inside an aggregate (line 2, column 8)
                 v,
                 ^
        add it to GROUP BY or aggregate it, e.g. first(v)
    """)


@pytest.mark.parametrize("aggregate", ["mean(v)", "std(v)", "every(v > 0)", "SUM(v) FILTER (WHERE v > 0)",
                                       "kurtosis(v)", "max_by(v, w)"])
def test_spark_aggregates_sqlglot_does_not_model_are_aggregates(aggregate):
    assert validate(parse(f"SELECT k, {aggregate} FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts"),
                    streaming=False) is None
    assert validate(parse(f"SELECT {aggregate} FROM t WINDOW FIXED(SIZE 1m) ON ts"), streaming=False) is None
    # the same column outside the aggregate is refused: the call above counted as one
    assert error("SELECT k, v FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts").message == \
        "v is neither in GROUP BY nor inside an aggregate"


def test_select_star_in_a_windowed_select():
    expect("SELECT *, count(*) FROM t GROUP BY k WINDOW GLOBAL", SqlflowSemanticError, """
        sqlflow: SELECT: SELECT * in a windowed SELECT (line 1, column 8)
          SELECT *, count(*) FROM t GROUP BY k WINDOW GLOBAL
                 ^
        select the GROUP BY keys and aggregates
    """)


def test_global_window_without_event_time():
    # every window needs an event time: bounded input is replayed in event-time order
    e = error(G + "WINDOW GLOBAL TRIGGER COUNT 10")
    assert (type(e), e.message, e.column) == (SqlflowSemanticError, "no event-time column for this window", 38)


def test_window_without_event_time():
    expect(G + "WINDOW FIXED(SIZE 5m)", SqlflowSemanticError, """
        sqlflow: WINDOW: no event-time column for this window (line 1, column 38)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m)
                                               ^
        name it with ON <column>, or add WATERMARK <column> DELAY OF ... to the table in FROM
    """)


def test_event_time_from_a_watermark_in_a_cte_or_subquery():
    import sqlflow

    for sql in ["WITH w AS (SELECT * FROM t WATERMARK ts DELAY OF 1m) SELECT k, count(*) FROM w GROUP BY k "
                "WINDOW FIXED(SIZE 5m)",
                "SELECT k, count(*) FROM (SELECT * FROM t WATERMARK ts DELAY OF 1m) AS s GROUP BY k "
                "WINDOW FIXED(SIZE 5m)"]:
        (_, windowing), = parse(sql).windowed_selects()
        assert windowing.window.on is None                  # no ON: the event time comes from the WATERMARK
        assert "GROUP BY k, WINDOW(ts, '5 minutes')" in sqlflow.transpile(sql)


def test_ambiguous_event_time_with_two_watermarked_sources():
    expect("SELECT a.k, count(*)\nFROM x WATERMARK ts DELAY OF 1m a JOIN y WATERMARK ts DELAY OF 1m b ON a.k = b.k\n"
           "GROUP BY a.k WINDOW FIXED(SIZE 5m)", SqlflowSemanticError, """
        sqlflow: WINDOW: 2 WATERMARK clauses feed this window, so its event time is ambiguous (line 3, column 14)
          GROUP BY a.k WINDOW FIXED(SIZE 5m)
                       ^
        name the event-time column with ON <column>
    """)


# --------------------------------------------------------------------------- semantics: sources


def test_perfect_without_arrival():
    expect("SELECT k, count(*) FROM t WATERMARK ts PERFECT GROUP BY k WINDOW FIXED(SIZE 5m)",
           SqlflowSemanticError, """
        sqlflow: WATERMARK: PERFECT needs ARRIVAL <column>: the perfect watermark is the earliest event time not yet arrived (line 1, column 40)
          SELECT k, count(*) FROM t WATERMARK ts PERFECT GROUP BY k WINDOW FIXED(SIZE 5m)
                                                 ^
    """)


def test_timeline_without_arrival():
    expect("SELECT k, count(*) FROM t WATERMARK ts TIMELINE steps GROUP BY k WINDOW FIXED(SIZE 5m)",
           SqlflowSemanticError, """
        sqlflow: WATERMARK: TIMELINE needs ARRIVAL <column>: the timeline's steps are placed among the rows by arrival time (line 1, column 40)
          SELECT k, count(*) FROM t WATERMARK ts TIMELINE steps GROUP BY k WINDOW FIXED(SIZE 5m)
                                                 ^
    """)


# --------------------------------------------------------------------------- semantics: live streams


def test_global_window_with_the_default_trigger_on_a_stream():
    sql = G + "WINDOW GLOBAL ON ts"
    parse(sql)  # fine on recorded data: the watermark reaches +inf at the end of input
    validate(parse(sql), streaming=False)
    expect(sql, SqlflowSemanticError, """
        sqlflow: TRIGGER: on a stream the GLOBAL window never ends, so the default trigger REPEAT(WATERMARK) never fires (line 1, column 38)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts
                                               ^
        add a trigger that fires on its own, e.g. TRIGGER REPEAT(PERIOD 1m)
    """, streaming=True)


def test_global_window_with_only_watermark_triggers_on_a_stream():
    expect(G + "WINDOW GLOBAL ON ts TRIGGER SEQUENCE(WATERMARK, REPEAT(WATERMARK))", SqlflowSemanticError, """
        sqlflow: TRIGGER: on a stream the GLOBAL window never ends, so TRIGGER SEQUENCE(WATERMARK, REPEAT(WATERMARK)) never fires (line 1, column 66)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER SEQUENCE(WATERMARK, REPEAT(WATERMARK))
                                                                           ^
        add a trigger that fires on its own, e.g. TRIGGER REPEAT(PERIOD 1m)
    """, streaming=True)


@pytest.mark.parametrize("trigger", [
    "REPEAT(WATERMARK)", "WATERMARK", "SEQUENCE(WATERMARK, REPEAT(COUNT 1))", "ALL_OF(COUNT 1, WATERMARK)",
    "REPEAT_UNTIL(WATERMARK, WATERMARK PERCENTILE 100)", "WATERMARK LATE COUNT 1",
])
def test_global_window_triggers_that_never_fire_on_a_stream(trigger):
    e = error(G + f"WINDOW GLOBAL ON ts TRIGGER {trigger}", streaming=True)
    assert type(e) is SqlflowSemanticError and e.message.endswith("never fires")


@pytest.mark.parametrize("trigger", [
    "REPEAT(PERIOD 1m)", "COUNT 10", "WATERMARK EARLY PERIOD 1m", "FIRST_OF(WATERMARK, DELAY 1m)",
    "SEQUENCE(COUNT 1, WATERMARK)", "REPEAT_UNTIL(WATERMARK, WHEN(done))", "REPEAT(ALL_OF(COUNT 2, DELAY 1s))",
])
def test_global_window_triggers_that_fire_on_a_stream(trigger):
    statement = parse(G + f"WINDOW GLOBAL ON ts TRIGGER {trigger}")
    assert validate(statement, streaming=True) is None
    assert to_sql(statement).endswith(f"WINDOW GLOBAL ON ts TRIGGER {trigger}")


def test_percentile_trigger_on_a_stream():
    expect(G + "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK PERCENTILE 90", SqlflowSemanticError, """
        sqlflow: TRIGGER: WATERMARK PERCENTILE 90 needs recorded data: on a live stream a window's final size is unknown (line 1, column 74)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK PERCENTILE 90
                                                                                   ^
    """, streaming=True)


def test_perfect_watermark_on_a_stream():
    expect("SELECT k, count(*) FROM t WATERMARK ts PERFECT ARRIVAL a GROUP BY k WINDOW FIXED(SIZE 5m)",
           SqlflowSemanticError, """
        sqlflow: WATERMARK: PERFECT needs recorded data: on a live stream the rows to come are unknown (line 1, column 40)
          SELECT k, count(*) FROM t WATERMARK ts PERFECT ARRIVAL a GROUP BY k WINDOW FIXED(SIZE 5m)
                                                 ^
    """, streaming=True)


def test_arrival_on_a_stream():
    expect("SELECT k, count(*) FROM t WATERMARK ts TIMELINE steps ARRIVAL a GROUP BY k WINDOW FIXED(SIZE 5m)",
           SqlflowSemanticError, """
        sqlflow: WATERMARK: ARRIVAL replays recorded data: on a live stream each row arrives at its micro-batch's processing time (line 1, column 27)
          SELECT k, count(*) FROM t WATERMARK ts TIMELINE steps ARRIVAL a GROUP BY k WINDOW FIXED(SIZE 5m)
                                    ^
        drop ARRIVAL (and TIMELINE) to run on the stream as it comes
    """, streaming=True)


def test_validate_leaves_plain_statements_to_spark():
    statement = parse("SELECT * FROM t WHERE")   # not even valid SQL: Spark judges it
    assert statement.is_plain and statement.sql == "SELECT * FROM t WHERE"
    assert validate(statement, streaming=True) is None


def test_parentheses_nested_too_deeply():
    e = error(G + "WINDOW GLOBAL TRIGGER " + "REPEAT(" * 70 + "COUNT 1" + ")" * 70)
    assert type(e) is SqlflowSyntaxError
    assert (e.message, e.clause, e.column) == ("parentheses nested more than 64 deep", "TRIGGER", 60 + 64 * 7 + 6)  # the 65th "("


def test_watermark_clause_after_the_alias():
    # Spark 4.3 reads `FROM t WATERMARK ... AS a` and rejects `FROM t AS a WATERMARK ...`
    expect("SELECT k, count(*) FROM t AS a WATERMARK ts DELAY OF 1m GROUP BY k WINDOW FIXED(SIZE 5m)",
           SqlflowSyntaxError, """
        sqlflow: WATERMARK: a WATERMARK clause goes right after a table or subquery in FROM (line 1, column 32)
          SELECT k, count(*) FROM t AS a WATERMARK ts DELAY OF 1m GROUP BY k WINDOW FIXED(SIZE 5m)
                                         ^
        as in Spark, the alias comes after it: FROM t WATERMARK ... AS a
    """)


@pytest.mark.parametrize("source, column", [
    ("t ARRIVAL arrived_at", 27),          # ARRIVAL read as an alias of t
    ("t a ARRIVAL arrived_at", 29),        # after an alias
    ("(SELECT * FROM u) ARRIVAL arrived_at", 43),
])
def test_arrival_without_a_watermark_names_the_missing_clause(source, column):
    # ARRIVAL belongs to the WATERMARK clause: alone, Spark's parser reads it as an alias and
    # stumbles on the column after it ("unexpected 'arrived_at'")
    sql = f"SELECT k, count(*) FROM {source} GROUP BY k WINDOW FIXED(SIZE 5m) ON ts"
    e = error(sql)
    assert type(e) is SqlflowSyntaxError
    assert (e.clause, e.line, e.column) == ("WATERMARK", 1, column)
    assert e.message == "ARRIVAL needs a WATERMARK clause before it"
    assert e.hint == ("ARRIVAL ends a WATERMARK clause: FROM t WATERMARK <event time column> "
                      "(DELAY OF <duration> | PERFECT | TIMELINE <table>) ARRIVAL <arrival time column>")
    assert sql[column - 1:].startswith("ARRIVAL")


def test_arrival_before_the_watermark_model_says_what_comes_first():
    expect(G.replace("FROM t", "FROM t WATERMARK ts ARRIVAL arrived_at") + "WINDOW FIXED(SIZE 5m)",
           SqlflowSyntaxError, """
        sqlflow: WATERMARK: expected DELAY OF, PERFECT, TIMELINE or ASCENDING PER, got 'ARRIVAL' (line 1, column 40)
          SELECT k, count(*) FROM t WATERMARK ts ARRIVAL arrived_at GROUP BY k WINDOW FIXED(SIZE 5m)
                                                 ^
    """)


def test_watermark_late_chain_nested_too_deeply():
    # LATE nests without parentheses: 300 of them used to overflow Python's stack (RecursionError)
    chain = G + "WINDOW FIXED(SIZE 1m) ON ts TRIGGER " + "WATERMARK LATE " * 300 + "WATERMARK"
    e = error(chain)
    assert type(e) is SqlflowSyntaxError
    assert (e.message, e.clause, e.line, e.column) == ("triggers nested more than 64 deep", "TRIGGER", 1, 74 + 65 * 15)
    assert str(e).startswith("sqlflow: TRIGGER: triggers nested more than 64 deep (line 1, column 1049)\n")
    e = error(G + "WINDOW FIXED(SIZE 1m) ON ts TRIGGER " + "WATERMARK LATE " * 20000 + "WATERMARK")
    assert (e.message, e.column) == ("triggers nested more than 64 deep", 1049)


def test_triggers_nested_64_deep_still_parse():
    statement = parse(G + "WINDOW FIXED(SIZE 1m) ON ts TRIGGER " + "WATERMARK LATE " * 64 + "COUNT 1")
    (_, windowing), = statement.windowed_selects()
    assert sum(1 for _ in ast.walk_triggers(windowing.trigger)) == 65


# --------------------------------------------------------------------------- syntax: where the clauses go


def test_emit_after_limit():
    # used to say "EMIT needs a WINDOW clause before it"
    expect(G + "WINDOW FIXED(SIZE 1m) ON ts LIMIT 5 EMIT DISCARDING", SqlflowSyntaxError, """
        sqlflow: EMIT: EMIT must come before LIMIT (line 1, column 74)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts LIMIT 5 EMIT DISCARDING
                                                                                   ^
        WINDOW, TRIGGER, ALLOWED LATENESS, EMIT and OUTPUT TIMESTAMP go, in this order, after GROUP BY and HAVING and before ORDER BY and LIMIT
    """)


def test_window_after_order_by():
    # used to be accepted, and printed back before ORDER BY
    expect(G + "ORDER BY k\nWINDOW FIXED(SIZE 1m) ON ts", SqlflowSyntaxError, """
        sqlflow: WINDOW: WINDOW must come before ORDER BY (line 2, column 1)
          WINDOW FIXED(SIZE 1m) ON ts
          ^
        WINDOW, TRIGGER, ALLOWED LATENESS, EMIT and OUTPUT TIMESTAMP go, in this order, after GROUP BY and HAVING and before ORDER BY and LIMIT
    """)


@pytest.mark.parametrize("sql, name, after", [
    (G + "WINDOW GLOBAL ON ts ORDER BY k TRIGGER REPEAT(COUNT 1)", "TRIGGER", "ORDER BY"),
    (G + "ORDER BY k LIMIT 3 ALLOWED LATENESS 1m", "ALLOWED LATENESS", "ORDER BY"),
    (G + "LIMIT 3 WINDOW GLOBAL ON ts", "WINDOW", "LIMIT"),
    (G + "SORT BY k WINDOW GLOBAL ON ts", "WINDOW", "SORT BY"),
    (G + "CLUSTER BY k WINDOW GLOBAL ON ts", "WINDOW", "CLUSTER BY"),
    (G + "DISTRIBUTE BY k WINDOW GLOBAL ON ts EMIT DISCARDING", "WINDOW", "DISTRIBUTE BY"),
    ("SELECT * FROM (" + G + "WINDOW GLOBAL ON ts LIMIT 1 OFFSET 1 EMIT DISCARDING)", "EMIT", "LIMIT"),
])
def test_clauses_after_order_by_or_limit(sql, name, after):
    e = error(sql)
    assert (type(e), e.clause, e.message) == (SqlflowSyntaxError, name, f"{name} must come before {after}")


@pytest.mark.parametrize("sql", [
    "SELECT k, COUNT(*) FROM (SELECT * FROM u ORDER BY x LIMIT 1) GROUP BY k WINDOW GLOBAL ON ts",
    "(SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k LIMIT 1) UNION ALL "
    "SELECT k, COUNT(*) FROM t GROUP BY k WINDOW GLOBAL ON ts",
    "SELECT k, COUNT(*) FROM t GROUP BY k WINDOW GLOBAL ON ts ORDER BY k LIMIT 1 OFFSET 1",
])
def test_order_by_limit_of_an_inner_query_or_another_select_is_not_ours(sql):
    statement = parse(sql)
    assert len(statement.windowed_selects()) == 1
    assert to_sql(statement) == sql                     # every ORDER BY / LIMIT stays where it was


# --------------------------------------------------------------------------- nesting and size: located errors, never a RecursionError


def test_long_arithmetic_chains_are_not_nesting():
    # sqlglot reads and prints `x + x + ...` without recursion; validation walked it recursively
    statement = parse("SELECT k, count(*), " + " + ".join(["x"] * 3000) + " AS s FROM t GROUP BY k, x WINDOW GLOBAL ON ts")
    assert len(to_sql(statement)) > 3000 * 4
    e = error("SELECT k, count(*), " + " + ".join(["y"] * 3000) + " AS s FROM t GROUP BY k, x WINDOW GLOBAL ON ts")
    assert (e.clause, e.message, e.column) == ("SELECT", "y is neither in GROUP BY nor inside an aggregate", 21)


def test_sql_nested_too_deeply_to_print():
    # 60 nested subqueries parse, but printing them (to_sql, transpile) overflowed Python's stack
    sql = "SELECT * FROM " + "(SELECT * FROM " * 60 + "(" + G + "WINDOW GLOBAL ON ts" + ")" * 61
    e = error(sql)
    assert (type(e), e.clause, e.line, e.message) == (SqlflowSyntaxError, "SQL", 1, "the SQL is nested more than 128 levels deep")
    assert e.column > 400 and sql[e.column - 1:].startswith("* FROM (SELECT")  # the first SELECT too deep
    parse("SELECT * FROM " + "(SELECT * FROM " * 30 + "(" + G + "WINDOW GLOBAL ON ts" + ")" * 31)


def test_sql_nested_too_deeply_to_read_points_at_the_deepest_parenthesis():
    e = error("SELECT k, count(*) FROM t WHERE " + "(" * 300 + "x" + ")" * 300 + " GROUP BY k WINDOW GLOBAL ON ts")
    assert (type(e), e.clause, e.message, e.column) == (SqlflowSyntaxError, "SQL", "the SQL is nested too deeply to read", 33 + 299)


def test_chained_ctes_feeding_a_window():
    # the event time is found through every CTE, without recursion
    chain = ", ".join(f"c{i} AS (SELECT * FROM c{i - 1})" for i in range(1, 1500))
    statement = parse(f"WITH c0 AS (SELECT * FROM t WATERMARK ts DELAY OF 1m), {chain} "
                      "SELECT k, count(*) FROM c1499 GROUP BY k WINDOW GLOBAL")
    assert len(statement.windowed_selects()) == 1


def test_name_with_too_many_parts():
    e = error(G + "WINDOW GLOBAL ON " + ".".join(["a"] * 65))
    assert (type(e), e.clause, e.column, e.message) == (SqlflowSyntaxError, "WINDOW", 55, "a name has at most 64 parts, this one has 65")
    e = error("SELECT k, count(*) FROM t WATERMARK " + ".".join(["a"] * 100) + " DELAY OF 1m GROUP BY k WINDOW GLOBAL")
    assert (e.clause, e.column, e.message) == ("WATERMARK", 37, "a name has at most 64 parts, this one has 100")


def test_sqlglot_does_not_log_our_markers(caplog):
    # sqlglot warned "'... __sqlflow_windowing_0' contains unsupported syntax" on stderr
    e = error("CREATE VIEW TEMPORARY v AS " + G + "WINDOW GLOBAL ON ts")
    assert e.message == "WINDOW can only end a SELECT (after FROM, WHERE, GROUP BY and HAVING)"
    assert not [r for r in caplog.records if "__sqlflow" in r.getMessage()]


def test_the_caret_lines_up_under_tabs_and_unusual_line_breaks():
    # positions count lines at "\n" (as Spark does); the echoed line used other breaks too
    for sep in ("\r", "\u2028", "\t"):
        e = error("SELECT k,\tcount(*) FROM t GROUP BY k" + sep + "WINDOW FIXD(SIZE 1m) ON ts")
        assert str(e) == message("""
            sqlflow: WINDOW: unknown window function FIXD (line 1, column 45)
              SELECT k, count(*) FROM t GROUP BY k WINDOW FIXD(SIZE 1m) ON ts
                                                          ^
            did you mean FIXED?
        """)
    e = error("SELECT k, count(*) FROM t GROUP BY k\r\nWINDOW FIXD(SIZE 1m) ON ts")
    assert (e.line, e.column) == (2, 8) and str(e).splitlines()[1] == "  WINDOW FIXD(SIZE 1m) ON ts"


@pytest.mark.parametrize("sql, clause, what, column", [
    # sqlglot read these leniently and printed text it could not read back: validation raised
    # a bare SqlExprError
    (G + "WINDOW SESSIONS(GAP INTERVAL 30 MIN 1e999 UTES) ON ts", "WINDOW", "the GAP expression", 58),
    (G + "WINDOW SESSIONS(GAP m * " + "INTERVAL " * 30 + ") ON ts", "WINDOW", "the GAP expression", 58),
    (G + "WINDOW GLOBAL ON ts TRIGGER WHEN(x = " + "INTERVAL " * 30 + ")", "TRIGGER", "the WHEN predicate", 71),
])
def test_embedded_sql_that_does_not_read_back(sql, clause, what, column):
    e = error(sql)
    assert (type(e), e.clause, e.message, e.column) == (
        SqlflowSyntaxError, clause, f"cannot read {what}: it is not well-formed Spark SQL", column)


def test_sql_sqlglot_cannot_tokenize():
    # the message quoted sqlglot's 100 characters of context (our clause markers included) at column 1
    expect(G.replace("FROM t", "FROM t WHERE x = X'zz'") + "WINDOW GLOBAL ON ts", SqlflowSyntaxError, """
        sqlflow: SQL: cannot read this token (line 1, column 37)
          SELECT k, count(*) FROM t WHERE x = X'zz' GROUP BY k WINDOW GLOBAL ON ts
                                              ^
    """)


# --------------------------------------------------------------------------- hints for common slips


def test_emit_retracting_suggests_accumulating_and_retracting():
    expect(G + "WINDOW FIXED(SIZE 5m) ON ts EMIT RETRACTING", SqlflowSyntaxError, """
        sqlflow: EMIT: expected DISCARDING or ACCUMULATING, got 'RETRACTING' (line 1, column 71)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts EMIT RETRACTING
                                                                                ^
        did you mean ACCUMULATING AND RETRACTING?
    """)
    assert error(G + "WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING RETRACTING").hint == \
        "did you mean ACCUMULATING AND RETRACTING?"
    assert error(G + "WINDOW FIXED(SIZE 5m) ON ts EMIT RETRACTNG").hint == "did you mean ACCUMULATING AND RETRACTING?"


def test_a_window_function_missing_a_parameter_says_which():
    expect(G + "WINDOW SLIDING(SIZE 1h) ON ts", SqlflowSyntaxError, """
        sqlflow: WINDOW: expected ',', got ')' (line 1, column 60)
          SELECT k, count(*) FROM t GROUP BY k WINDOW SLIDING(SIZE 1h) ON ts
                                                                     ^
        SLIDING needs PERIOD: SLIDING(SIZE <duration>, PERIOD <duration>[, OFFSET <duration>])
    """)
    assert error(G + "WINDOW CUMULATE(SIZE 1d) ON ts").hint == \
        "CUMULATE needs STEP: CUMULATE(STEP <duration>, SIZE <duration>[, OFFSET <duration>])"
    assert error(G + "WINDOW FIXED() ON ts").hint == "FIXED needs SIZE: FIXED(SIZE <duration>[, OFFSET <duration>])"
    assert error(G + "WINDOW SESSIONS() ON ts").hint == "SESSIONS needs GAP: SESSIONS(GAP <duration>)"


def test_window_function_parameters_out_of_order():
    assert error(G + "WINDOW SLIDING(PERIOD 10m, SIZE 1h) ON ts").hint == (
        "SLIDING takes its parameters in this order: SLIDING(SIZE <duration>, PERIOD <duration>[, OFFSET <duration>])")
    # a misspelt parameter is a typo, and a missing duration is not about the parameters
    assert error(G + "WINDOW SLIDING(SIZ 1h, PERIOD 10m) ON ts").hint == "did you mean SIZE?"
    assert error(G + "WINDOW SLIDING(SIZE 1h, PERIOD 10m, OFFSET) ON ts").hint is None


def test_columns_of_the_clauses_know_where_they_are_written():
    s = parse("SELECT k, count(*) FROM t WATERMARK ts DELAY OF 1m ARRIVAL `at`\nGROUP BY k WINDOW FIXED(SIZE 5m) ON e.ts")
    (_, windowing), = s.windowed_selects()
    (_, source), = s.source_watermarks()
    assert (windowing.window.on, windowing.window.on_pos) == ("e.ts", ast.Position(2, 37))
    assert (source.event_time, source.event_time_pos) == ("ts", ast.Position(1, 37))
    assert (source.arrival, source.arrival_pos) == ("at", ast.Position(1, 60))


# --------------------------------------------------------------------------- the options Beam users need


def caret(sql: str, column: int) -> str:
    return f"  {sql}\n  " + " " * (column - 1) + "^"


def test_emit_options_out_of_order():
    sql = G + "WINDOW GLOBAL EMIT DISCARDING CLOSING ALWAYS ON TIME ALWAYS"
    e = error(sql)
    assert type(e) is SqlflowSyntaxError
    assert str(e) == ("sqlflow: EMIT: expected OUTPUT TIMESTAMP, REOPEN ON MERGE or the end of the clauses, got 'ON' "
                      "(line 1, column 83)\n" + caret(sql, 83) + "\nwrite EMIT <mode> [ON TIME ALWAYS] [CLOSING ALWAYS] "
                      "[REOPEN ON MERGE], each option once, in this order")


def test_emit_options_contradict_an_earlier_emit():
    sql = G + "WINDOW GLOBAL EMIT ACCUMULATING EMIT ACCUMULATING CLOSING ALWAYS"
    e = error(sql)
    assert type(e) is SqlflowSemanticError
    assert str(e) == ("sqlflow: EMIT: EMIT ACCUMULATING CLOSING ALWAYS contradicts the earlier EMIT ACCUMULATING "
                      "(line 1, column 70)\n" + caret(sql, 70) + "\na query has one EMIT clause: write its options in it")


def test_on_time_needs_always():
    sql = G + "WINDOW GLOBAL EMIT ACCUMULATING ON TIME"
    e = error(sql)
    assert type(e) is SqlflowSyntaxError
    assert str(e) == ("sqlflow: EMIT: expected ALWAYS, got the end of the statement (line 1, column 77)\n"
                      + caret(sql, 77))


def test_period_offset_below_the_period():
    sql = G + "WINDOW GLOBAL ON ts TRIGGER REPEAT(PERIOD 1m OFFSET 90s)"
    e = error(sql)
    assert type(e) is SqlflowSemanticError
    assert str(e) == "sqlflow: TRIGGER: OFFSET 90s must be less than PERIOD 1m (line 1, column 90)\n" + caret(sql, 90)


def test_period_offset_not_negative():
    sql = G + "WINDOW GLOBAL ON ts TRIGGER PERIOD 1m OFFSET -5s"
    e = error(sql)
    assert type(e) is SqlflowSemanticError
    assert str(e) == "sqlflow: TRIGGER: OFFSET cannot be negative, got -5s (line 1, column 83)\n" + caret(sql, 83)


def test_unbounded_misspelt():
    sql = G + "WINDOW GLOBAL ALLOWED LATENESS UNBOUND"
    e = error(sql)
    assert type(e) is SqlflowSyntaxError
    assert str(e) == ("sqlflow: ALLOWED LATENESS: expected UNBOUNDED or a duration (like 30m or INTERVAL 5 MINUTES), "
                      "got 'UNBOUND' (line 1, column 69)\n" + caret(sql, 69) + "\ndid you mean UNBOUNDED?")


def test_spark_offset_after_a_period_offset():
    """OFFSET after a PERIOD's duration is ours; Spark's OFFSET (a row count) still ends the clauses."""
    statement = parse(G + "WINDOW GLOBAL ON ts TRIGGER WATERMARK EARLY PERIOD 1m OFFSET 10s EMIT DISCARDING "
                          "ORDER BY k LIMIT 2 OFFSET 1")
    (_, windowing), = statement.windowed_selects()
    assert windowing.trigger == ast.WatermarkEarlyLate(early=ast.Period(ast.Duration(60_000_000), ast.Duration(10_000_000)))
    assert to_sql(statement).endswith("EMIT DISCARDING ORDER BY k LIMIT 2 OFFSET 1")


def test_an_offset_without_unit_after_a_period_is_ours():
    """`PERIOD 1m OFFSET 10` is never read as Spark's OFFSET (skip 10 rows): the unit is missing."""
    sql = G + "WINDOW GLOBAL ON ts TRIGGER PERIOD 1m OFFSET 10"
    e = error(sql)
    assert type(e) is SqlflowSyntaxError
    assert str(e).splitlines()[0] == ("sqlflow: TRIGGER: expected a duration (like 30m or INTERVAL 5 MINUTES), "
                                      "got '10' (line 1, column 83)")


# --------------------------------------------------------------------------- OUTPUT TIMESTAMP

def test_output_timestamp_goes_after_emit():
    expect(G + "WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP EARLIEST EMIT DISCARDING", SqlflowSyntaxError, """
        sqlflow: EMIT: EMIT must come before OUTPUT TIMESTAMP (line 1, column 92)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP EARLIEST EMIT DISCARDING
                                                                                                     ^
    """)


def test_misspelt_output_timestamp():
    expect(G + "WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP EARLIST", SqlflowSyntaxError, """
        sqlflow: OUTPUT TIMESTAMP: expected END OF WINDOW, START OF WINDOW, EARLIEST or LATEST, got 'EARLIST' (line 1, column 83)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP EARLIST
                                                                                            ^
        did you mean EARLIEST?
    """)
    expect(G + "WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP END OF WINDW", SqlflowSyntaxError, """
        sqlflow: OUTPUT TIMESTAMP: expected WINDOW, got 'WINDW' (line 1, column 90)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP END OF WINDW
                                                                                                   ^
        did you mean WINDOW?
    """)


def test_two_output_timestamps_contradict():
    expect(G + "WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP LATEST OUTPUT TIMESTAMP EARLIEST", SqlflowSemanticError, """
        sqlflow: OUTPUT TIMESTAMP: OUTPUT TIMESTAMP EARLIEST contradicts the earlier OUTPUT TIMESTAMP LATEST (line 1, column 90)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts OUTPUT TIMESTAMP LATEST OUTPUT TIMESTAMP EARLIEST
                                                                                                   ^
        a pane carries one output timestamp
    """)


def test_the_global_window_has_no_start_or_end():
    expect(G + "WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 2) OUTPUT TIMESTAMP START OF WINDOW", SqlflowSemanticError, """
        sqlflow: OUTPUT TIMESTAMP: OUTPUT TIMESTAMP START OF WINDOW: the GLOBAL window has no start or end (line 1, column 82)
          SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 2) OUTPUT TIMESTAMP START OF WINDOW
                                                                                           ^
        use OUTPUT TIMESTAMP EARLIEST or LATEST (the event times of each pane's elements), or a window function with bounds
    """)


# --------------------------------------------------------------------------- time domains (docs/semantics.md, 10)

R = "SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k "


def test_processing_time_has_no_lateness_to_allow():
    expect(R + "WINDOW FIXED(SIZE 1h) ON PROCESSING TIME ALLOWED LATENESS 5m", SqlflowSemanticError, """
        sqlflow: ALLOWED LATENESS: ALLOWED LATENESS has nothing to allow: on PROCESSING TIME no row is ever late (the operator's clock is its own watermark) (line 1, column 120)
          SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k WINDOW FIXED(SIZE 1h) ON PROCESSING TIME ALLOWED LATENESS 5m
                                                                                                                                 ^
        drop ALLOWED LATENESS
    """)


def test_a_late_trigger_never_fires_on_ingestion_time():
    expect(R + "WINDOW FIXED(SIZE 1h) ON INGESTION TIME TRIGGER WATERMARK EARLY COUNT 2 LATE COUNT 1",
           SqlflowSemanticError, """
        sqlflow: TRIGGER: LATE COUNT 1 would never fire: on INGESTION TIME no row is ever late (ingestion times only grow, under their perfect watermark) (line 1, column 156)
          SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k WINDOW FIXED(SIZE 1h) ON INGESTION TIME TRIGGER WATERMARK EARLY COUNT 2 LATE COUNT 1
                                                                                                                                                                     ^
        drop the LATE part
    """)


def test_a_pipeline_has_one_time_domain():
    """Flink's time design draft: mixing operator time with timestamp time is ill-defined; so is reading event
    times under an ingestion-time watermark. The error points at the downstream ON."""
    upstream = ("WITH s AS (SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k\n"
                "           WINDOW FIXED(SIZE 1h){})\n")
    expect(upstream.format("") + "SELECT sum(n) AS n FROM s WINDOW FIXED(SIZE 1d) ON PROCESSING TIME", SqlflowSemanticError, """
        sqlflow: WINDOW: this window is on PROCESSING TIME but reads the panes of a window on EVENT TIME (WINDOW FIXED at line 2, column 12): mixing operator time with timestamp time gives arbitrary, ill-defined results: operator time is each stage's own clock, so timestamps and watermarks of the other stage mean nothing to it (line 3, column 52)
          SELECT sum(n) AS n FROM s WINDOW FIXED(SIZE 1d) ON PROCESSING TIME
                                                             ^
        a pipeline has one time domain (Flink's time design draft): window the panes of an event-time stage on event time (ON output_time)
    """)
    expect(upstream.format("") + "SELECT sum(n) AS n FROM s WINDOW FIXED(SIZE 1d) ON INGESTION TIME",
           SqlflowSemanticError, """
        sqlflow: WINDOW: this window is on INGESTION TIME but reads the panes of a window on EVENT TIME (WINDOW FIXED at line 2, column 12): event times and ingestion times are different clocks: the watermark of one says nothing about the timestamps of the other (line 3, column 52)
          SELECT sum(n) AS n FROM s WINDOW FIXED(SIZE 1d) ON INGESTION TIME
                                                             ^
        a pipeline has one time domain (Flink's time design draft): window the panes of an event-time stage on event time (ON output_time)
    """)
    # one domain throughout is no error on event time
    parse(upstream.format("") + "SELECT sum(n) AS n FROM s WINDOW FIXED(SIZE 1d) ON output_time")


@pytest.mark.parametrize("domain, downstream", [
    ("INGESTION", "ON output_time"), ("INGESTION", "ON INGESTION TIME"),
    ("PROCESSING", "ON output_time"), ("PROCESSING", "ON PROCESSING TIME")])
def test_the_panes_of_a_processing_or_ingestion_time_window_are_not_windowed_again(domain, downstream):
    """`ON PROCESSING TIME` downstream was refused with "write ... ON output_time", and `ON
    output_time` with "write the same ON ... TIME in each": both now give one message, saying
    what works (docs/semantics.md, 10)."""
    sql = ("WITH s AS (SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k\n"
           f"           WINDOW FIXED(SIZE 1h) ON {domain} TIME)\n"
           f"SELECT sum(n) AS n FROM s WINDOW FIXED(SIZE 1d) {downstream}")
    e = error(sql)
    assert (type(e), e.clause, e.line, e.column) == (SqlflowSemanticError, "WINDOW", 3, 52)
    assert e.message == (f"this window reads the panes of a window on {domain} TIME (WINDOW FIXED at line 2, column "
                         f"37): only the panes of a window on EVENT TIME can be windowed again, on any time domain")
    assert e.hint == ("aggregate its panes without WINDOW (a plain GROUP BY over the pane rows), or put every stage "
                      "on event time (ON output_time here)")


def test_a_time_domain_without_time():
    expect(R + "WINDOW FIXED(SIZE 1h) ON PROCESSING TIMES", SqlflowSyntaxError, """
        sqlflow: WINDOW: expected TRIGGER, ALLOWED LATENESS, EMIT, OUTPUT TIMESTAMP, TIME or the end of the clauses, got 'TIMES' (line 1, column 115)
          SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k WINDOW FIXED(SIZE 1h) ON PROCESSING TIMES
                                                                                                                            ^
        did you mean TIME?
    """)


def test_a_misspelt_time_domain():
    e = error(R + "WINDOW FIXED(SIZE 1h) ON PROCESING TIME")
    assert (e.message, e.column, e.hint) == (
        "expected TRIGGER, ALLOWED LATENESS, EMIT, OUTPUT TIMESTAMP or the end of the clauses, got 'TIME'", 114,
        "did you mean ON PROCESSING TIME?")
    assert error(R + "WINDOW FIXED(SIZE 1h) ON wall TIME").hint == \
        "ON takes a column or a time domain: PROCESSING TIME, INGESTION TIME, EVENT TIME"


# --------------------------------------------------------------------------- errors found from the outside


def test_an_unquoted_column_named_window_before_the_window_clause():
    """`GROUP BY window WINDOW ...` reached Spark as plain SQL (its raw ParseException); last in
    GROUP BY after another key it now parses, and elsewhere it is located with the fix."""
    expect("SELECT window, COUNT(*) AS n FROM t GROUP BY window WINDOW FIXED(SIZE 1h) ON ts", SqlflowSyntaxError, """
        sqlflow: SQL: a column named window must be quoted here: an unquoted WINDOW starts a WINDOW clause (line 1, column 46)
          SELECT window, COUNT(*) AS n FROM t GROUP BY window WINDOW FIXED(SIZE 1h) ON ts
                                                       ^
        write `window` (in backquotes)""")
    expect("SELECT k, window, COUNT(*) AS n\nFROM t GROUP BY window, k WINDOW FIXED(SIZE 1h) ON ts", SqlflowSyntaxError,
           """
        sqlflow: SQL: a column named window must be quoted here: an unquoted WINDOW starts a WINDOW clause (line 2, column 17)
          FROM t GROUP BY window, k WINDOW FIXED(SIZE 1h) ON ts
                          ^
        write `window` (in backquotes)""")
    s = parse("SELECT k, window, COUNT(*) AS n FROM t GROUP BY k, window WINDOW FIXED(SIZE 1h) ON ts")
    (select, windowing), = s.windowed_selects()
    assert [g.sql() for g in select.args["group"].expressions] == ["k", "window"]
    assert windowing.window.fn == ast.Fixed(ast.Duration(3_600_000_000))
    assert not parse("SELECT k, `window`, COUNT(*) AS n FROM t GROUP BY `window`, k WINDOW GLOBAL ON ts").is_plain


@pytest.mark.parametrize("grouping, word, column", [
    ("GROUPING SETS ((k), ())", "GROUPING SETS", 37),
    ("ROLLUP(k)", "ROLLUP", 37),
    ("k, CUBE (k)", "CUBE", 40),
])
def test_grouping_sets_rollup_and_cube_are_refused_where_they_are(grouping, word, column):
    from sqlflow.errors import SqlflowUnsupportedError

    sql = f"SELECT k, COUNT(*) AS n FROM t\nGROUP BY {grouping} WINDOW FIXED(SIZE 1h) ON ts"
    e = error(sql)
    assert type(e) is SqlflowUnsupportedError
    assert (e.clause, e.line, e.column) == ("GROUP BY", 2, column - 27)
    assert e.message == f"GROUP BY {word} in a windowed SELECT: a window's panes have one grouping"
    assert e.hint == "run one windowed SELECT per grouping and UNION ALL them"


@pytest.mark.parametrize("fn, meant", [
    ("TUMBLE(SIZE 1h)", "FIXED(SIZE 1h)"),
    ("HOP(SIZE 1h, PERIOD 5m)", "SLIDING(SIZE 1h, PERIOD 5m)"),
    ("SESSION(GAP 10m)", "SESSIONS(GAP 10m)"),
])
def test_window_functions_of_other_systems_name_sqlflows(fn, meant):
    """Flink's TUMBLE written with sqlflow's parameters failed with "expected TRUE, FALSE, NULL"."""
    e = error(f"{G}WINDOW {fn} ON ts")
    assert type(e) is SqlflowSyntaxError
    assert (e.clause, e.line, e.column) == ("WINDOW", 1, 45)
    assert (e.message, e.hint) == (f"unknown window function {fn.split('(')[0]}", f"did you mean {meant}?")


def test_an_alias_named_like_a_pane_column_is_refused():
    """It would take the pane column's place in the result (on both paths), as an input column of
    that name would if Spark did not refuse it as ambiguous."""
    expect("SELECT k, COUNT(*) AS window_start\nFROM t GROUP BY k WINDOW FIXED(SIZE 1h) ON ts", SqlflowSemanticError, """
        sqlflow: SELECT: the alias window_start names a pane column: the result of a windowed SELECT has a column window_start of its own, and this item would take its place (line 1, column 23)
          SELECT k, COUNT(*) AS window_start
                                ^
        choose another name for COUNT(*); the pane columns are window_start, window_end, pane_index, pane_timing, is_last, emit_time, output_time, is_retraction
    """)


@pytest.mark.parametrize("column", ["window_start", "window_end", "pane_index", "pane_timing", "is_last",
                                    "emit_time", "output_time", "is_retraction", "`Window_Start`"])
def test_every_pane_column_name_is_refused_as_an_alias(column):
    e = error(f"SELECT k,\n  SUM(v) AS {column} FROM t GROUP BY k WINDOW FIXED(SIZE 1h) ON ts\n"
              "EMIT ACCUMULATING AND RETRACTING")
    assert type(e) is SqlflowSemanticError and (e.clause, e.line, e.column) == ("SELECT", 2, 13)
    assert f"the alias {column.strip('`')} names a pane column" in e.message


def test_a_pane_column_under_its_own_name_is_not_refused():
    for sql, alias in (("SELECT k, window_start AS window_start, COUNT(*) AS n FROM t GROUP BY k "
                        "WINDOW FIXED(SIZE 1h) ON ts", "window_start"),
                       ("SELECT k, COUNT(*) AS window_starts FROM t GROUP BY k WINDOW FIXED(SIZE 1h) ON ts",
                        "window_starts")):
        (select, windowing), = parse(sql).windowed_selects()
        assert alias in [item.alias for item in select.expressions]
        assert windowing.window.fn == ast.Fixed(ast.Duration(3_600_000_000))


def test_a_window_on_the_output_time_of_a_global_stage_without_output_timestamp_is_refused():
    """A GLOBAL window has no end: without OUTPUT TIMESTAMP its panes' output_time is NULL, and a
    window ON it would get no element (it returned no row, without a word)."""
    e = expect("WITH s AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts)\n"
               "SELECT COUNT(*) AS stages FROM s WINDOW FIXED(SIZE 1h) ON output_time", SqlflowSemanticError, """
        sqlflow: WINDOW: this window is ON output_time, the output_time of the panes of the SELECT with WINDOW GLOBAL at line 1, column 54, which is NULL in every pane: a GLOBAL window has no end, and without OUTPUT TIMESTAMP its panes have no output time (docs/semantics.md, 8), so this window would get no element and return no row (line 2, column 59)
          SELECT COUNT(*) AS stages FROM s WINDOW FIXED(SIZE 1h) ON output_time
                                                                    ^
        add OUTPUT TIMESTAMP EARLIEST or LATEST to the GLOBAL window (its panes then carry the event time of their first or last element), or window its panes ON another column
    """)
    assert e.clause == "WINDOW"
    # with an output timestamp of the elements, or another column, or a stage with an end: accepted
    parse("WITH s AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts OUTPUT TIMESTAMP LATEST)\n"
          "SELECT COUNT(*) AS stages FROM s WINDOW FIXED(SIZE 1h) ON output_time")
    parse("WITH s AS (SELECT k, COUNT(*) AS n, MAX(ts) AS last FROM t GROUP BY k WINDOW GLOBAL ON ts)\n"
          "SELECT COUNT(*) AS stages FROM s WINDOW FIXED(SIZE 1h) ON last")
    parse("WITH s AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts)\n"
          "SELECT COUNT(*) AS stages FROM s WINDOW FIXED(SIZE 1h) ON s.output_time")
    # through a subquery, qualified
    e = error("SELECT COUNT(*) AS stages FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts) AS s "
              "WINDOW FIXED(SIZE 1h) ON s.output_time")
    assert type(e) is SqlflowSemanticError and e.message.startswith("this window is ON s.output_time")


def test_reopen_on_merge_is_an_emit_option_for_merging_windows():
    """Beam's reopening of merged sessions (docs/porting-from-beam.md): the last EMIT option,
    printed back as written; refused where windows never merge."""
    sql = G + "WINDOW SESSIONS(GAP 10m) ON ts TRIGGER WATERMARK ALLOWED LATENESS 1h EMIT DISCARDING REOPEN ON MERGE"
    (_, w), = parse(sql).windowed_selects()
    assert w.emit == ast.Emit(ast.AccumulationMode.DISCARDING, reopen_on_merge=True) and w.reopen_on_merge
    assert to_sql(parse(sql)) == sql.replace("count", "COUNT")
    expect(G + "WINDOW FIXED(SIZE 10m) ON ts EMIT ACCUMULATING REOPEN ON MERGE", SqlflowSemanticError, """
        sqlflow: EMIT: REOPEN ON MERGE: FIXED windows never merge (line 1, column 67)
          SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 10m) ON ts EMIT ACCUMULATING REOPEN ON MERGE
                                                                            ^
        drop REOPEN ON MERGE (it is for SESSIONS and merging custom window functions)""")

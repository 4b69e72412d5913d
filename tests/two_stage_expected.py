"""The second stage's panes over the paper's running example (figure 14's sessions, then
sessions and their total per FIXED 2m window of output_time, EARLY PERIOD 1m, ACCUMULATING AND
RETRACTING): one fact for the tests that compute them, on a replay through Spark
(tests/spark/test_two_stage_replay.py) and on a stream at the engine level
(tests/engine/test_two_stage_stream.py). Each row: (sessions, total, window_start, pane_index,
pane_timing, is_retraction, emit_time), the instants as clock times of the example's day."""

STAGE2_PANES = [
    (1, 5, "12:00:00", 0, "EARLY", False, "12:06:00"),
    (1, 7, "12:02:00", 0, "EARLY", False, "12:06:00"),
    (1, 10, "12:04:00", 0, "EARLY", False, "12:07:00"),
    (1, 7, "12:02:00", 0, "EARLY", True, "12:07:40"),
    (1, 10, "12:04:00", 0, "EARLY", True, "12:07:40"),
    (0, 0, "12:02:00", 1, "ON_TIME", False, "12:07:40"),
    (1, 25, "12:04:00", 1, "ON_TIME", False, "12:07:40"),
    (1, 3, "12:06:00", 0, "EARLY", False, "12:08:00"),
    (1, 5, "12:00:00", 0, "EARLY", True, "12:08:19"),
    (1, 25, "12:04:00", 1, "ON_TIME", True, "12:08:19"),
    (0, 0, "12:00:00", 1, "LATE", False, "12:08:19"),
    (1, 39, "12:04:00", 2, "LATE", False, "12:08:19"),
    (1, 3, "12:06:00", 0, "EARLY", True, "12:09:00"),
    (0, 0, "12:06:00", 1, "EARLY", False, "12:09:00"),
    (1, 12, "12:08:00", 0, "EARLY", False, "12:09:00"),
]


def stage2_panes(at) -> list[tuple]:
    """STAGE2_PANES with its clock times turned into instants by `at` (a test's own)."""
    return [(n, total, at(start), index, timing, retraction, at(emit))
            for n, total, start, index, timing, retraction, emit in STAGE2_PANES]

"""Conformance: every figure 6-14 of the Dataflow paper, from sqlflow/data/paper_example.json.

Values, windows, order within an instant, retraction signs and fire times must all match.
Each figure runs both through the engine as dispatched and through the per-key reference loop.
"""
import pytest

from sqlflow import ast
from sqlflow.time import MINUTE

from .paper import (EARLY_LATE, D, actual_panes, expected_kinds, expected_panes, heuristic_watermark,
                    micro_batch_inputs, run)

A = ast.AccumulationMode.ACCUMULATING
DISC = ast.AccumulationMode.DISCARDING
RETR = ast.AccumulationMode.ACCUMULATING_AND_RETRACTING
EVERY_MINUTE = ast.Repeat(ast.Period(D(MINUTE)))
TWO_MINUTES = ast.Fixed(D(2 * MINUTE))


def check(n, result, *, kinds=True):
    assert actual_panes(result.panes) == expected_panes(n)
    if kinds:
        got = [None if r else k for k, r in zip(result.panes["pane_timing"],
                                                result.panes.get("is_retraction", [False] * len(result.panes)))]
        assert got == expected_kinds(n)
    assert result.metrics["dropped_too_late"] == 0


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_6_classic_batch(reference):
    check(6, run(ast.Global(), None, A, replay=False, reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_7_global_period_accumulating(reference):
    check(7, run(ast.Global(), EVERY_MINUTE, A, replay=True, reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_8_global_period_discarding(reference):
    check(8, run(ast.Global(), EVERY_MINUTE, DISC, replay=True, reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_9_global_count_discarding(reference):
    check(9, run(ast.Global(), ast.Repeat(ast.Count(2)), DISC, replay=True, reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_10_fixed_batch(reference):
    check(10, run(TWO_MINUTES, None, A, replay=False, reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_11_fixed_micro_batch(reference):
    rows, rounds = micro_batch_inputs()
    result = run(TWO_MINUTES, None, A, replay=True, timeline=rounds, rows=rows, reference=reference)
    check(11, result, kinds=False)  # the paper's per-round watermark makes kinds meaningless here


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_12_fixed_streaming(reference):
    check(12, run(TWO_MINUTES, None, A, replay=True, timeline=heuristic_watermark(), reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_13_fixed_streaming_early_late(reference):
    check(13, run(TWO_MINUTES, EARLY_LATE, A, replay=True, timeline=heuristic_watermark(), reference=reference))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_figure_14_sessions_retracting(reference):
    result = run(ast.Sessions(D(MINUTE)), EARLY_LATE, RETR, replay=True, timeline=heuristic_watermark(),
                 reference=reference)
    check(14, result)
    # the net of all panes is the final answer: 39 + 12
    signed = sum(v for _, _, v, _ in actual_panes(result.panes))
    assert signed == 51


def test_figure_13_sugar_is_the_same_trigger():
    sugar = ast.WatermarkEarlyLate(early=ast.Period(D(MINUTE)))
    assert actual_panes(run(TWO_MINUTES, sugar, A, replay=True, timeline=heuristic_watermark()).panes) == \
        expected_panes(13)

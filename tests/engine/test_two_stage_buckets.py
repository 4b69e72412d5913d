"""The second stage's watermark from the reports of several first-stage buckets (udfs/stage_reports.py):
a first stage split into hash buckets of keys, each advanced on its own, reporting after every
call, gives the second stage the output watermark of one stage over all keys (the running maximum
of min(W, Engine.held)), batch by batch; reports arrive shuffled, some buckets called twice per
batch (rows, then timer: the later report wins). Every bucket runs in every batch, as on Spark
(heartbeats in a batch with data, the poll timer in one that only moves the watermark)."""
import pickle

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from sqlflow.columns import ARRIVAL_TIME
from sqlflow.engine.watermarks import Timeline
from sqlflow.time import NEG_INF, POS_INF
from sqlflow.udfs.stage_reports import DONE, FROM, HELD, SEQ, TIME, WM, Reports

from sqlflow import ast

from .strategies import durations, inputs, triggers
from .test_two_stage_stream import SETTINGS, split, stage1_engine

#: retracting sessions: where the output watermark can be below W (elsewhere it is W)
RETRACTING = ast.AccumulationMode.ACCUMULATING_AND_RETRACTING


@SETTINGS
@given(inputs(max_rows=30), st.builds(ast.Sessions, durations(1, 8)), triggers, st.sampled_from([0, 25, 1000]),
       st.lists(st.integers(0, 400), min_size=1, max_size=8), st.integers(1, 3), st.randoms(use_true_random=False))
def test_reports_of_buckets_give_the_output_watermark_of_all_keys(data, window, trigger, lateness, extra_cuts, n1,
                                                                  rnd):
    rows, iwm = data
    if type(iwm) is not Timeline or not len(rows):
        return
    last = int(rows[ARRIVAL_TIME].max())
    cuts = sorted({c for c in extra_cuts if c < last} | {last})
    rows, batch_of, marks = split(rows, iwm, cuts)
    one = stage1_engine(window, trigger, RETRACTING, lateness)
    bucket_of = rows["k"].to_numpy(np.int64) % n1
    whole, states = None, [None] * n1
    seq = [0] * n1
    wm, expected, kept, got = NEG_INF, NEG_INF, Reports.start(n1), NEG_INF
    held_before = [POS_INF] * n1
    for i, p in enumerate(cuts):
        _, whole = one.advance(whole, rows[batch_of == i], p=p, wm_prev=wm, wm_new=marks[i])
        expected = max(expected, min(marks[i], one.held(whole)))
        reports = []
        for b in range(n1):
            mine = rows[(batch_of == i) & (bucket_of == b)]
            if rnd.random() < 0.5:  # called twice: an earlier call reported the state before the batch
                seq[b] += 1
                reports.append((b, seq[b], wm, held_before[b], p, False))
            _, states[b] = one.advance(states[b], mine, p=p, wm_prev=wm, wm_new=marks[i])
            states[b] = pickle.loads(pickle.dumps(states[b]))
            seq[b] += 1
            held_before[b] = one.held(states[b])
            reports.append((b, seq[b], marks[i], held_before[b], p, False))
        rnd.shuffle(reports)
        kept, batch_time = kept.merge(pd.DataFrame(reports, columns=[FROM, SEQ, WM, HELD, TIME, DONE]))
        assert batch_time == (p if reports else None)
        got = kept.watermark(got)
        wm = marks[i]
        assert got == expected, (i, p)
    assert kept.seq.min() >= 0 and not kept.finished

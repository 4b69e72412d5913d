"""`GROUP BY ()` on a stream: one group, as without GROUP BY, on both streaming operators."""
import json
import os
import time

import pytest

import sqlflow
from sqlflow.spark import streaming as S


@pytest.mark.parametrize("operator", ["native", "stateful"])
def test_the_empty_grouping_set_on_a_stream(spark, tmp_path, operator):
    directory = tmp_path / "in"
    directory.mkdir()
    rows = [{"user_id": u, "ts": f"2024-03-01T08:0{m}:00Z"} for u, m in
            [("a", 0), ("b", 0), ("a", 1), ("c", 3), ("a", 4)]]
    path = directory / "part-0.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stamp = int(time.time()) - 1000
    os.utime(path, (stamp, stamp))
    # the stateful operator finishes the input (every window emitted); Spark's native one emits the
    # windows the watermark passed (docs/streaming.md)
    stateful = operator == "stateful"
    keys = {S.CONF_OPERATOR: operator, **({S.CONF_FINISH_DIR: str(tmp_path / "finish")} if stateful else {})}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        spark.readStream.schema("user_id STRING, ts TIMESTAMP").json(str(directory)) \
            .createOrReplaceTempView("grouping_stream")
        df = sqlflow.sql(spark, "SELECT COUNT(*) AS n FROM grouping_stream WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                                "GROUP BY () WINDOW FIXED(SIZE 2m)")
        assert [s.operator for s in S.pane_streams(df)] == [operator]
        S.start(df, format="memory", query_name=f"grouping_out_{operator}", available_now=True, finish=stateful)
        got = sorted((r.window_start.minute, r.n) for r in spark.table(f"grouping_out_{operator}").collect())
    finally:
        for k in keys:
            spark.conf.unset(k)
    # the watermark ends at 08:03:59: natively only [08:00, 08:02) has closed
    assert got == ([(0, 3), (2, 1), (4, 1)] if stateful else [(0, 3)])

"""PySpark logs every AnalysisException that has a query context, even a caught one, through
loggers that sqlflow quiets by name while it asks Spark to analyse its own queries
(sqlflow/spark/analysis.py; docs/spark-internals.md, 8). PySpark creates them as its own logger
class and calls them with keyword arguments a plain `logging.Logger` does not take.

In a fresh interpreter: other tests (the magic's) may have created or quieted these loggers in
this one.
"""
import json
import subprocess
import sys

SCRIPT = """
import json, logging
from pyspark.errors import AnalysisException
from sqlflow.spark.session import local_session

spark = local_session(app_name="sqlflow-upstream-logging")
records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.levelname, record.getMessage()))

assert "SQLQueryContextLogger" not in logging.Logger.manager.loggerDict
try:
    spark.sql("SELECT no_such_column FROM range(1)").collect()
except AnalysisException as error:
    first = error.getCondition()
logger = logging.getLogger("SQLQueryContextLogger")
logger.addHandler(Keep())
try:
    spark.sql("SELECT no_such_column FROM range(1)").collect()
except AnalysisException:
    pass
print(json.dumps({"condition": first, "class": type(logger).__name__, "records": records}))
"""


def test_analysis_errors_are_logged_by_pysparks_query_context_logger(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["condition"] == "UNRESOLVED_COLUMN.WITH_SUGGESTION"
    assert got["class"] == "PySparkLogger"  # created by PySpark, on the first such error
    assert [level for level, _ in got["records"]] == ["ERROR"]
    assert "no_such_column" in got["records"][0][1]

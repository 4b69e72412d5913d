"""PySpark logs every AnalysisException that has a query context, even a caught one, through
loggers that sqlflow quiets by name while it asks Spark to analyse its own queries
(sqlflow/spark/analysis.py; docs/spark-internals.md, 8). PySpark creates them as its own logger
class and calls them with keyword arguments a plain `logging.Logger` does not take.

On the shared session, with the loggers as a fresh interpreter has them (not created yet):
other tests (the magic's) create and quiet them in this process.
"""
import logging

from pyspark.errors import AnalysisException


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


def test_analysis_errors_are_logged_by_pysparks_query_context_logger(spark, no_query_context_loggers):
    assert "SQLQueryContextLogger" not in logging.Logger.manager.loggerDict
    try:
        spark.sql("SELECT no_such_column FROM range(1)").collect()
    except AnalysisException as error:
        first = error.getCondition()
    logger = logging.getLogger("SQLQueryContextLogger")
    keep = Keep()
    logger.addHandler(keep)
    try:
        spark.sql("SELECT no_such_column FROM range(1)").collect()
    except AnalysisException:
        pass
    finally:
        logger.removeHandler(keep)
    assert first == "UNRESOLVED_COLUMN.WITH_SUGGESTION"
    assert type(logger).__name__ == "PySparkLogger"  # created by PySpark, on the first such error
    assert [level for level, _ in keep.records] == ["ERROR"]
    assert "no_such_column" in keep.records[0][1]

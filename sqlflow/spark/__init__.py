"""Spark integration: sessions, the bounded path (`sqlflow.sql`, replays) and the streaming path.

Importing this package is cheap; submodules import pyspark themselves.
"""

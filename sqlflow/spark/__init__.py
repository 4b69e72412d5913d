"""Spark integration: sessions, and (later) the bounded and streaming execution paths.

Importing this package is cheap; submodules import pyspark themselves.
"""

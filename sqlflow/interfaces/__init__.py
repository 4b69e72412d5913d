"""The ways in: the `sqlflow` command (`cli`) and the Jupyter magics (`magic`).

Both run statements through one loop, `statements`: split a script or cell, parse each
statement, run it as sqlflow's SQL scripts do, classify what came back, and turn any failure
into an error located in the script. The front ends only render: spark-sql's text output for the
command, tables and live stream views for the notebook.
"""

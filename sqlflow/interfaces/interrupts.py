"""Ctrl-C (or the notebook's stop button) while Spark works: cancel Spark's jobs, stop streams.

py4j talks to the JVM over one connection per thread, so PySpark's own SIGINT handler, which
calls cancelAllJobs from inside the interrupted call, fails with a reentrant call. Here the
statement runs in a worker thread and the waiting main thread, whose connection is free, cancels.
"""
from __future__ import annotations

from typing import Any

import signal
import threading
import time


def interruptible(fn, cancel, *, grace: float = 30.0, tick=None, every: float = 1.0):
    """fn() run in a worker thread while this (main) thread waits; a Ctrl-C meanwhile calls
    cancel() from this thread, waits for fn to give up (at most `grace` seconds) and raises
    KeyboardInterrupt. `tick()`, if given, is called from this thread about every `every` seconds
    meanwhile. Outside the main thread (no signals there), fn() simply runs.

    >>> interruptible(lambda: 6 * 7, cancel=lambda: None)
    42
    """
    if threading.current_thread() is not threading.main_thread():
        return fn()
    box: dict = {}
    done = threading.Event()
    interrupted = threading.Event()

    def target():
        # SIGINT stays blocked here and in the threads started from here (py4j's, when the session
        # starts in this thread): the OS then delivers Ctrl-C to the main thread, whose readline
        # would otherwise sleep through a signal another thread took.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            box["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = error
        finally:
            done.set()

    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        threading.Thread(target=target, name="sqlflow-statement", daemon=True).start()
        next_tick = time.monotonic() + every
        while not done.wait(0.1):
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + every
            if interrupted.is_set():
                cancel()
                done.wait(grace)
                raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, previous)
    if "error" in box:
        raise box["error"]
    return box.get("value")


class interrupt_flag:
    """A context in which Ctrl-C only sets `self.is_set()` (checked between polls of a running
    stream: raising inside a py4j call would break its connection). Only the main thread gets
    signals; elsewhere the flag is never set."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: Any = None  # the SIGINT handler to restore
        self._main = threading.current_thread() is threading.main_thread()

    def is_set(self) -> bool:
        return self._event.is_set()

    def __enter__(self) -> "interrupt_flag":
        if self._main:
            self._previous = signal.signal(signal.SIGINT, lambda signum, frame: self._event.set())
        return self

    def __exit__(self, *exc) -> None:
        if self._main:
            signal.signal(signal.SIGINT, self._previous)


def cancel_all(spark) -> None:
    """Cancel every running job of `spark` and stop its streaming queries."""
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception:  # noqa: BLE001 - best effort: the session may be going away
        pass
    for query in list(spark.streams.active):
        try:
            query.stop()
        except Exception:  # noqa: BLE001
            pass

"""Child processes a command starts, and the command's own end on Ctrl-C or SIGTERM.

A command that measures commits (``bisect``, ``ab``) starts processes that start processes (git, a shell, pytest).
Each is started in a process group of its own (``run_group``, ``end_group``), so a timeout or an interruption ends
the whole group, grandchildren included, never the direct child alone. ``interruptible``: SIGTERM becomes an
exception, as Ctrl-C is, so the command's ``finally`` blocks run (worktrees removed, children ended) and it ends with
one line (``cli.main``), never a traceback. Standard library only.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

#: Seconds a group gets between SIGTERM and SIGKILL.
GRACE_S = 5.0


class Terminated(KeyboardInterrupt):
    """The command was sent SIGTERM: it stops as on Ctrl-C (``KeyboardInterrupt``), cleaning up on the way out."""


@contextmanager
def interruptible() -> Iterator[None]:
    """For the block, SIGTERM raises ``Terminated`` and SIGINT ``KeyboardInterrupt``; after the first of them both
    are ignored, so the clean-up they start is not cut short by a second. The handlers before are restored after.
    Outside the main thread (an in-process caller's worker), nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        for name in (signal.SIGINT, signal.SIGTERM):
            signal.signal(name, signal.SIG_IGN)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    before = {name: signal.signal(name, stop) for name in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except BaseException:
        for pool in list(_POOLS):  # a pool whose owner was not told (its generator not closed yet) ends here
            end_pool(pool)
        raise
    finally:
        for name, handler in before.items():
            signal.signal(name, handler)


def end_group(process: subprocess.Popen[Any], grace_s: float = GRACE_S) -> None:
    """End ``process`` (started with ``start_new_session=True``) and every process of its group: SIGTERM, and
    SIGKILL to what is left once the leader has ended or ``grace_s`` has passed."""
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _signal_group(group: int, sent: signal.Signals) -> None:
    try:
        os.killpg(group, sent)
    except (ProcessLookupError, PermissionError):
        pass  # the group has ended


def run_group(argv: Sequence[str] | str, timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(argv, capture_output=True, …)`` in a process group of its own: on a timeout
    (``subprocess.TimeoutExpired``, raised after) or an interruption the whole group is ended (``end_group``)."""
    with subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          **kwargs) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except BaseException:
            end_group(process)
            process.communicate()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


#: The signals ``interruptible`` turns into exceptions.
_STOPPING = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def forking() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back while a pool forks its workers (``ProcessPoolExecutor.submit`` forks them):
    an exception raised inside the fork's own handlers (``logging``'s lock, released after the fork) would be
    printed as ignored, with a traceback, and lost. The signal is handled as the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def quiet_worker() -> None:
    """In a worker of a process pool (its initializer): Ctrl-C, which reaches the whole process group, is the
    parent's to handle (it ends the workers, ``end_pool``), a SIGTERM handler inherited through fork is put back to
    the default, and the signals ``forking`` held back in the parent are let through again."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)


#: Every process pool a command started (``pooled``): an interrupted command ends those still running, wherever the
#: interruption reached it.
_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def pooled(pool: Any) -> Any:
    """``pool`` (a ``ProcessPoolExecutor``), registered so that ``interruptible`` ends it on the way out."""
    _POOLS.add(pool)
    return pool


def end_pool(pool: Any) -> None:
    """Cancel what a ``ProcessPoolExecutor`` has queued and end its workers at once (Python 3.14's
    ``terminate_workers``, by hand): a command stopped early leaves no worker behind, and its exit neither hangs nor
    prints a traceback from the pool's own thread."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown forgets both
    results = getattr(pool, "_result_queue", None)
    for worker in workers:
        worker.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.join(GRACE_S)
        if worker.is_alive():
            worker.kill()
            worker.join(GRACE_S)
    # A worker ended while it wrote a result leaves half a message in the results pipe, which the pool's manager
    # thread then waits on for ever (and the interpreter's exit waits on that thread): with every worker gone, this
    # process's own copy of the pipe's writing end is the last, and closing it ends that read.
    writer = getattr(results, "_writer", None)
    if writer is not None and not any(worker.is_alive() for worker in workers):
        writer.close()
    # Once it sees the workers gone the manager thread closes its wake-up pipe; left running, it races the
    # interpreter's exit hook, which writes to that pipe ("Exception ignored ... Bad file descriptor").
    if manager is not None:
        manager.join(GRACE_S)

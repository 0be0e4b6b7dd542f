"""Run a function in a spawned child, whose death (a Metal assertion, the OOM killer) is one error."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from mpsbench.core import errors

T = TypeVar("T")


class ChildDied(RuntimeError):
    """Died without an answer: a signal or an exit."""


def call(function: Callable[..., T], *args: Any) -> T:
    """``function`` must be importable by its module's name."""
    context = multiprocessing.get_context("spawn")  # a fork would inherit the GPU context
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_answer, args=(sending, function, args))
    child.start()
    sending.close()  # the child's death then ends the pipe
    try:
        with receiving:
            answered, value = receiving.recv()
    except EOFError:
        child.join()
        code = child.exitcode or 0
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        raise ChildDied(f"{function.__name__} died in its child process ({how})") from None
    child.join()
    if answered:
        return value  # type: ignore[no-any-return]
    raise value


def _answer(sending: Connection, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        answer = (True, function(*args))
    except BaseException as exc:
        answer = (False, exc)
    try:
        sending.send(answer)
    except Exception:  # an unpicklable exception
        what = f"{type(answer[1]).__name__}: {errors.first_line(answer[1])}"
        sending.send((False, RuntimeError(what)))

"""The command line's one error boundary: every failure ends as one short message and an exit status.

Three kinds of failure, told apart by type:

* **user errors** — :class:`veilbench.validation.UsageError` (and its subclasses
  ``ValidationError``, ``ConfigError``), raised by the library, by a stage or by a Prefect task of
  a stage: the message names the field or file and what is allowed; exit status **2**;
* **environment errors** — ``OSError`` (a file that cannot be written, a full disk, a port in
  use) and a failed Prefect server: one line naming the file or the service; exit status **1**;
* anything else is a bug: one line with the exception's type and message; exit status **1**.

``--debug`` (or ``VEILBENCH_DEBUG=1``, which ``--debug`` exports to the command's child processes)
re-raises instead, so the full traceback is printed. A Ctrl-C ends with status 130 and one line.
Without ``--debug`` Prefect's own failure logs (a failed task run, the flow run that failed with
it: the same error again, with its traceback) are not printed, so a stage's error reaches the user
exactly once. The ``python -m flows.<stage>`` and ``python -m flows.benchmark`` entry points (the
processes of ``dvc repro`` and of the Dask path) end the same way (:func:`run_entry`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import click
import typer.core
from rich.console import Console
from rich.markup import escape

from tasks.environment import pinned_environment

#: Longest message printed (characters); the rest is elided with a count.
MAX_MESSAGE_CHARS = 2000
#: Most lines printed of a multi-line message (a params file with many problems).
MAX_MESSAGE_LINES = 12

#: Environment variables a command sets for its own duration (the params snapshot of a run).
_COMMAND_ENV = ("VEILBENCH_PARAMS_FILE", "VEILBENCH_PARAMS_SHA256")

#: Exit statuses.
USER_ERROR, ENVIRONMENT_ERROR, INTERRUPTED = 2, 1, 130


def debug_requested(ctx: click.Context | None = None) -> bool:
    """True when ``--debug`` was given (a parameter of the root command) or ``VEILBENCH_DEBUG`` is set."""
    flag = bool(ctx is not None and ctx.find_root().params.get("debug"))
    return flag or os.environ.get("VEILBENCH_DEBUG", "").lower() in ("1", "true", "yes")


def shorten(message: str) -> str:
    """``message`` cut to :data:`MAX_MESSAGE_LINES` lines and :data:`MAX_MESSAGE_CHARS` characters."""
    lines = message.strip().splitlines() or [""]
    if len(lines) > MAX_MESSAGE_LINES:
        lines = lines[:MAX_MESSAGE_LINES] + [f"  … and {len(lines) - MAX_MESSAGE_LINES} more"]
    text = "\n".join(lines)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f" … ({len(text) - MAX_MESSAGE_CHARS} more characters)"
    return text


def _is_server_failure(exc: BaseException) -> bool:
    """A Prefect API that stopped answering (connection refused, a dead server)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"ConnectError", "ConnectTimeout", "RemoteProtocolError", "PrefectServerDied"})


def classify(exc: BaseException) -> tuple[int, str]:
    """(exit status, one message) for an exception that reached the command line."""
    from veilbench.validation import UsageError

    if isinstance(exc, UsageError):
        return USER_ERROR, shorten(str(exc))
    if _is_server_failure(exc):
        return ENVIRONMENT_ERROR, shorten(f"the Prefect server stopped answering ({type(exc).__name__}: {exc}); "
                                          f"see .prefect/server.log and run again")
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        what = exc.strerror or str(exc)
        return ENVIRONMENT_ERROR, shorten(f"{where}{what} ({type(exc).__name__}); fix the file or folder and run again")
    try:
        from dvc.exceptions import DvcException
    except ImportError:  # pragma: no cover - dvc is a dependency
        DvcException = ()  # noqa: N806
    if DvcException and isinstance(exc, DvcException):
        return ENVIRONMENT_ERROR, shorten(f"DVC: {exc}")
    return ENVIRONMENT_ERROR, shorten(f"{type(exc).__name__}: {exc} (an internal error; rerun with --debug for "
                                      f"the traceback)")


class _DropRunFailures(logging.Filter):
    """Drop a run-failure log (level ERROR and above: the error the boundary prints once, again);
    keep other records, without any traceback attached to them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return False
        record.exc_info, record.exc_text = None, None
        return True


#: Prefect's loggers that log every failed task and flow run (with its traceback).
_PREFECT_RUN_LOGGERS = ("prefect.task_runs", "prefect.flow_runs", "prefect.task_engine", "prefect.flow_engine")


def quiet_prefect_tracebacks() -> None:
    """Drop Prefect's run-failure logs (the boundary prints the error once)."""
    for name in _PREFECT_RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropRunFailures) for f in logger.filters):
            logger.addFilter(_DropRunFailures())


def run_entry(body: Any, debug: bool | None = None) -> int:
    """The error boundary of a ``python -m flows.…`` entry point: call ``body()`` and return its exit
    status (0 when it returns None), each failure ending as one ``error:`` line on stderr and the
    status of :func:`classify` (130 for Ctrl-C, 143 for SIGTERM: 128 + the signal, which
    :func:`terminate_on_sigterm` makes a ``KeyboardInterrupt`` too); with ``debug`` (default:
    :func:`debug_requested`) an exception propagates with its traceback."""
    import signal
    import sys

    debug = debug_requested() if debug is None else debug
    if not debug:
        quiet_prefect_tracebacks()
    received: list[int] = []
    previous = terminate_on_sigterm(received)
    try:
        result = body()
        return 0 if result is None else int(result)
    except KeyboardInterrupt:
        print("interrupted: stopped", file=sys.stderr, flush=True)
        return 128 + (received[0] if received else int(signal.SIGINT))
    except Exception as exc:  # noqa: BLE001 - the boundary
        if debug:
            raise
        code, message = classify(exc)
        print(f"error: {message}", file=sys.stderr, flush=True)
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def terminate_on_sigterm(received: list[int]) -> Any:
    """In the main thread: SIGTERM raises ``KeyboardInterrupt`` (recording the signal in
    ``received``), as Ctrl-C does; returns the previous handler (None elsewhere, where nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


class ErrorBoundary(typer.core.TyperGroup):
    """A Typer group whose commands' exceptions end as one message and an exit status (see the
    module docstring); click's own usage errors and exits pass through unchanged."""

    def invoke(self, ctx: click.Context) -> Any:
        debug = debug_requested(ctx)
        if not debug:
            quiet_prefect_tracebacks()
        # a command's params snapshot ends with the command; --debug reaches its child processes
        with pinned_environment(_COMMAND_ENV, **({"VEILBENCH_DEBUG": "1"} if debug else {})):
            try:
                return super().invoke(ctx)
            except (click.exceptions.Exit, click.ClickException, click.Abort):
                raise
            except KeyboardInterrupt:
                Console(stderr=True).print("[red]interrupted[/red]: stopped; outputs of finished stages are kept")
                ctx.exit(INTERRUPTED)
            except Exception as exc:  # noqa: BLE001 - the boundary
                if debug_requested(ctx):
                    raise
                code, message = classify(exc)
                Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(message)}")
                ctx.exit(code)

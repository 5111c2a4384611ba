"""Errors the user sees: one line that names the file, node, op or shape at fault."""

from __future__ import annotations

# Exit codes of the command line; documented in README.md.
EXIT_OK = 0
EXIT_USAGE = 2  # argparse's own code for a bad command line
EXIT_BAD_MODEL = 3  # the input model cannot be read or is not a valid DAG
EXIT_VERIFY_FAILED = 4  # the rewritten model failed the checker or did not match
EXIT_WRITE_FAILED = 5  # the output could not be written
EXIT_INTERNAL = 70  # a bug in hexfuse-onnx (EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
EXIT_STDOUT_CLOSED = 141  # the reader of stdout went away (`... | head`): 128 + SIGPIPE


def stdout_closed() -> int:
    """The exit code after a BrokenPipeError on stdout; points stdout at /dev/null first so that
    the interpreter's own flush at exit does not fail a second time."""
    import os
    import sys

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_STDOUT_CLOSED


class HexfuseError(Exception):
    """An error with a message meant for the user and the exit code it maps to."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NothingToFuse(HexfuseError):
    """The model holds no op of the default ONNX domain (an ai.onnx.ml classifier alone): not a bad model, and no
    pair; exit 0, nothing written, as "no pair qualifies"."""

    exit_code = EXIT_OK


class UsageError(HexfuseError):
    """The command line or an API argument is wrong (a bad --shape or --kinds value, ...)."""

    exit_code = EXIT_USAGE


class ModelError(HexfuseError):
    """The input model is missing, unreadable, or not a valid graph."""

    exit_code = EXIT_BAD_MODEL


class VerificationError(HexfuseError):
    """The rewritten model failed the checker or did not match the original."""

    exit_code = EXIT_VERIFY_FAILED


class WriteError(HexfuseError):
    """The output could not be written."""

    exit_code = EXIT_WRITE_FAILED


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message on one line (its type when it has none), cut at `limit` characters: what a
    one-line error quotes from a library's multi-line message. Its lines are joined, not dropped: ORT
    gives the dims it got and expected on the line after "Got invalid dimensions for input: x"."""
    lines = [line.strip() for line in (str(exc).strip() or type(exc).__name__).splitlines()]
    return " ".join(line for line in lines if line)[:limit]

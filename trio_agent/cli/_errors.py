"""The CLI's one exit path: an error to print and the status to leave with."""

from __future__ import annotations


class CliExit(Exception):
    """Leave with ``status`` after printing ``trio-agent: code: message`` (and ``hint:``)."""

    def __init__(self, status: int, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint

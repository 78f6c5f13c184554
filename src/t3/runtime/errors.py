"""Errors raised by the runtime."""

from __future__ import annotations


class PeerError(RuntimeError):
    """A peer failed, closed its connection or stopped responding during an operation.

    The message names the operation, the step and the peer rank. After this error the process
    group must be considered broken (gloo closes the connection on a timed-out receive; NCCL
    communicators must be aborted): destroy it and create a new one before communicating again.
    """

    def __init__(self, message: str, *, op: str, peer: int | None, timed_out: bool) -> None:
        super().__init__(message)
        self.op = op
        self.peer = peer
        self.timed_out = timed_out

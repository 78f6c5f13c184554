"""Errors raised by the runtime."""

from __future__ import annotations


class PeerError(RuntimeError):
    """The ranks of a group could not complete an operation together.

    Two kinds, told apart by :attr:`group_usable`:

    - **disagreement** (``group_usable`` True): the ranks compared what they were about to do
      before any data moved and found a difference; :attr:`field` names the first field that
      differs, :attr:`values` maps every rank to its value of it and :attr:`differing` lists every
      field that differs. Every rank raises the same error; nothing was sent or received and the
      process group stays usable.
    - **peer failure** (``group_usable`` False): a peer failed, closed its connection or stopped
      responding. The message names the operation, the step and the peer rank (:attr:`peer`, None
      when unknown). The process group must be considered broken (gloo closes the connection on a
      timed-out receive; NCCL communicators must be aborted): destroy it and create a new one
      before communicating again.
    """

    def __init__(
        self,
        message: str,
        *,
        op: str,
        peer: int | None,
        timed_out: bool,
        group_usable: bool = False,
        field: str | None = None,
        values: dict[int, str] | None = None,
        differing: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.op = op
        self.peer = peer
        self.timed_out = timed_out
        self.group_usable = group_usable
        self.field = field
        self.values = dict(values or {})
        self.differing = differing

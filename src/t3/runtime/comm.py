"""Point-to-point transfers with timeouts, and the communication thread.

Only ``isend`` / ``irecv`` are used on the tile-triggered path: they exist on gloo and NCCL, and
matching is by (peer, tag), so no global issue order is needed between ranks beyond every rank
running the same algorithm. Every wait is bounded by ``timeout`` and turns a failure into a
:class:`PeerError` that names the operation, the step and the peer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from t3.runtime.errors import PeerError
from t3.runtime.tracker import TileTracker, TrackerAborted


@dataclass
class Pending:
    work: dist.Work | None  # None only in error reports of a transfer that failed to issue
    peer: int
    kind: str  # "send" or "receive"
    what: str
    tensor: torch.Tensor
    done: bool = False


class Peers:
    """One rank's view of a process group for one operation."""

    def __init__(self, group: dist.ProcessGroup | None, op: str, timeout: float) -> None:
        self.group = group
        self.op = op
        self.timeout = timeout
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.bytes_sent = 0
        self.wait_s = 0.0
        self.progress = 0  # completed waits: lets the main thread tell "slow" from "stuck"

    def _global(self, r: int) -> int:
        return r if self.group is None else dist.get_global_rank(self.group, r)

    def isend(self, t: torch.Tensor, peer: int, tag: int, what: str) -> Pending:
        try:
            work = dist.isend(t, self._global(peer), group=self.group, tag=tag)
        except Exception as err:  # a connection already closed fails at issue time
            raise self._error(Pending(None, peer, "send", what, t), err, 0.0) from err
        self.bytes_sent += t.numel() * t.element_size()
        return Pending(work, peer, "send", what, t)

    def irecv(self, t: torch.Tensor, peer: int, tag: int, what: str) -> Pending:
        try:
            work = dist.irecv(t, self._global(peer), group=self.group, tag=tag)
        except Exception as err:
            raise self._error(Pending(None, peer, "receive", what, t), err, 0.0) from err
        return Pending(work, peer, "receive", what, t)

    def wait(self, p: Pending) -> torch.Tensor:
        if p.done:
            return p.tensor
        assert p.work is not None
        t0 = time.perf_counter()
        try:
            ok = p.work.wait(timeout=timedelta(seconds=self.timeout))
        except Exception as err:  # gloo raises RuntimeError for timeouts and closed connections
            raise self._error(p, err, time.perf_counter() - t0) from err
        if ok is False:
            raise self._error(p, None, time.perf_counter() - t0)
        self.wait_s += time.perf_counter() - t0
        self.progress += 1
        p.done = True
        return p.tensor

    def _error(self, p: Pending, err: Exception | None, waited: float) -> PeerError:
        text = "" if err is None else str(err).strip().splitlines()[0]
        timed_out = err is None or "timed out" in text.lower() or "timeout" in text.lower()
        direction = "from" if p.kind == "receive" else "to"
        if timed_out:
            why = (
                f"no progress within the timeout of {self.timeout:.1f} s "
                f"(rank {p.peer} dead, hung, or not calling the same operation)"
            )
        else:
            why = f"the connection to rank {p.peer} failed after {waited:.2f} s ({text})"
        msg = (
            f"t3.runtime.{self.op} on rank {self.rank}: {p.kind} of {p.what} {direction} rank {p.peer}: {why}. "
            "The process group is unusable now; destroy and re-create it."
        )
        return PeerError(msg, op=self.op, peer=p.peer, timed_out=timed_out)


class CommThread:
    """Runs a communication body beside the GEMM loop; failures abort the tracker at once."""

    def __init__(
        self, body: Callable[[], None], tracker: TileTracker, name: str, device: torch.device | None = None
    ) -> None:
        self._body = body
        # On a GPU, transfers and reductions issued from this thread must be ordered after the
        # GEMM tiles the main thread enqueued: run them on the main thread's current stream
        # (ProcessGroupNCCL makes its stream wait on the caller's current stream).
        self._stream = (
            torch.cuda.current_stream(device) if device is not None and device.type == "cuda" else None
        )
        self._tracker = tracker
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            if self._stream is not None:
                with torch.cuda.stream(self._stream):
                    self._body()
            else:
                self._body()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            self.error = err
            self._tracker.abort(err)
        finally:
            self._done.set()

    def start(self) -> None:
        self._thread.start()

    def join(self, peers: Peers, timeout: float) -> float:
        """Wait until the body finished, as long as it makes progress; return the time waited.

        Every wait of the body is bounded by ``timeout`` already; the extra second lets its more
        precise error (naming the transfer and peer) arrive before this backstop fires.
        """
        t0 = time.perf_counter()
        last = peers.progress
        while not self._done.wait(timeout + 1.0):
            if peers.progress == last:
                raise PeerError(
                    f"t3.runtime.{peers.op} on rank {peers.rank}: communication made no progress within "
                    f"{timeout:.1f} s. The process group is unusable now; destroy and re-create it.",
                    op=peers.op,
                    peer=None,
                    timed_out=True,
                )
            last = peers.progress
        waited = time.perf_counter() - t0
        self.raise_if_failed()
        return waited

    def raise_if_failed(self) -> None:
        err = self.error
        if err is None:
            return
        if isinstance(err, TrackerAborted) and err.__cause__ is not None:
            raise err.__cause__
        raise err

"""Work done beside this process in a forked one, its result sent back pickled through a private pipe.

The journal's second half, the camera's probe (beside the journal) and the episode video (beside the data
table) run this way. A forked process shares nothing with this
one's interpreter lock, so its Python work (the video's loop over packets, the journal's lines) does not
wait for this process's and this process's does not wait for it. A child that fails for any reason (an
exception, the out-of-memory killer, a signal) gives ``None``: the caller does the work in its own process
instead, where a real error is raised with its message, as if no child had been started. A child dies with
the process that forked it (``die_with_parent``): a worker killed half-way leaves nothing still writing.
"""

import contextlib
import os
import pickle
import signal
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any


def die_with_parent(parent: int) -> bool:
    """Have the kernel kill this process when its parent ends (Linux's ``PR_SET_PDEATHSIG``; nothing where it
    does not exist). False when the parent (``parent``, its pid) has ended already."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    return os.getppid() == parent


def usable() -> bool:
    """Whether a forked helper can run beside this process: ``os.fork`` exists and two cores do."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) >= 2


class Child:
    """A forked process running one call (which returns something other than None); ``join`` gives its
    result, ``stop`` ends it."""

    def __init__(self, work: Callable[[], Any]):
        read_end, write_end = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: work, send the pickled result, leave without running the parent's exit code
            status = 1
            try:
                os.close(read_end)
                if not die_with_parent(parent):
                    return
                result = work()
                with os.fdopen(write_end, "wb") as out:
                    out.write(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        self.pid: int | None = pid
        self._read_end = read_end

    def join(self) -> Any | None:
        """The child's result, or None when it failed (it has then exited)."""
        assert self.pid is not None, "joined twice"
        with os.fdopen(self._read_end, "rb") as result:
            payload = result.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if status != 0 or not payload:
            return None
        return pickle.loads(payload)  # noqa: S301 - our own child's output, through a private pipe

    def stop(self) -> None:
        """Kill the child (when still running) and reap it."""
        if self.pid is None:
            return
        os.close(self._read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self.pid = None


class Job:
    """``work`` (which returns something other than None) done beside this process: in a forked process
    when ``fork`` is true and ``usable()``; else on a thread of ``pool`` when one is given, or here when its
    result is asked for. A forked process that fails is replaced by ``work`` done here, after ``clean``
    (which removes what the process left), so an error, if any, is raised here with its message."""

    def __init__(
        self,
        work: Callable[[], Any],
        *,
        fork: bool,
        pool: Executor | None = None,
        clean: Callable[[], None] | None = None,
    ):
        self._work = work
        self._clean = clean
        self._child = Child(work) if fork and usable() else None
        self._future = pool.submit(work) if self._child is None and pool is not None else None

    def result(self) -> Any:
        if self._future is not None:
            return self._future.result()
        if self._child is None:
            return self._work()
        done = self._child.join()
        if done is None:  # the process failed: what it left goes, and the work is done here
            if self._clean is not None:
                self._clean()
            done = self._work()
        return done

    def stop(self) -> None:
        """End the forked process if it still runs (the caller failed); a thread runs to its end."""
        if self._child is not None:
            self._child.stop()

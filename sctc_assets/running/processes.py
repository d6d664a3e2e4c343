"""Worker processes forked by `sctc run`, so CPU-bound stages run on more than one core.

A replay's stages and a benchmark's model-independent stages are pure CPU work (parsing published answers,
extraction, scoring, statistics), so threads cannot run two of them at once (the GIL). `WorkerPool` forks
`$SCTC_WORKER_PROCESSES` children (default: the cores this process may use, at most 4) before any thread of the
run starts, so no lock is held by a thread the child lacks; `sctc_assets.running.schedule` hands them stages.

Each child first runs `after_fork` (the runner opens its own `DagsterInstance` from the same instance ref: the same
SQLite files, written by several processes as with `sctc ui` and a daemon, never through a connection the parent
opened), then runs `work(task)` for every task the parent sends it, one at a time, and sends back the result (a task
may run part of its work in a process of its own, `in_forked_process`, so what it loads leaves with it). After each
task a worker gives the memory it freed back to the operating system, and idle workers end once no task is left for
them (`release_idle`). What a child prints (the stage lines, the assets' progress) is sent to the parent, which
prints it, so output goes wherever the parent's goes, line by line. A child exits with `os._exit` when the parent
closes its task pipe, so nothing of the parent (open connections, atexit hooks) runs a second time.

Ctrl-C reaches the children with the parent (one process group); a SIGTERM to the parent is passed on to them
(`forward_stop`); both make a child finish its stage as the parent would (stored answers kept, no new model
call) and the parent hands out no further task. A second signal ends a child at once. A child that dies fails its
task with an error naming how it ended; the others go on.
"""

from __future__ import annotations

import ctypes
import gc
import io
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sctc_assets.lib.interrupt import request_stop, stop_reason
from sctc_assets.running.concurrent import ConcurrencyError

PROCESSES_ENV = "SCTC_WORKER_PROCESSES"
MAX_DEFAULT_PROCESSES = 4
_LENGTH = struct.Struct("<Q")
T = TypeVar("T")


class WorkerProcessError(RuntimeError):
    """A task failed in a worker process, or its process ended before reporting it."""


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_processes() -> int:
    """How many worker processes `sctc run` may fork: `$SCTC_WORKER_PROCESSES`, default the usable cores (at most
    4); 1 forks none."""
    raw = os.environ.get(PROCESSES_ENV, "").strip()
    if not raw:
        return max(1, min(available_cores(), MAX_DEFAULT_PROCESSES))
    if not raw.isdigit() or int(raw) < 1:
        raise ConcurrencyError(f"${PROCESSES_ENV}={raw!r}: expected a whole number of at least 1")
    return int(raw)


@dataclass
class TaskFailed:
    """What comes back for a task that raised: the exception is not always picklable, its text is."""

    message: str


def _send(fd: int, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _receive(fd: int) -> Any:
    """The next message on a blocking pipe; None at its end."""
    header = _read_exactly(fd, _LENGTH.size)
    if header is None:
        return None
    payload = _read_exactly(fd, _LENGTH.unpack(header)[0])
    return None if payload is None else pickle.loads(payload)


class _ForwardedText(io.TextIOBase):
    """A child's stdout or stderr: each complete line goes to the parent as one message."""

    def __init__(self, fd: int, stream: str, lock: threading.Lock):
        self._fd, self._stream, self._lock, self._pending = fd, stream, lock, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            if "\n" in self._pending:
                complete, _, self._pending = self._pending.rpartition("\n")
                _send(self._fd, ("text", self._stream, complete + "\n"))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                _send(self._fd, ("text", self._stream, self._pending))
                self._pending = ""


def give_back_memory() -> None:
    """Return what this process freed to the operating system. The allocators keep freed pages for reuse, so an
    idle worker would go on holding its last stage's tables (a gigabyte after a name stage) while the others run."""
    gc.collect()
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def in_forked_process(work: Callable[[], T], after_fork: Callable[[], None] = lambda: None) -> T:
    """`work()` in a process forked for it, `after_fork` first there, so what it loads (tokenizer libraries and
    vocabularies, say) leaves with it instead of staying in a worker's memory for the rest of the run. Fork it
    from a worker between its stages, when no other thread of the worker runs; what it prints goes where this
    process's output goes. What `work` raised is raised here as a `WorkerProcessError` with its text."""
    result_read, result_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            os.close(result_read)
            after_fork()
            try:
                outcome: tuple[str, Any] = ("result", work())
            except BaseException as exc:
                outcome = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            sys.stdout.flush()
            sys.stderr.flush()
            _send(result_write, outcome)
        except BaseException:
            traceback.print_exc(file=sys.__stderr__)
            status = 1
        finally:
            os._exit(status)
    os.close(result_write)
    try:
        outcome = _receive(result_read)
    finally:
        os.close(result_read)
        _, status = os.waitpid(pid, 0)
    if outcome is None:
        raise WorkerProcessError(f"a forked process ended before reporting its result ({_ending(status)})")
    if outcome[0] == "error":
        raise WorkerProcessError(outcome[1])
    return outcome[1]


def _quiet_stop(signum: int, _frame: Any) -> None:
    if stop_reason() is not None:
        os._exit(130)
    request_stop(f"interrupted ({signal.Signals(signum).name})")


@dataclass
class _Worker:
    pid: int
    tasks: int  # the write end of its task pipe
    results: int  # the read end of its result pipe
    buffer: bytearray
    task_id: Any = None  # the task it is running; None when idle


class WorkerPool:
    """`processes` forked children running `work(task)`; see the module docstring. Use it from one thread."""

    def __init__(self, processes: int, work: Callable[[Any], Any], after_fork: Callable[[], None] = lambda: None):
        self._work, self._after_fork = work, after_fork
        self._workers: list[_Worker] = []
        self._forwarded = False
        sys.stdout.flush()
        sys.stderr.flush()  # what is buffered would otherwise be printed by every child again
        gc.freeze()  # what the parent built stays shared: the children's collections do not touch its pages
        for _ in range(processes):
            task_read, task_write = os.pipe()
            result_read, result_write = os.pipe()
            pid = os.fork()
            if pid == 0:
                for worker in self._workers:  # the pipes of the children forked before this one
                    os.close(worker.tasks)
                    os.close(worker.results)
                os.close(task_write)
                os.close(result_read)
                self._child(task_read, result_write)  # never returns
            os.close(task_read)
            os.close(result_write)
            self._workers.append(_Worker(pid, task_write, result_read, bytearray()))
        gc.unfreeze()

    @property
    def idle(self) -> int:
        """How many live workers wait for a task."""
        return sum(1 for worker in self._workers
                   if worker.task_id is None and worker.tasks >= 0 and worker.results >= 0)

    @property
    def busy(self) -> int:
        return sum(1 for worker in self._workers if worker.task_id is not None)

    def submit(self, task_id: Any, task: Any) -> None:
        """Hand `task` to an idle worker (there must be one: see `idle`)."""
        worker = next(worker for worker in self._workers
                      if worker.task_id is None and worker.tasks >= 0 and worker.results >= 0)
        worker.task_id = task_id
        try:
            _send(worker.tasks, task)
        except BrokenPipeError:  # it died: `wait` sees its result pipe end and fails the task
            pass

    def _child(self, task_read: int, result_write: int) -> None:
        status = 0
        try:
            signal.signal(signal.SIGINT, _quiet_stop)  # the parent says what stopping means, once
            signal.signal(signal.SIGTERM, _quiet_stop)
            lock = threading.Lock()
            sys.stdout = _ForwardedText(result_write, "stdout", lock)
            sys.stderr = _ForwardedText(result_write, "stderr", lock)
            self._after_fork()
            while True:
                task = _receive(task_read)
                if task is None:
                    break
                result = self._result_of(task)
                sys.stdout.flush()
                sys.stderr.flush()
                with lock:
                    _send(result_write, ("result", result))
                give_back_memory()
        except BaseException:
            traceback.print_exc(file=sys.__stderr__)
            status = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)

    def _result_of(self, task: Any) -> Any:
        try:
            return self._work(task)
        except BaseException as exc:  # reported to the parent, which fails the task with it
            return TaskFailed(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    def forward_stop(self) -> None:
        """Pass a stop request of this process on to the children, once."""
        if stop_reason() is None or self._forwarded:
            return
        self._forwarded = True
        for worker in self._workers:
            if worker.results >= 0:
                try:
                    os.kill(worker.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def wait(self, timeout: float) -> list[tuple[Any, Any]]:
        """(task id, result or `TaskFailed`) of the tasks finished within `timeout` seconds; prints what the
        children printed. A child that ended fails its task."""
        self.forward_stop()
        open_pipes = {worker.results: worker for worker in self._workers if worker.results >= 0}
        if not open_pipes:
            time.sleep(timeout)
            return []
        ready, _, _ = select.select(list(open_pipes), [], [], timeout)
        finished = []
        for fd in ready:
            worker = open_pipes[fd]
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                finished += self._ended(worker)
                continue
            worker.buffer += chunk
            while len(worker.buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(worker.buffer)
                if len(worker.buffer) < _LENGTH.size + length:
                    break
                message = pickle.loads(bytes(worker.buffer[_LENGTH.size:_LENGTH.size + length]))
                del worker.buffer[:_LENGTH.size + length]
                if message[0] == "text":
                    stream = sys.stdout if message[1] == "stdout" else sys.stderr
                    stream.write(message[2])
                    stream.flush()
                else:
                    finished.append((worker.task_id, message[1]))
                    worker.task_id = None
        return finished

    def _ended(self, worker: _Worker) -> list[tuple[Any, Any]]:
        os.close(worker.results)
        worker.results = -1
        _, status = os.waitpid(worker.pid, 0)
        worker.pid = -1
        if worker.task_id is None:
            return []
        task_id, worker.task_id = worker.task_id, None
        return [(task_id, TaskFailed(f"its worker process ended before reporting it ({_ending(status)})"))]

    def release_idle(self) -> None:
        """End the idle children (no further task will come): their memory goes back while the others finish."""
        for worker in self._workers:
            if worker.task_id is None and worker.tasks >= 0:
                os.close(worker.tasks)
                worker.tasks = -1

    def close(self) -> None:
        """End the children: each finishes its task, sees its task pipe closed and exits; then reap them."""
        for worker in self._workers:
            if worker.tasks >= 0:
                os.close(worker.tasks)
                worker.tasks = -1
        while any(worker.results >= 0 for worker in self._workers):
            self.wait(0.2)  # bounded waits: the caller's signal handlers run


def _ending(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"

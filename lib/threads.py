"""Thread pools of the current process, made on first use and made again after `fork()`.

A process forked from one that used a pool (django-q2's workers are forked from the cluster's first
process) inherits the pool object without its threads: work submitted to it would never run. A
`ProcessThreads` notices the new process id and makes the child a pool of its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor


class ProcessThreads:
    """`workers` threads named `name`-N, shared by the process's callers of `pool()`."""

    def __init__(self, *, workers: int, name: str) -> None:
        self.workers = workers
        self.name = name
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        self._lock = threading.Lock()

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pool[0] != os.getpid():
                self._pool = (os.getpid(), ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=self.name))
            return self._pool[1]

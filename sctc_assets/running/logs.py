"""`sctc run`'s Dagster logger: everything, stack traces included, into a log file; the terminal gets the lines
a person reads (progress, warnings), one line each.

Dagster's console logger prints every step failure with its full stack trace (100–240 lines for a missing
upstream folder); the runner prints the cause of each failed stage in one line itself, so the terminal leaves
Dagster's own events out. `debug=True` prints every record in full, as Dagster would.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Callable

import dagster as dg

from sctc_assets.running.dagster_internals import LOG_RECORD_METADATA_ATTR

LOGGER_KEY = "sctc"
KEEP_LOG_FILES = 20
# Dagster's own notes on the steps a failure left unrun: the runner's failure line says it already.
_SKIPPED_STEPS = re.compile(r"Dependencies for step \S+ (failed|were not executed)")


def new_log_path(folder: Path) -> Path:
    """A fresh file under `folder` for this process; older files beyond the newest `KEEP_LOG_FILES` are removed."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in sorted(folder.glob("sctc-run-*.log"))[:-(KEEP_LOG_FILES - 1) or None]:
        old.unlink(missing_ok=True)
    return folder / f"sctc-run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


class _ConsoleHandler(logging.Handler):
    """Sends what a person reads to `emit_line`: messages the assets log, not Dagster's own events."""

    def __init__(self, emit_line: Callable[[str], None], debug: bool):
        super().__init__(logging.DEBUG if debug else logging.INFO)
        self._emit_line = emit_line
        self._debug = debug

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._debug:
                self._emit_line(record.getMessage())
                return
            meta = getattr(record, LOG_RECORD_METADATA_ATTR, None) or {}
            if meta.get("dagster_event") is not None:
                return  # step and run events; failures reach the terminal as the runner's one-line causes
            message = str(meta.get("orig_message", record.getMessage())).strip()
            if _SKIPPED_STEPS.match(message):
                return
            first, _, rest = message.partition("\n")
            if record.levelno >= logging.WARNING:
                first = f"{record.levelname.lower()}: {first}" + (" (more in the log file)" if rest else "")
            self._emit_line(f"  {first}")
        except Exception:  # a logging failure must never fail a run
            self.handleError(record)


class RunLog:
    """One `sctc run`'s log: `path` (None: no file) and the terminal `console`."""

    def __init__(self, path: Path | None, console: Callable[[str], None] = print, *, debug: bool = False):
        self.path = path
        self.debug = debug
        self._logger = logging.Logger(f"sctc.run.{id(self)}", logging.DEBUG)
        self._logger.propagate = False
        self._logger.addHandler(_ConsoleHandler(console, debug))
        if path is not None:
            handler = logging.FileHandler(path, encoding="utf-8", delay=True)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            self._logger.addHandler(handler)
        self.logger_def = dg.LoggerDefinition(lambda init_context: self._logger,
                                              description="sctc run: full log to a file, short lines to the terminal")

    def write(self, text: str) -> None:
        """Add text that did not come through Dagster (a trace from outside a run) to the file."""
        if self.path is not None and text:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(text if text.endswith("\n") else text + "\n")

    def close(self) -> None:
        for handler in list(self._logger.handlers):
            handler.close()

"""The Lightning strategies' straggler line: one line in the run's log when a
window of synced steps names a late rank, or stops naming one (global zero)."""
import logging

from .reducer import straggler_line

log = logging.getLogger("gradcomm.lightning")


class StragglerLog:
    def __init__(self):
        self._reducer = None  # whose windows _windows counts (a membership builds a new one per generation)
        self._windows = 0
        self._verdict = (-1, None)

    def after_step(self, wrapper, is_global_zero):
        """Called after each optimizer step with the strategy's wrapper."""
        if not is_global_zero or wrapper is None or wrapper.reducer is None:
            return
        if wrapper.reducer is not self._reducer:
            self._reducer, self._windows = wrapper.reducer, 0
        report = wrapper.straggler_report()
        if report.windows == 0 or report.windows == self._windows:
            return
        self._windows = report.windows
        verdict = (report.late_rank, report.phase)
        if verdict != self._verdict:
            self._verdict = verdict
            log.warning(straggler_line(report))

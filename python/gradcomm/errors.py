"""gradcomm's exceptions: one class per gcommStatus_t, all deriving from Error.

Each also derives from the built-in exception a Python caller would expect
(InvalidArgumentError is a ValueError, TimeoutError a built-in TimeoutError, ...),
so ``except ValueError`` keeps working. ``status`` is the C status name and
``message`` the library's last-error message for the failed call.
"""
import builtins


class Error(RuntimeError):
    """A gradcomm call failed. ``status``: e.g. "gcommTimeout"; ``message``: why."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status
        self.message = message


class InvalidArgumentError(Error, ValueError):
    pass


class InvalidStateError(Error):
    pass


class OutOfMemoryError(Error, MemoryError):
    pass


class CudaError(Error):
    pass


class NcclError(Error):
    pass


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - mirrors gcommTimeout
    pass


class RemoteError(Error):
    pass


class AbortedError(Error):
    pass


class NotSupportedError(Error, NotImplementedError):
    pass


class InternalError(Error):
    pass


class DivergenceError(RuntimeError):
    """The divergence check found ranks whose replicas differ (no C status: the
    check itself succeeded). ``report``: the gradcomm.Divergence, the same on every
    rank; ``step``: the wrapper's synced steps when it was found."""

    def __init__(self, report, step):
        super().__init__(f"after {step} synced steps: {report}")
        self.report = report
        self.step = step


_BY_STATUS = {
    "gcommInvalidArgument": InvalidArgumentError,
    "gcommInvalidState": InvalidStateError,
    "gcommOutOfMemory": OutOfMemoryError,
    "gcommCudaError": CudaError,
    "gcommNcclError": NcclError,
    "gcommTimeout": TimeoutError,
    "gcommRemoteError": RemoteError,
    "gcommAborted": AbortedError,
    "gcommNotSupported": NotSupportedError,
    "gcommInternalError": InternalError,
}


def from_status(code, name, message):
    """The exception for a failed call (the native module raises what this returns)."""
    del code
    return _BY_STATUS.get(name, Error)(name, message)

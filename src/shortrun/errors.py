"""User-facing errors. Each message says what was wrong and what to do about it."""


class ShortrunError(Exception):
    """An error the command line reports as one line, without a traceback."""

    exit_code = 1


class ConfigError(ShortrunError):
    """A recipe, an override or a command-line option is wrong (exit code 2)."""

    exit_code = 2


class CheckpointError(ShortrunError):
    """A checkpoint file is missing, corrupt, unsafe or of another model."""


class DataError(ShortrunError):
    """A dataset file is missing or malformed."""


class DivergenceError(ShortrunError):
    """Training produced a non-finite or out-of-bound loss or energy."""

    exit_code = 3


class MissingExtraError(ShortrunError):
    """An optional dependency that this path needs is not installed; the message names the
    ``pip install 'shortrun[EXTRA]'`` that brings it."""


class InputError(ShortrunError, ValueError):
    """A public model method got input of the wrong type, shape, dtype or scale (exit code 2).

    Also a ``ValueError``, so Python callers can catch it as one."""

    exit_code = 2


class TrainingInterrupted(ShortrunError, KeyboardInterrupt):
    """SIGINT/SIGTERM stopped training after a checkpoint of the current step was written.

    A ``KeyboardInterrupt`` too, so ``except KeyboardInterrupt`` around ``Trainer.fit`` still
    catches Ctrl-C; exit code 130 (SIGINT) or 143 (SIGTERM), as a shell reports a signal.
    """

    exit_code = 130

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code

"""The mistakes a person can fix, raised by every layer (library, bench, explorer) and caught at the top.

This module imports nothing from the project, so any module may raise these without reaching up:
the command line (``cli.py``) prints one of them as one line on stderr with exit status 2, the
explorer shows it in its status line. Each class is also importable where it was first defined
(``config.ConfigError``, ``trace.TraceError``, ``presets.PresetError``, ``models.drafter.CheckpointError``,
``models.smollm2.MissingTargetError``, ``cli.UserError``).
"""
from __future__ import annotations


class UserError(Exception):
    """Anything the user can fix (a bad flag, a missing file); printed as one line."""


class ConfigError(ValueError):
    """A setting that cannot work; the message says which and why."""


class TraceError(ValueError):
    """A trace file that cannot be read; the message says what is wrong."""


class PresetError(RuntimeError):
    """A preset that is not available on this machine; the message says what to do."""


class CheckpointError(ValueError):
    """A drafter checkpoint that cannot be used; the message names the problem."""


class MissingTargetError(RuntimeError):
    """The embedded target's weights are not installed."""


# What the command line turns into one line on stderr (exit status 2) instead of a traceback.
USER_ERRORS = (UserError, ConfigError, TraceError, PresetError, CheckpointError, MissingTargetError,
               FileNotFoundError)

"""The command line's exit statuses, one home for both commands: `check` (`_cli.py`) and `port`
(`_port/cli.py`, whose parser `_cli.py` adds, so it cannot import them from `_cli.py`). Public as
`tf_compat_grad.testing.ExitStatus`."""

import enum


class ExitStatus(enum.IntEnum):
    """The exit status of `python -m tf_compat_grad` (`tf-compat-grad`).

    Example:
        >>> from tf_compat_grad.testing import ExitStatus
        >>> print(*(f"{s.name}={s.value}" for s in ExitStatus))
        OK=0 FAILED=1 USAGE=2 NOTHING_CHECKED=3
    """

    OK = 0  # no check fails (with --strict: none warns either); everything was translated
    FAILED = 1  # a check fails, or `port` left something untranslated
    USAGE = 2  # a target, input or output cannot be used, or the arguments do not fit together
    NOTHING_CHECKED = 3  # `check` found nothing it could check

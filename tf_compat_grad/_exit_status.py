"""The command line's exit statuses, one home for both commands: `check` (`_cli.py`) and `port`
(`_port/cli.py`, whose parser `_cli.py` adds, so it cannot import them from `_cli.py`)."""

EXIT_OK = 0  # no check fails; everything was translated
EXIT_FAILED = 1  # a check fails, or `port` left something untranslated
EXIT_USAGE = 2  # a target or input cannot be read, or the arguments do not fit together
EXIT_NOTHING_CHECKED = 3  # `check` found nothing it could check

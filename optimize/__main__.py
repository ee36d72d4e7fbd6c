"""`python -m optimize <command>`: the offline build. Each command is a small module of
optimize/commands/ with its own options; `python -m optimize <command> --help` lists them."""
from __future__ import annotations

import argparse
import os
import sys

from optimize.commands import COMMANDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optimize", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    runs = {}
    for command in COMMANDS:
        command.add_arguments(commands.add_parser(command.NAME, help=command.HELP, description=command.__doc__))
        runs[command.NAME] = command.run
    args = parser.parse_args(argv)
    from models.logs import configure_logging

    configure_logging()
    try:
        from models import settings

        settings.check_model_settings()  # a typo: one line, before any work
        return runs[args.command](args) or 0
    except KeyboardInterrupt as stopped:  # a training run stopped by a signal says how to continue it
        print(str(stopped) or "interrupted", file=sys.stderr)
        return getattr(stopped, "exit_code", 130)
    except BaseException as error:
        message = user_message(error)
        if message is None or os.environ.get("SHOWDOWN_DEBUG") == "1":
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2


def user_message(error: BaseException) -> str | None:
    """What a user's mistake or their machine's state (a path, a value, a full disk, a build running elsewhere) gets:
    one line with the fix, not a traceback (SHOWDOWN_DEBUG=1 shows it). None: a fault of ours, raised as it is."""
    from models.errors import ConfigError, InputError, VariantUnavailable

    if isinstance(error, (InputError, ConfigError, VariantUnavailable, FileNotFoundError)):
        return str(error)
    if type(error).__name__ == "GateFailed":  # by name: the gates import numpy, which the deploy workflow lacks
        return str(error)
    from optimize.commands.common import disk_message, network_message

    return disk_message(error) or network_message(error)


if __name__ == "__main__":
    if (code := main()) >= 128:  # interrupted: the model thread's job in flight (a report's timing) is not waited for
        sys.stdout.flush(), sys.stderr.flush(), os._exit(code)
    raise SystemExit(code)

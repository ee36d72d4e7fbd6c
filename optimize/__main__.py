"""`python -m optimize <command>`: the offline build. Each command is a small module of
optimize/commands/ with its own options; `python -m optimize <command> --help` lists them."""
from __future__ import annotations

import argparse

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
    return runs[args.command](args) or 0


if __name__ == "__main__":
    raise SystemExit(main())

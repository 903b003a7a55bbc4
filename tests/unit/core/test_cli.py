"""The command line has one function per subcommand: every subcommand the parser offers is
dispatched through COMMANDS to a function that says what it does."""

import argparse

from mechbook import __main__ as cli


def test_every_subcommand_has_its_function():
    parser = cli._parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert sorted(sub.choices) == sorted(cli.COMMANDS)
    for name, function in cli.COMMANDS.items():
        assert (function.__doc__ and f"``{name}" in function.__doc__) or name == "build", name
    assert set(cli.NEEDS_ENVIRONMENT) <= set(cli.COMMANDS)

"""Refuse words the command line would otherwise take silently.

``scalar submit --gpus 1 --duration 2 hours`` reads as ``--duration 2`` and a command ``hours``: the job
is submitted and fails on the node. Here a word that no option takes and that is not after ``--`` is
refused before the command runs, with what the user most likely meant:

    error: unexpected word 'hours' after --duration 2: did you mean --duration "2 hours"?
      a command to run goes after --: scalar submit [OPTIONS] -- hours

Commands whose variadic argument is called ``command`` take it only after ``--``; for every other command
a positional word beyond the ones it declares is refused the same way (click would say "unexpected extra
argument" without the hint). ``StrictCommand`` is given to every command by ``strict(app)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand
from typer.models import DefaultPlaceholder

from scalar.cli.errors import fail

AFTER_DASHDASH = "command"  # a variadic argument of this name is only read after ``--``


@dataclass(frozen=True, slots=True)
class Stray:
    """The first word nothing takes: the word, and the option (with its value) right before it, if any."""

    word: str
    option: str | None
    value: str | None


def _option_arity(command: TyperCommand) -> dict[str, int]:
    """How many values each option name (``--gpus``, ``-y``) takes: 0 for a flag."""
    arity: dict[str, int] = {}
    for param in command.params:
        if param.param_type_name == "option":
            flag = bool(getattr(param, "is_flag", False) or getattr(param, "count", False))
            takes = 0 if flag else max(param.nargs, 1)
            for name in (*param.opts, *param.secondary_opts):
                arity[name] = takes
    return arity


def _positional_room(command: TyperCommand) -> int | None:
    """How many positional words the command takes before ``--`` (``None``: any number)."""
    room = 0
    for param in command.params:
        if param.param_type_name == "argument":
            if param.nargs < 0:
                if param.name == AFTER_DASHDASH:
                    continue
                return None
            room += param.nargs
    return room


def find_stray(command: TyperCommand, args: Sequence[str]) -> Stray | None:
    """The first positional word before ``--`` that the command has no room for, or ``None``."""
    room = _positional_room(command)
    if room is None:
        return None
    arity = _option_arity(command)
    option: str | None = None
    value: str | None = None
    just_took_value = False
    positional = 0
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return None
        if word.startswith("-") and word != "-":
            name, eq, _ = word.partition("=")
            takes = arity.get(name, 0)
            if takes and not eq:
                option, value = name, " ".join(args[i + 1 : i + 1 + takes])
                i += 1 + takes
                just_took_value = True
                continue
            just_took_value = False
            i += 1
            continue
        positional += 1
        if positional > room:
            return Stray(word, option if just_took_value else None, value if just_took_value else None)
        just_took_value = False
        i += 1
    return None


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def stray_message(command_path: str, stray: Stray, takes_command: bool, arguments: Sequence[str]) -> str:
    lines = []
    if stray.option is not None and stray.value is not None:
        lines.append(
            f"unexpected word {stray.word!r} after {stray.option} {stray.value}: "
            f"did you mean {stray.option} {_quoted(f'{stray.value} {stray.word}')}?"
        )
    elif arguments:
        lines.append(f"unexpected word {stray.word!r}: {command_path} takes {' '.join(arguments)} only")
    else:
        lines.append(f"unexpected word {stray.word!r}: {command_path} takes options only")
    if takes_command:
        lines.append(f"  a command to run goes after --: {command_path} [OPTIONS] -- {stray.word}")
    else:
        lines.append(f"  see `{command_path} --help` for what it takes")
    return "\n".join(lines)


class StrictCommand(TyperCommand):
    """A typer command that refuses stray words (see the module's docstring): ``error: ...``, exit 2."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        stray = find_stray(self, args)
        if stray is not None:
            takes_command = any(
                p.param_type_name == "argument" and p.name == AFTER_DASHDASH for p in self.params
            )
            arguments = [
                str(p.metavar or p.name).upper()
                for p in self.params
                if p.param_type_name == "argument" and p.name != AFTER_DASHDASH
            ]
            fail(stray_message(ctx.command_path, stray, takes_command, arguments))
        return super().parse_args(ctx, args)


def strict(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) ``StrictCommand``, unless it chose a class."""
    for info in app.registered_commands:
        if info.cls is None or info.cls is TyperCommand or isinstance(info.cls, DefaultPlaceholder):
            info.cls = StrictCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            strict(group.typer_instance)

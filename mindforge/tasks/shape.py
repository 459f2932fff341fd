"""The command shape of a shell script: its programs and options, paths and literals abstracted.

Two reference solutions with the same shape solve their tasks the same way (``wc -w <
FILE > OUT`` and ``wc -w < OTHER > ELSEWHERE`` are one shape; ``wc -l`` is another). A task
family must not restate a bundled task (any bundled task can be a lineage's sealed task),
so no family's rendered solution may share a bundled solution's shape
(``tests/unit/discovery/test_family_shapes.py``).

The shape is the sequence of ``(program, options)`` of the script's simple commands, in
order: here-document bodies, comments, ``set`` lines, redirection targets, variable
assignments and shell keywords are dropped; ``find`` keeps its primaries whole (``-type``);
a program named by a path is ``<path>``; ``git`` keeps its subcommand (``git tag``); short
options are split into letters (``-xzf`` is
``x``, ``z``, ``f``; ``-k1,1`` is ``k``), long ones keep their name (``--decode``), a lone
``-`` stays. Setup commands (``mkdir``, ``cd``, ``export``, ``set``) are dropped, so adding them does
not make a restatement new (a script of setup commands only keeps them).
"""

from __future__ import annotations

import re
import shlex

#: one simple command: the program and its options
Command = tuple[str, frozenset[str]]

_KEYWORDS = {
    "while", "do", "done", "for", "in", "if", "then", "else", "elif", "fi", "{", "}", "!", "until", "case", "esac",
}
_SETUP = {"mkdir", "cd", "export", "set"}
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _strip_heredocs(text: str) -> str:
    out: list[str] = []
    ending: str | None = None
    for line in text.splitlines():
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        match = _HEREDOC.search(line)
        if match:
            ending = match[2]
            line = line[: match.start()]
        if not line.lstrip().startswith("#"):
            out.append(line)
    return "\n".join(out).replace("\\\n", " ")


def _options(word: str) -> set[str]:
    if word == "-":
        return {"-"}
    if word.startswith("--"):
        return {word.split("=", 1)[0]}
    letters = {c for c in word[1:] if c.isalpha()}
    return letters or {c for c in word[1:] if c.isdigit()}


def _command(words: list[str]) -> Command | None:
    words = [w for w in words if w not in _KEYWORDS]
    while words and _ASSIGN.match(words[0]):
        words = words[1:]
    if not words:
        return None
    program, args = words[0], words[1:]
    if "/" in program:
        program = "<path>"
    if program == "git":
        rest = list(args)
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] == "-C" else rest[1:]
        program = f"git {rest[0]}" if rest else "git"
    options: set[str] = set()
    for word in args:
        if word.startswith("-"):
            # find's primaries (-type, -size) are words, not letters
            options |= {word} if program == "find" else _options(word)
    return program, frozenset(options)


def command_shape(script: str) -> tuple[Command, ...]:
    """The shape of ``script`` (see the module docstring).

    Args:
        script: shell script text (a ``solve.sh``).

    Returns:
        The ``(program, options)`` of each simple command, setup commands dropped
        unless there is nothing else.
    """
    lexer = shlex.shlex(_strip_heredocs(script).replace("\n", " ; "), posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: shape what splits
        tokens = _strip_heredocs(script).split()
    commands: list[Command] = []
    words: list[str] = []
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token and set(token) <= set(";&|()"):
            command = _command(words)
            if command is not None:
                commands.append(command)
            words = []
        elif token and set(token) <= set("<>&") or token in ("<(", ">("):
            skip_next = "(" not in token
        elif token and set(token) <= set("<>()&"):
            command = _command(words)
            if command is not None:
                commands.append(command)
            words = []
        else:
            words.append(token)
    command = _command(words)
    if command is not None:
        commands.append(command)
    work = tuple(c for c in commands if c[0] not in _SETUP)
    return work or tuple(commands)

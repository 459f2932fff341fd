"""Running one command in a container and capturing its output, capped.

A plain ``docker exec`` has two faults for agent commands: it waits until every process
holding the command's stdout has exited (so ``server &`` hangs it), and it streams every
byte the command prints through the client (a 50 MB ``cat`` becomes 50 MB of Python
bytes). :data:`EXEC_SCRIPT` avoids both: it runs the command with its output redirected
to files inside the container, waits only for the command's main process, enforces the
timeout there (killing the command's process group), and then prints one header line and
the head and tail of each file. :func:`parse_exec_output` turns that into stream results.

The script needs ``bash``, ``mktemp``, ``sleep``, ``kill``, ``wc``,
``head`` and ``tail`` in the image: coreutils or busybox.
"""

from __future__ import annotations

from dataclasses import dataclass

#: first bytes of the header line :data:`EXEC_SCRIPT` prints
HEADER_TAG = b"MFEXEC1"

# Arguments: $1 command, $2 timeout (seconds, decimal), $3 head bytes, $4 tail bytes.
# `set -m` puts each background job in its own process group, so the watchdog can kill the
# command with everything it spawned (except processes that called setsid themselves), and
# the script can kill the watchdog (a subshell and its sleep) as one group. `wait PID` (not
# `wait -n`) because a job that ends before the wait starts is still reported by PID.
# The command's stdin is /dev/null and its output goes to files: a process it leaves in
# the background holds those files, never the exec's stream, so the exec ends when the
# main process does. Exit status 125 without a header: the script itself failed.
EXEC_SCRIPT = r"""
d=$(mktemp -d "/tmp/.mindforge-exec.XXXXXX") || exit 125
set -m
bash -c "$1" </dev/null >"$d/o" 2>"$d/e" &
p=$!
( sleep "$2"; : >"$d/t"; kill -KILL -- "-$p" ) </dev/null >/dev/null 2>&1 &
w=$!
wait "$p" 2>/dev/null
rc=$?
kill -KILL -- "-$w" 2>/dev/null
[ -e "$d/t" ] && rc=timeout
set +m
so=$(wc -c <"$d/o" 2>/dev/null); so=${so:-0}
se=$(wc -c <"$d/e" 2>/dev/null); se=${se:-0}
printf 'MFEXEC1 %s %s %s\n' "$rc" "$so" "$se"
for s in "o:$so" "e:$se"; do
  f="$d/${s%%:*}"; n=${s#*:}
  if [ "$n" -le $(($3 + $4)) ]; then
    head -c "$n" "$f" 2>/dev/null
  else
    head -c "$3" "$f"; tail -c "$4" "$f"
  fi
done
rm -rf "$d"
"""


@dataclass(frozen=True)
class CapturedStream:
    """One output stream after capping.

    Attributes:
        text: decoded UTF-8 (invalid bytes replaced); when bytes were dropped, the head,
            a marker line ``[... N bytes omitted ...]`` and the tail.
        total_bytes: bytes the command wrote to the stream.
        omitted_bytes: bytes dropped by the cap (0 when all were kept).
    """

    text: str
    total_bytes: int
    omitted_bytes: int


@dataclass(frozen=True)
class ParsedExec:
    """What :data:`EXEC_SCRIPT` reported.

    Attributes:
        exit_code: the command's exit status (128 + n when killed by signal n), or None
            when the timeout killed it.
        timed_out: True when the timeout fired.
        stdout / stderr: the captured streams.
    """

    exit_code: int | None
    timed_out: bool
    stdout: CapturedStream
    stderr: CapturedStream


#: which bytes of a stream over the cap are kept: the first and last halves, the first, or the last
TRUNCATIONS = ("head_tail", "head", "tail")


def split_budget(max_output_bytes: int, truncation: str = "head_tail") -> tuple[int, int]:
    """Bytes kept from the head and from the tail of a stream.

    Args:
        max_output_bytes: the cap per stream, in bytes (>= 0).
        truncation: ``head_tail`` (half each), ``head`` (all from the head) or ``tail``
            (all from the tail).

    Returns:
        ``(head_bytes, tail_bytes)``, summing to ``max_output_bytes``.

    Raises:
        ValueError: the cap is negative, or an unknown truncation.
    """
    if max_output_bytes < 0:
        raise ValueError(f"max_output_bytes must be >= 0, got {max_output_bytes}")
    if truncation == "head":
        return max_output_bytes, 0
    if truncation == "tail":
        return 0, max_output_bytes
    if truncation != "head_tail":
        raise ValueError(f"truncation must be one of {', '.join(TRUNCATIONS)}, got {truncation!r}")
    head = max_output_bytes // 2
    return head, max_output_bytes - head


def omitted_marker(omitted_bytes: int) -> str:
    """The line inserted where bytes were dropped."""
    return f"[... {omitted_bytes} bytes omitted ...]"


def join_capped(head: bytes, tail: bytes, total_bytes: int) -> CapturedStream:
    """Decode a stream's kept head and tail, with a marker for the bytes between them.

    Args:
        head: the first bytes of the stream.
        tail: the last bytes of the stream (empty when ``head`` holds all of it).
        total_bytes: bytes the stream held in all.

    Returns:
        The captured stream; decoding replaces invalid UTF-8 (the head and the tail are
        decoded separately, as a cut may split a character).
    """
    omitted = max(total_bytes - len(head) - len(tail), 0)
    text = head.decode("utf-8", errors="replace")
    if omitted:
        if text and not text.endswith("\n"):
            text += "\n"
        text += omitted_marker(omitted) + "\n"
    text += tail.decode("utf-8", errors="replace")
    return CapturedStream(text=text, total_bytes=total_bytes, omitted_bytes=omitted)


def cap_bytes(data: bytes, max_output_bytes: int, truncation: str = "head_tail") -> CapturedStream:
    """Cap a stream held in memory.

    Args:
        data: the whole stream.
        max_output_bytes: the cap, in bytes.
        truncation: which bytes are kept (see :func:`split_budget`).

    Returns:
        The captured stream.
    """
    if len(data) <= max_output_bytes:
        return join_capped(data, b"", len(data))
    head_n, tail_n = split_budget(max_output_bytes, truncation)
    return join_capped(data[:head_n], data[len(data) - tail_n :] if tail_n else b"", len(data))


def _take(payload: bytes, pos: int, total: int, head_n: int, tail_n: int) -> tuple[CapturedStream, int]:
    if total <= head_n + tail_n:
        chunk = payload[pos : pos + total]
        return join_capped(chunk, b"", total), pos + total
    head = payload[pos : pos + head_n]
    tail = payload[pos + head_n : pos + head_n + tail_n]
    return join_capped(head, tail, total), pos + head_n + tail_n


def parse_exec_output(raw: bytes, head_n: int, tail_n: int) -> ParsedExec | None:
    """Parse what :data:`EXEC_SCRIPT` printed on its stdout.

    Args:
        raw: the script's stdout (header line, then stdout's kept bytes, then stderr's).
        head_n / tail_n: the head and tail sizes passed to the script, in bytes.

    Returns:
        The parsed result, or None when ``raw`` does not start with a header (the script
        did not run: no bash in the image, a bad user or working directory, ...).
    """
    if not raw.startswith(HEADER_TAG + b" "):
        return None
    line_end = raw.find(b"\n")
    fields = raw[:line_end].split() if line_end >= 0 else []
    if len(fields) != 4 or not fields[2].isdigit() or not fields[3].isdigit():
        return None
    status, out_total, err_total = fields[1], int(fields[2]), int(fields[3])
    timed_out = status == b"timeout"
    if not timed_out and not status.isdigit():
        return None
    pos = line_end + 1
    stdout, pos = _take(raw, pos, out_total, head_n, tail_n)
    stderr, _ = _take(raw, pos, err_total, head_n, tail_n)
    return ParsedExec(
        exit_code=None if timed_out else int(status),
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
    )

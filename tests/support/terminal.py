"""A command line run as a person runs it on a terminal (python's ``pty``): all of it on the
terminal, or its stderr only and its stdout a pipe, as ``cmd --json > out.json`` in a shell."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "xpu-workarounds"


def terminal_env(**variables: str | None) -> dict[str, str]:
    """This environment without the project's settings and colour switches, a capable terminal, and ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "NO_COLOR", "FORCE_COLOR"))}
    env["TERM"] = "xterm-256color"
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def on_terminal(args: list[str], env: Mapping[str, str], timeout: float = 120,
                columns: int | None = None) -> tuple[int, str]:
    """``xpu-workarounds ARGS`` with stdin, stdout and stderr on a pseudo-terminal (``columns`` wide,
    as a window the user resized, when given): (exit code, what it got)."""
    import pty

    master, slave = pty.openpty()
    if columns is not None:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen([str(SCRIPT), *args], stdin=slave, stdout=slave, stderr=slave, env=dict(env))
    os.close(slave)
    return process.wait(timeout=timeout), _drain(master)


def stderr_on_terminal(args: list[str], env: Mapping[str, str], timeout: float = 120) -> tuple[int, str, str]:
    """``xpu-workarounds ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, everything the terminal got)."""
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen([str(SCRIPT), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                               env=dict(env))
    os.close(slave)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read() if process.stdout else b""))
    reader.start()
    terminal = _drain(master)
    code = process.wait(timeout=timeout)
    reader.join(timeout)
    return code, b"".join(out).decode(), terminal


def _drain(master: int) -> str:
    """Everything the terminal ``master`` gets until its other end is closed."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return b"".join(chunks).decode(errors="replace")

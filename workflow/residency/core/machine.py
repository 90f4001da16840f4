"""The machine identity recorded in every claim's scope."""

from __future__ import annotations

import os
import platform
import socket


def _cpu_model() -> str | None:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _mem_total() -> int | None:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def describe() -> dict:
    uname = platform.uname()
    return {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "arch": uname.machine,
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "mem_total_bytes": _mem_total(),
        "python": platform.python_version(),
    }

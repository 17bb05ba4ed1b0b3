"""The exporting process's memory, as the streamed-export benches measure it (Linux ``/proc``).

A bench's export runs in a fresh process that imports this module (``sys.path`` holds ``bench/``)
and wraps the export in :func:`measure`: the resident set just before, the peak during it
(``VmHWM``, restarted before the export so imports and the abstract model are not counted in the
export's own peak), the process's overall peak, wall and CPU time. Not ``ru_maxrss``: it survives
``exec``, so a child started by a process that had just written a large source would report the
parent's peak.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def status(key: str) -> float | None:
    """``VmRSS`` / ``VmHWM`` / ... of this process in MiB; None where the kernel does not report it
    (a sandbox such as gVisor has no ``VmHWM``)."""
    with open("/proc/self/status") as f:
        return next((int(line.split()[1]) / 1024 for line in f if line.startswith(key + ":")), None)


def restart_peak() -> None:
    """Reset ``VmHWM`` to the current resident set (writing 5 to ``clear_refs``), where allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def measure(run: Callable[[], Any]) -> dict[str, float]:
    """Run ``run()`` and return its wall/CPU seconds and the peak resident memory it caused."""
    rss_before, peak_before = status("VmRSS"), status("VmHWM")
    restart_peak()
    t, c = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    peak = status("VmHWM")
    if peak is None or peak_before is None or rss_before is None:  # no peak figures here: times only
        return {"export_s": wall, "export_cpu_s": cpu, "rss_before_export_mib": rss_before}
    return {"export_s": wall, "export_cpu_s": cpu, "rss_before_export_mib": rss_before,
            "peak_rss_export_mib": peak, "peak_rss_increase_mib": peak - rss_before,
            "peak_rss_process_mib": max(peak_before, peak)}

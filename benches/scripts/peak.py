"""Peak resident memory of this process, for the peer scripts of `tarn-bench`.

`reset_peak` starts the peak over (Linux: a child's `ru_maxrss` starts at its parent's
size, so it cannot measure a step) and records the size it starts from, `start_mib`;
`peak_mib` is the peak since, from VmHWM, or the whole process's peak where /proc is
missing; `timed` runs one step's work between them.
"""

import resource
import time


_start_mib = None


def reset_peak():
    global _start_mib
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        _start_mib = None
        return
    # Right after the reset the peak is the resident size.
    _start_mib = peak_mib()


def start_mib():
    """The resident MiB when the peak was last reset (None where /proc is missing)."""
    return _start_mib


def peak_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(work):
    """Runs `work()`; returns its result, the milliseconds it took and the peak MiB."""
    reset_peak()
    started = time.perf_counter()
    out = work()
    ms = (time.perf_counter() - started) * 1e3
    return out, ms, peak_mib()

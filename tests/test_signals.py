"""SIGTERM: cleanup as for an error, and the command's process ends within a deadline even when its way out
stalls."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

# The command's way out stalls as it did on `dsvm demo --n-train 100000000000`: SIGTERM raised Terminated, the
# cleanup ran, and then the interpreter's exit waited for a non-daemon thread (distributed's scheduler
# materialising a graph of 120,000 chunks) for minutes; only a second SIGTERM ended it.
STALLED_COMMAND = textwrap.dedent("""
    import sys, threading, time

    from dsvm import signals
    from dsvm.app import cli

    def busy(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    def stalled(args):
        threading.Thread(target=busy, args=(600,), name="materialise-graph").start()  # not a daemon
        print("ready", flush=True)
        busy(600)
        return 0

    if __name__ == "__main__":
        signals.SIGTERM_GRACE_SECONDS = 1.0
        cli.COMMANDS["info"] = stalled
        sys.exit(cli.main(["-q", "info", "x"]))
""")


def _started(tmp_path, code: str) -> subprocess.Popen:
    script = tmp_path / "command.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def test_sigterm_ends_the_command_when_its_way_out_stalls(tmp_path):
    proc = _started(tmp_path, STALLED_COMMAND)
    proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(timeout=60)  # without the deadline: the 600 s of the stalled thread
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the command was still running a minute after SIGTERM")
    assert status == 128 + signal.SIGTERM
    err = proc.stderr.read()
    assert "SIGTERM: the cleanup did not finish within 1 s; stopping now" in err, err


def test_a_library_caller_that_catches_terminated_goes_on(tmp_path):
    """The deadline is the command's: a process that only used :func:`sigterm_cleanup` is not ended by it."""
    code = textwrap.dedent("""
        import os, signal, time
        from dsvm import signals

        if __name__ == "__main__":
            signals.SIGTERM_GRACE_SECONDS = 0.1
            try:
                with signals.sigterm_cleanup():
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(60)
            except signals.Terminated as stopped:
                time.sleep(1.0)
                print("went on", stopped.code, flush=True)
    """)
    script = tmp_path / "library.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == f"went on {128 + signal.SIGTERM}", proc.stderr

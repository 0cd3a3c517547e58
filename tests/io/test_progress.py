"""The progress display: a bar redrawn in place on a terminal, plain lines at a bounded rate elsewhere."""

import io
import logging
import os

from dsvm.io import progress
from dsvm.io.progress import LINE_STEP, ProgressBar


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_the_bar_is_redrawn_in_place():
    out = FakeTerminal()
    bar = ProgressBar(2_000_000, label="parse x", unit="B", stream=out)
    bar.update(1_000_000)
    bar.close()
    text = out.getvalue()
    assert text.startswith("\rparse x [") and text.endswith("\n") and text.count("\n") == 1
    assert "1.0 MB/2.0 MB" in text and "50%" in text and "B/s" in text
    silent = FakeTerminal()
    ProgressBar(10, enabled=False, stream=silent).update(5)
    assert silent.getvalue() == ""


def test_into_a_pipe_progress_is_plain_lines_one_per_step():
    """A SLURM .out file or a pipe got thousands of carriage-return redraws on one line."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as pipe:
        bar = ProgressBar(1000, label="write d.zarr", unit="rows", stream=pipe)
        for _ in range(1000):
            bar.update(1)
        bar.close()
    with os.fdopen(read_fd) as f:
        text = f.read()
    lines = text.splitlines()
    assert "\r" not in text
    # one line per crossed step of 10 % (the last one is 100 %), none repeated at close
    assert len(lines) == round(1 / LINE_STEP)
    assert [line.split(":")[1].split()[0] for line in lines] == [f"{10 * i}%" for i in range(1, 11)]
    assert lines[-1] == "write d.zarr: 100%  1,000/1,000"


def test_plain_lines_also_come_after_a_long_silence(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    out = io.StringIO()
    bar = ProgressBar(1000, label="parse", unit="rows", stream=out)
    bar.update(1)  # 0.1 %: no line yet
    clock[0] += progress.LINE_SECONDS
    bar.update(1)  # still below 10 %, but half a minute passed since the start
    bar.update(1)
    assert out.getvalue().splitlines() == ["parse: 0%  2/1,000"]
    bar.close()
    assert out.getvalue().splitlines()[-1] == "parse: 0%  3/1,000"


def test_plain_lines_go_to_the_log_where_logging_shows_them(caplog):
    caplog.set_level(logging.INFO, logger="dsvm.progress")
    out = io.StringIO()
    with ProgressBar(4, label="stage", unit="blocks", stream=out) as bar:
        for _ in range(4):
            bar.update(1)
    assert out.getvalue() == ""
    assert [r.getMessage() for r in caplog.records if r.name == "dsvm.progress"] == [
        "stage: 25%  1/4", "stage: 50%  2/4", "stage: 75%  3/4", "stage: 100%  4/4"]


def test_a_closed_stream_counts_as_no_terminal():
    stream = io.StringIO()
    stream.close()
    assert not ProgressBar(1, stream=stream, enabled=False).interactive

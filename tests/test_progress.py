"""The progress display: a bar redrawn in place on a terminal, plain lines at a bounded rate elsewhere."""

import io
import logging
import os
import sys

from dsvm import progress
from dsvm.progress import LINE_STEP, ProgressBar


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
    assert lines[-1] == "write d.zarr: 100%  1,000/1,000 rows"


def test_plain_lines_also_come_after_a_long_silence(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: clock[0])
    out = io.StringIO()
    bar = ProgressBar(1000, label="parse", unit="rows", stream=out)
    bar.update(1)  # 0.1 %: no line yet
    clock[0] += progress.LINE_SECONDS
    bar.update(1)  # still below 10 %, but half a minute passed since the start
    bar.update(1)
    assert out.getvalue().splitlines() == ["parse: 0%  2/1,000 rows"]
    bar.close()
    assert out.getvalue().splitlines()[-1] == "parse: 0%  3/1,000 rows"


def test_plain_lines_go_to_the_log_where_logging_shows_them(caplog):
    caplog.set_level(logging.INFO, logger="dsvm.progress")
    out = io.StringIO()
    with ProgressBar(4, label="stage", unit="blocks", stream=out) as bar:
        for _ in range(4):
            bar.update(1)
    assert out.getvalue() == ""
    assert [r.getMessage() for r in caplog.records if r.name == "dsvm.progress"] == [
        "stage: 25%  1/4 blocks", "stage: 50%  2/4 blocks", "stage: 75%  3/4 blocks", "stage: 100%  4/4 blocks"]


def test_a_closed_stream_counts_as_no_terminal():
    stream = io.StringIO()
    stream.close()
    assert not ProgressBar(1, stream=stream, enabled=False).interactive


# --------------------------------------------------------------------------- the progress of a fit
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import dsvm  # noqa: E402


@pytest.fixture
def shown(monkeypatch):
    """Progress on, every pass shown at once (no delay); off again afterwards."""
    monkeypatch.setattr(progress, "PASS_DELAY", 0.0)
    dsvm.show_progress()
    yield
    dsvm.show_progress(False)


def _problem(n=6000):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))
    return X, (X[:, 0] * X[:, 1] > 0).astype(int)


def _stages(records) -> set[str]:
    """The stages named by progress lines (``stage: 40%  2/5 blocks``)."""
    return {r.getMessage().split(":")[0] for r in records if r.name == "dsvm.progress" and "%" in r.getMessage()}


@pytest.mark.parametrize("input_kind", ["numpy", "dask"])
def test_a_fit_reports_the_progress_of_its_long_stages_in_the_log(shown, caplog, input_kind):
    caplog.set_level(logging.INFO, logger="dsvm")
    X, y = _problem()
    if input_kind == "dask":
        X, y = da.from_array(X, chunks=(1000, 5)), da.from_array(y, chunks=1000)
    dsvm.NystroemSVC(n_components=50, gamma=0.5, random_state=0, block_rows=1000).fit(X, y)
    stages = _stages(caplog.records)
    assert any(s.startswith("features") for s in stages), stages
    assert "newton solve" in stages, stages
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("newton solve:") and "%" in r.getMessage()]
    assert lines[-1].split()[2] == "100%" or any(" 100% " in f" {line} " for line in lines)


def test_on_a_terminal_a_fit_draws_bars_in_place(shown, monkeypatch):
    for name in [n for n in logging.Logger.manager.loggerDict if n.startswith("dsvm")]:
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    X, y = _problem()
    dsvm.NystroemSVC(n_components=50, gamma=0.5, random_state=0, block_rows=1000).fit(X, y)
    text = terminal.getvalue()
    assert "\rnewton solve [" in text and "\rfeatures (n=6000" in text and "blocks" in text


def test_short_passes_stay_quiet_and_nothing_shows_without_show_progress(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="dsvm")
    monkeypatch.setattr(progress, "PASS_DELAY", 600.0)  # every pass here is "short"
    X, y = _problem()
    dsvm.NystroemSVC(n_components=50, gamma=0.5, random_state=0, block_rows=1000).fit(X, y)
    assert _stages(caplog.records) == set()  # progress is off by default in a Python session
    caplog.clear()
    dsvm.show_progress()
    try:
        dsvm.NystroemSVC(n_components=50, gamma=0.5, random_state=0, block_rows=1000).fit(X, y)
    finally:
        dsvm.show_progress(False)
    assert _stages(caplog.records) == set()  # each pass ends within PASS_DELAY


@pytest.mark.parametrize("store", ["memory", "disk"])
def test_a_pass_on_a_cluster_counts_its_blocks(shown, caplog, store):
    from distributed import Client, LocalCluster

    caplog.set_level(logging.INFO, logger="dsvm")
    X, y = _problem()
    Xd, yd = da.from_array(X, chunks=(1000, 5)), da.from_array(y, chunks=1000)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
            Client(cluster):
        model = dsvm.NystroemSVC(n_components=50, gamma=0.5, random_state=0, feature_store=store).fit(Xd, yd)
    assert model.solver_stats_["feature_store"] == store
    stages = _stages(caplog.records)
    assert any(s.startswith("features") for s in stages) and "newton solve" in stages, stages
    assert any(r.getMessage().endswith(" blocks") for r in caplog.records if r.name == "dsvm.progress")


def _stages_in(stderr: str) -> set[str]:
    return {line.split("dsvm.progress: ")[1].split(":")[0] for line in stderr.splitlines()
            if "dsvm.progress: " in line and "%" in line}


def test_the_dsvm_command_shows_progress_unless_told_not_to(tmp_path, monkeypatch, capsys):
    from dsvm.app.cli import main

    monkeypatch.setattr(progress, "PASS_DELAY", 0.0)
    X, y = _problem(3000)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    argv = ["train", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "-k", "30", "--gamma", "0.5",
            "--workers", "1", "--threads-per-worker", "2"]
    assert main([*argv, "--model", str(tmp_path / "a.npz")]) == 0
    stages = _stages_in(capsys.readouterr().err)
    assert "newton solve" in stages and any(s.startswith("features") for s in stages), stages
    assert not progress.progress_shown()  # main() leaves the process as it found it
    assert main([*argv, "--model", str(tmp_path / "b.npz"), "--no-progress"]) == 0
    assert _stages_in(capsys.readouterr().err) == set()


def test_show_progress_false_undoes_what_show_progress_did_to_the_logger(monkeypatch):
    logger = logging.getLogger("dsvm")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # no handler anywhere: show_progress adds one
    monkeypatch.setattr(logging.getLogger(), "level", logging.WARNING)
    dsvm.show_progress()
    assert progress.progress_shown() and logger.level == logging.INFO and len(logger.handlers) == 1
    dsvm.show_progress(False)
    assert not progress.progress_shown() and logger.level == logging.NOTSET and logger.handlers == []


def test_a_log_level_above_info_shows_no_progress(tmp_path, monkeypatch, capsys):
    """--log-level WARNING printed every INFO line once progress lowered the dsvm logger's level."""
    from dsvm.app.cli import main

    monkeypatch.setattr(progress, "PASS_DELAY", 0.0)
    monkeypatch.setattr(logging.getLogger("dsvm"), "level", logging.INFO)  # a dsvm logger set lower still obeys
    X, y = _problem(3000)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    assert main(["train", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "-k", "30", "--gamma", "0.5",
                 "--workers", "1", "--threads-per-worker", "2", "--model", str(tmp_path / "a.npz"),
                 "--log-level", "WARNING"]) == 0
    err = capsys.readouterr().err
    assert " INFO " not in err and "%" not in err, err[-2000:]

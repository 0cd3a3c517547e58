"""dsvm.user_files: a user's file is read only when it is a regular file (a folder where one is expected),
a whole read is bounded, and a refusal is one line naming the path and what it is."""

from __future__ import annotations

import os
import socket

import pytest
from helpers import call_near_fifos

from dsvm.user_files import check_user_path, open_user_file, path_problem, read_user_file


class Refused(ValueError):
    pass


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"hello")
    (tmp_path / "link.txt").symlink_to(tmp_path / "a.txt")
    for name in ("a.txt", "link.txt"):
        with open_user_file(tmp_path / name, "text file", Refused) as f:
            assert f.read() == b"hello"
        assert read_user_file(tmp_path / name, "text file", Refused, 5) == b"hello"
        assert path_problem(tmp_path / name) is None and check_user_path(tmp_path / name, "x", Refused)


def test_what_is_not_a_regular_file_is_refused_before_any_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock"))
    try:
        for name, kind in (("fifo", "a FIFO (named pipe)"), ("sock", "a socket"), (".", "a folder")):
            path = tmp_path / name
            expected = f"{path}: it is {kind}, not a regular file; a text file must be a regular file"
            exc = call_near_fifos(lambda p=path: open_user_file(p, "text file", Refused), tmp_path / "fifo")
            assert isinstance(exc, Refused) and str(exc) == expected, exc
            with pytest.raises(Refused, match="not a regular file"):
                check_user_path(path, "text file", Refused)
        with pytest.raises(Refused, match="/dev/null: it is a device, not a regular file"):
            read_user_file("/dev/null", "text file", Refused, 10)
    finally:
        server.close()


def test_a_folder_is_accepted_where_one_is_expected(tmp_path):
    assert check_user_path(tmp_path, "dataset", Refused, expect="folder") == tmp_path
    assert check_user_path(tmp_path, "dataset", Refused, expect="either") == tmp_path
    (tmp_path / "f").write_text("x")
    with pytest.raises(Refused, match=r"f: it is a file, not a folder; a dataset must be a folder$"):
        check_user_path(tmp_path / "f", "dataset", Refused, expect="folder")
    assert path_problem(tmp_path / "missing") == "no such file or folder"
    with pytest.raises(FileNotFoundError):
        check_user_path(tmp_path / "missing", "dataset", Refused)
    with pytest.raises(FileNotFoundError):
        open_user_file(tmp_path / "missing", "dataset", Refused)


def test_a_whole_read_is_bounded(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * (2**20 + 1))
    with pytest.raises(Refused, match=r"big: larger than 1 MiB; a spec file is a small text file"):
        read_user_file(tmp_path / "big", "spec file", Refused, 2**20)
    assert len(read_user_file(tmp_path / "big", "spec file", Refused, 2**21)) == 2**20 + 1

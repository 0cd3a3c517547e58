"""Row blocks in raw files: written once by spill_blocks, read with O_DIRECT (or buffered) every pass."""

from __future__ import annotations

import errno
import os

import dask.array as da
import numpy as np
import pytest

import dsvm.blocks._file_blocks as file_blocks
import dsvm.blocks._raw_files as raw_files
from dsvm.blocks import BlockReduction, aligned_vector, as_row_blocks, current_block_key, spill_blocks

N, P, R = 1000, 3, 5
CHUNKS = (300, 1, 299, 400)  # one block of one row: its file is padded to a page


def _times(X_block, W, out=None, offset=0):
    """A block function writing into ``out`` (as the feature map does): rows times W, plus the row index."""
    F = np.matmul(X_block, W, out=out)
    F[:, 0] += np.arange(offset, offset + X_block.shape[0])
    return F


def _copying(X_block, W, out=None, offset=0):
    """A block function that ignores ``out``: the store copies its result there."""
    return _times(X_block, W, offset=offset)


def _scaled(block, factor, out=None):
    return np.multiply(block, factor, out=out)


def _sums(F, y, scale):
    return {"F'y": F.T @ y * scale, "rows": F.shape[0], "key": [current_block_key()]}


def _combine_sums(parts):
    return {"F'y": sum(p["F'y"] for p in parts), "rows": sum(p["rows"] for p in parts),
            "key": [k for p in parts for k in p["key"]]}


@pytest.fixture
def data():
    """X, W, y, the features F, X as Dask row blocks of CHUNKS and y aligned with them.

    F is made block by block, as the spill makes it: BLAS may round a float32 product differently by the
    row's place in the matrix (the one-row block is a vector-matrix product; OpenBLAS's Haswell kernels
    round the rows of a block's tail their own way), so ``X @ W`` of the whole matrix may differ from the
    spilled blocks in the last bit.  The same function on the same block is the same arithmetic: the
    comparisons below are exact, and they test the store.
    """
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, P)).astype(np.float32)
    W = rng.normal(size=(P, R)).astype(np.float32)
    y = rng.normal(size=N)
    starts = np.cumsum((0, *CHUNKS))
    F = np.concatenate([_times(X[a:b], W, offset=a) for a, b in zip(starts[:-1], starts[1:])])
    Xd = as_row_blocks(da.from_array(X, chunks=(CHUNKS, -1)), 0)
    return X, W, y, F, Xd, aligned_vector(y, Xd)


@pytest.mark.parametrize("fn", [_times, _copying])
def test_spilled_blocks_read_back_and_reduce_as_the_array(tmp_path, data, fn):
    X, W, y, F, Xd, yd = data
    reduction = BlockReduction(_sums, aligned=(yd,), shared=(2.0,), combine=_combine_sums)
    stored, first = spill_blocks(Xd, fn, R, np.float32, str(tmp_path), shared=(W,), with_offset=True, reduction=reduction)
    assert stored.chunks == CHUNKS and stored.n_cols == R and stored.is_distributed
    assert sorted(os.listdir(tmp_path)) == sorted(f"block-{i}.raw" for i in range(4))
    assert all(os.path.getsize(tmp_path / f"block-{i}.raw") % raw_files.ALIGN == 0 for i in range(4))
    # the reduction ran on each block as it was made, with the block's key
    np.testing.assert_allclose(first["F'y"], 2.0 * F.T @ y, rtol=1e-5)
    assert first["rows"] == N and sorted(first["key"]) == [(str(tmp_path), i) for i in range(4)]
    # a pass reads every file: the same sums
    again = stored.map_reduce(_sums, aligned=(yd,), shared=(2.0,), combine=_combine_sums)
    np.testing.assert_array_equal(again["F'y"], first["F'y"])
    assert current_block_key() is None
    # the other operations read the files as a Dask array
    np.testing.assert_array_equal(stored.compute(), F.astype(np.float32))
    np.testing.assert_array_equal(stored.take(np.array([999, 0, 300, 300])), stored.compute()[[999, 0, 300, 300]])
    doubled = stored.map_blocks(np.multiply, R, np.float32, shared=(2.0,))
    np.testing.assert_array_equal(doubled.compute(), 2 * stored.compute())
    assert stored.fold(lambda b, s: s + b.shape[0], 0) == N
    assert stored.map_reduce(lambda b: b.shape[0]) == N


def test_spill_without_a_reduction_and_with_in_process_blocks(tmp_path, data):
    X, W, y, F, Xd, yd = data
    stored, nothing = spill_blocks(Xd, _times, R, np.float32, str(tmp_path), shared=(W,), with_offset=True)
    assert nothing is None
    np.testing.assert_array_equal(stored.compute(), F.astype(np.float32))
    # blocks of files can be spilled again (the CV search projects stored kernel columns)
    os.mkdir(tmp_path / "x")
    again, _ = spill_blocks(stored, _scaled, R, np.float32, str(tmp_path / "x"), shared=(3.0,))
    np.testing.assert_array_equal(again.compute(), 3 * stored.compute())
    with pytest.raises(NotImplementedError, match="in-process"):
        spill_blocks(as_row_blocks(X, 100), _times, R, np.float32, str(tmp_path), shared=(W,))


def test_buffered_io_where_o_direct_is_refused(tmp_path, data, monkeypatch):
    """A filesystem without O_DIRECT (EINVAL) gets buffered I/O, pages dropped after each read."""
    X, W, y, F, Xd, yd = data
    real_open, opened, dropped = os.open, [], []

    def open_without_direct(path, flags, *args):
        opened.append(bool(flags & os.O_DIRECT))
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", open_without_direct)
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, a, b, advice: dropped.append(advice))
    stored, _ = spill_blocks(Xd, _times, R, np.float32, str(tmp_path), shared=(W,), with_offset=True)
    total = stored.map_reduce(_sums, aligned=(yd,), shared=(1.0,), combine=_combine_sums)
    np.testing.assert_allclose(total["F'y"], F.T @ y, rtol=1e-5)
    assert True in opened and False in opened  # tried O_DIRECT first, then went on without
    assert dropped == [os.POSIX_FADV_DONTNEED] * 4


def test_direct_io_off_and_on(tmp_path, data, monkeypatch):
    X, W, y, F, Xd, yd = data
    real_open, flags_seen = os.open, []

    def spy(path, flags, *args):
        flags_seen.append(bool(flags & os.O_DIRECT))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", spy)
    os.mkdir(tmp_path / "a")
    buffered, _ = spill_blocks(Xd, _times, R, np.float32, str(tmp_path / "a"), shared=(W,), with_offset=True,
                               direct=False)
    np.testing.assert_array_equal(buffered.compute(), F.astype(np.float32))
    assert not any(flags_seen)
    flags_seen.clear()
    os.mkdir(tmp_path / "b")
    direct, _ = spill_blocks(Xd, _times, R, np.float32, str(tmp_path / "b"), shared=(W,), with_offset=True)
    direct.map_reduce(lambda b: b.shape[0])
    assert flags_seen and all(flags_seen)  # O_DIRECT works on the test machine's temporary folder
    np.testing.assert_array_equal(direct.compute(), buffered.compute())


def test_a_failed_write_fails_the_spill(tmp_path, data, monkeypatch):
    X, W, y, F, Xd, yd = data

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_blocks, "write_raw", full)
    reduction = BlockReduction(_sums, aligned=(yd,), shared=(1.0,), combine=_combine_sums)
    with pytest.raises(OSError) as err:
        spill_blocks(Xd, _times, R, np.float32, str(tmp_path), shared=(W,), reduction=reduction)
    assert err.value.errno == errno.ENOSPC


def test_a_removed_store_is_not_written_again(tmp_path, data):
    X, W, y, F, Xd, yd = data
    with pytest.raises(FileNotFoundError):
        spill_blocks(Xd, _times, R, np.float32, str(tmp_path / "gone"), shared=(W,))
    assert not (tmp_path / "gone").exists()


def test_thread_buffers_are_page_aligned_and_reused():
    a = raw_files.thread_buffer(5000)
    assert a.nbytes == 8192 and a.ctypes.data % raw_files.ALIGN == 0
    b = raw_files.thread_buffer(100)
    assert b.ctypes.data == a.ctypes.data and b.nbytes == 4096
    c = raw_files.aligned_empty(1)
    assert c.nbytes == 4096 and c.ctypes.data % raw_files.ALIGN == 0


def test_on_a_distributed_cluster(tmp_path, data, local_cluster_client):
    X, W, y, F, Xd, yd = data
    with local_cluster_client.as_current():
        Xp, yp = Xd.persist(), yd.persist()
        reduction = BlockReduction(_sums, aligned=(yp,), shared=(1.0,), combine=_combine_sums)
        stored, first = spill_blocks(Xp, _times, R, np.float32, str(tmp_path), shared=(W,), with_offset=True,
                                     reduction=reduction)
        again = stored.map_reduce(_sums, aligned=(yp,), shared=(1.0,), combine=_combine_sums)
    np.testing.assert_allclose(first["F'y"], F.T @ y, rtol=1e-5)
    np.testing.assert_array_equal(again["F'y"], first["F'y"])


def _unit(X_block, W, out=None):
    """Values within [-1, 1], as RBF features are."""
    return np.tanh(np.matmul(X_block, W, out=out), out=out)


def test_sixteen_bit_fixed_point_halves_the_files_and_every_pass_sees_the_same_values(tmp_path, data):
    X, W, y, F, Xd, yd = data
    exact = np.tanh(X @ W)
    reduction = BlockReduction(_sums, aligned=(yd,), shared=(1.0,), combine=_combine_sums)
    os.mkdir(tmp_path / "a")
    stored, first = spill_blocks(Xd, _unit, R, np.float32, str(tmp_path / "a"), shared=(W,), reduction=reduction,
                                 stored="int16")
    values = stored.compute()
    assert values.dtype == np.float32
    # rounded to the nearest step of 1/32767
    assert np.abs(values - exact).max() <= 0.5 / 32767 + 1e-7
    np.testing.assert_allclose(values * 32767, np.rint(values * 32767), atol=2e-3)
    # the reduction made with the blocks saw the decoded values, as the passes do
    again = stored.map_reduce(_sums, aligned=(yd,), shared=(1.0,), combine=_combine_sums)
    np.testing.assert_array_equal(again["F'y"], first["F'y"])
    np.testing.assert_allclose(first["F'y"], values.astype(np.float64).T @ y, rtol=1e-5)
    sizes = [os.path.getsize(tmp_path / "a" / f"block-{i}.raw") for i in range(4)]
    assert sizes == [raw_files.padded(c * R * 2) for c in CHUNKS]
    with pytest.raises(ValueError, match="int16"):
        spill_blocks(Xd, _unit, R, np.float32, str(tmp_path), shared=(W,), stored="int8")

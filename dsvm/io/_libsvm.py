"""Vectorised parser for blocks of LIBSVM / svmlight text.

A block is a ``bytes`` object holding complete lines.  :func:`parse_libsvm_block`
turns it into CSR arrays with numpy operations over the raw bytes (no Python
loop per line or per token), one cache-sized piece (256 KiB of lines) at a
time, which keeps the temporaries (several arrays per byte of text) in cache
rather than streaming them through memory:

1. the positions of whitespace, newlines and ``:`` (two byte comparisons)
   form an event list; tokens are the non-empty gaps between whitespace
   events; the first token of a line is the label, every other token must be
   ``index:value`` with exactly one colon (checked by counting);
2. digit strings are converted eight bytes at a time (SWAR arithmetic on
   unaligned ``uint64`` loads); a decimal ``[sign]int[.frac]`` with at most
   15 digits is ``M / 10**f`` with both operands exact, which is the correctly
   rounded result (the classic strtod fast path), so values equal those of
   ``float()`` / ``strtod`` bit for bit.  Other numbers (exponents, more
   digits) go through numpy's string-to-float conversion.

Anything that does not fit is handed to :func:`check_line`, a plain Python
reference parser of one line, which locates the first bad line and phrases
the error.  The accepted format (see also ``dsvm.io.ingest``):

* ``label [qid:N] index:value index:value ... [# comment]``; whitespace is
  spaces, tabs, and ``\\r`` (so ``\\r\\n`` line endings work); blank lines,
  lines holding only a comment, a missing final newline and trailing spaces
  are fine; a line with only a label is a row with no features;
* labels and values are decimal numbers (``+1``, ``-1.0``, ``0.5e-3``) and must be
  finite; a label written as an integer is at most 2**53 in magnitude (a float64
  holds no larger integer exactly, see :mod:`dsvm.io._label_text`); values are stored in the requested dtype and must stay finite;
* indices are unsigned decimal integers, **strictly increasing within a line**
  (as LIBSVM and scikit-learn require), at most :data:`MAX_FEATURE_INDEX` (so
  that ``n_features`` fits the 32-bit indices of sparse matrices; a larger
  index is a line error, before anything is sized by it); explicit zero
  values are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ._label_text import INEXACT_HINT, MAX_EXACT_INTEGER, integer_text_problem

__all__ = ["ParsedBlock", "LineError", "parse_libsvm_block", "check_line", "locate_error", "line_at",
           "MAX_FEATURE_INDEX"]

#: the largest feature index read: with one more for a zero-based file, n_features stays below 2**31
MAX_FEATURE_INDEX = 2**31 - 2

# Byte classes -----------------------------------------------------------
_WS, _NL, _COLON = 1, 2, 3

# characters numpy's fallback conversion may see (anything else is an error)
_NUMCHARS = np.zeros(256, dtype=bool)
_NUMCHARS[[ord(c) for c in "0123456789+-.eE"]] = True

_PAD = 16  # bytes of padding before the block, for the 16-byte digit loads
_WIDE = 64  # number tokens longer than this are converted one by one (see _parse_general)
_U64 = np.uint64
_ZEROS = _U64(0x3030303030303030)
_HI_NIBBLES = _U64(0xF0F0F0F0F0F0F0F0)
_SIX = _U64(0x0606060606060606)
_LOW_NIBBLES = _U64(0x0F0F0F0F0F0F0F0F)
# KEEP[L]: mask of the L highest bytes of a little-endian word (the last L characters)
_KEEP = np.array([0] + [(~((1 << (8 * (8 - k))) - 1)) & 0xFFFFFFFFFFFFFFFF for k in range(1, 9)], dtype=np.uint64)
# LOW_BYTES[k]: mask of the k lowest bytes
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)], dtype=np.uint64)
_POW10_U = np.array([10**k for k in range(20)], dtype=np.uint64)
_POW10_F = np.array([10.0**k for k in range(23)], dtype=np.float64)

_COMMENT_RE = re.compile(rb"#[^\n]*")
_QID_RE = re.compile(rb"(?<=[ \t\r\x0b\x0c])qid:[^ \t\r\n\x0b\x0c]*")
_NUMBER_RE = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)
_INDEX_RE = re.compile(rb"\d+")


class LineError(ValueError):
    """A malformed line: ``line`` is 1-based within the parsed block."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass
class ParsedBlock:
    """CSR arrays of one block.  Indices are as written in the file (not shifted)."""

    data: np.ndarray  # values, in the requested dtype
    indices: np.ndarray  # int64, as written
    indptr: np.ndarray  # int64, len n_rows + 1
    y: np.ndarray  # float64 labels
    n_lines: int  # number of b"\n" in the block
    min_index: int  # -1 when the block has no features
    max_index: int  # -1 when the block has no features
    max_index_line: int  # 1-based line (within the block) of the largest index, 0 if none
    max_index_pos: int  # byte offset (within the block) of that index, -1 if none

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])


# Number conversion --------------------------------------------------------
def _digits8(u64: np.ndarray, end: np.ndarray, length: np.ndarray):
    """Value and validity of the ``length`` (0..8) characters ending at byte ``end``."""
    return _digits8_word(u64[end - 8], length)


def _digits8_word(w: np.ndarray, length: np.ndarray):
    """Value and validity of the last ``length`` (0..8) characters of little-endian words ``w``."""
    keep = _KEEP[length]
    w = (w & keep) | (_ZEROS & ~keep)
    ok = ((w & _HI_NIBBLES) == _ZEROS) & (((w + _SIX) & _HI_NIBBLES) == _ZEROS)
    v = w & _LOW_NIBBLES
    v *= _U64(2561)
    v >>= _U64(8)
    v &= _U64(0x00FF00FF00FF00FF)
    v *= _U64(6553601)
    v >>= _U64(16)
    v &= _U64(0x0000FFFF0000FFFF)
    v *= _U64(42949672960001)
    v >>= _U64(32)
    return v, ok


def _parse_uint(u64: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Unsigned decimal integers of up to 16 digits in ``[start, end)``.

    Returns ``(value uint64, ok bool)``; ``ok`` is False for non-digits or
    more than 16 characters.  Empty ranges give ``(0, True)``.
    """
    length = end - start
    ok = length <= 16
    lo_len = np.minimum(length, 8)
    value, ok_lo = _digits8(u64, end, lo_len)
    ok &= ok_lo
    long = np.flatnonzero(length > 8)
    if long.size:
        hi_len = np.clip(length[long] - 8, 0, 8)
        hi, ok_hi = _digits8(u64, end[long] - 8, hi_len)
        value[long] += hi * _U64(100_000_000)
        ok[long] &= ok_hi
    return value, ok


def _parse_decimal(buf: np.ndarray, u64: np.ndarray, start: np.ndarray, end: np.ndarray, dot: np.ndarray):
    """Decimal numbers ``[sign]digits[.digits]`` in ``[start, end)``; ``dot`` = position or -1.

    Returns ``(values float64, ok bool)``: ``ok`` marks the numbers converted
    exactly by the fast path (at most 15 digits, no exponent).  When the
    digits and the dot fit in the 8 bytes before ``end`` (the usual case), one
    word load suffices: the bytes below the dot are shifted up over it.
    """
    if start.size and ((end - start) == 1).all():  # single characters, e.g. binary features
        digit = buf[start] - np.uint8(48)
        return digit.astype(np.float64), digit <= 9
    first = buf[start]
    neg = first == 45  # '-'
    s = start + (neg | (first == 43))  # skip '+' / '-'
    has_dot = dot >= 0
    any_dot = bool(has_dot.any())
    if any_dot:
        n_frac = np.where(has_dot, end - dot - 1, 0)
        n_int = np.where(has_dot, dot, end) - s
    else:
        n_frac = np.zeros(start.shape, dtype=np.int64)
        n_int = end - s
    n_dig = n_int + n_frac
    ok = (n_int >= 0) & (n_dig >= 1) & (n_dig <= 15)
    one = ok & (n_dig + has_dot <= 8)  # digits (and dot) within one word
    w = u64[end - 8]
    if any_dot:
        nf = np.minimum(n_frac, 7)
        moved = (w & _KEEP[nf]) | ((w & _LOW_BYTES[7 - nf]) << _U64(8))
        w = np.where(has_dot, moved, w)
    vals, ok_one = _digits8_word(w, np.where(one, n_dig, 0))
    ok &= ok_one | ~one
    vals = vals.astype(np.float64)
    if any_dot:
        vals /= _POW10_F[np.where(one, n_frac, 0)]
    long = np.flatnonzero(ok & ~one)
    if long.size:
        nfl, nil, el = n_frac[long], n_int[long], end[long]
        int_end = np.where(has_dot[long], dot[long], el)
        iv, ok_i = _parse_uint(u64, int_end - nil, int_end)
        fv, ok_f = _parse_uint(u64, el - nfl, el)
        ok[long] &= ok_i & ok_f
        vals[long] = (iv * _POW10_U[nfl] + fv).astype(np.float64) / _POW10_F[nfl]
    np.negative(vals, out=vals, where=neg)
    return vals, ok


def _parse_general(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Numbers of any form via numpy's string conversion; raises ValueError if invalid.

    Tokens of up to :data:`_WIDE` characters are converted together (a bytes
    matrix as wide as the widest); longer ones, which a writer printing every
    digit produces (``1.000...0001``), one by one with ``float()``, after the
    reference parser's pattern (:func:`check_line` reads them the same way).
    """
    if start.size == 0:
        return np.zeros(0, dtype=np.float64)
    length = end - start
    wide = length > _WIDE
    if wide.any():
        values = np.empty(start.size, dtype=np.float64)
        values[~wide] = _parse_general(buf, start[~wide], end[~wide])
        for k in np.flatnonzero(wide):
            token = buf[start[k]:end[k]].tobytes()
            if not _NUMBER_RE.fullmatch(token):
                raise ValueError("invalid number")
            values[k] = float(token)
        return values
    width = int(length.max())
    if width == 0:
        raise ValueError("number token empty")
    cols = np.arange(width)
    pos = start[:, None] + cols
    mat = buf[np.minimum(pos, buf.shape[0] - 1)]
    inside = cols < length[:, None]
    if not _NUMCHARS[mat[inside]].all():
        raise ValueError("invalid character in number")
    mat = np.where(inside, mat, 0).astype(np.uint8)
    strings = np.ascontiguousarray(mat).view(f"S{width}").ravel()
    return strings.astype(np.float64)


def _parse_numbers(buf, u64, start, end, dot):
    vals, ok = _parse_decimal(buf, u64, start, end, dot)
    slow = np.flatnonzero(~ok)
    if slow.size:
        vals[slow] = _parse_general(buf, start[slow], end[slow])
    return vals


# Block parser ---------------------------------------------------------------
PIECE_BYTES = 256 * 1024  # pieces this size keep the temporaries in cache (see the module docstring)

# event classes of the bytes <= 32 and ':'
_CLS = np.full(256, 9, dtype=np.uint8)  # 9 = control character: invalid
_CLS[[ord(" "), ord("\t"), ord("\r"), 0x0B, 0x0C]] = _WS
_CLS[ord("\n")] = _NL
_CLS[ord(":")] = _COLON


def _blank(pattern: re.Pattern, raw: bytes) -> bytes:
    return pattern.sub(lambda m: b" " * (m.end() - m.start()), raw)


class _Invalid(Exception):
    """Raised inside the fast path when a piece needs the reference parser."""


def _pieces(text: bytes, size: int):
    """Split ``text`` into pieces of about ``size`` bytes at line boundaries."""
    i, n = 0, len(text)
    while i < n:
        j = text.find(b"\n", i + size)
        j = n if j < 0 else j + 1
        yield i, j
        i = j


def parse_libsvm_block(
    raw: bytes,
    *,
    dtype=np.float32,
    zero_based: bool | str = "auto",
    n_features: int | None = None,
) -> ParsedBlock:
    """Parse a block of complete LIBSVM lines.

    Parameters
    ----------
    raw : bytes
        Complete lines (the last one may lack its newline).
    dtype : numpy dtype
        dtype of the returned values; values must be finite in it.
    zero_based : bool or "auto"
        With ``False``, index 0 is an error; with ``True`` or ``False`` and
        ``n_features`` given, indices beyond the last feature are errors.
    n_features : int, optional
        Number of features, for the range check.

    Returns
    -------
    ParsedBlock

    Raises
    ------
    LineError
        For the first malformed line, with its 1-based number in the block.
    """
    dtype = np.dtype(dtype)
    options = dict(dtype=dtype, zero_based=zero_based, n_features=n_features)
    text = raw
    if b"#" in text:
        text = _blank(_COMMENT_RE, text)
    if b"qid:" in text:
        text = _blank(_QID_RE, text)
    datas, indices, counts, labels = [], [], [], []
    lines_before = 0
    min_index, max_index, max_line, max_pos = -1, -1, 0, -1
    for a, b in _pieces(text, PIECE_BYTES):
        piece = text[a:b]
        try:
            y, idx, val, row_nnz, lo, hi, hi_line, hi_pos = _parse_piece(piece, dtype, zero_based, n_features)
        except (_Invalid, ValueError, FloatingPointError, OverflowError):
            line, message = locate_error(raw[a:b], **options)
            raise LineError(lines_before + line, message) from None
        if idx.size:
            if min_index < 0 or lo < min_index:
                min_index = lo
            if hi > max_index:
                max_index, max_line, max_pos = hi, lines_before + hi_line, a + hi_pos
        labels.append(y)
        indices.append(idx)
        datas.append(val)
        counts.append(row_nnz)
        lines_before += piece.count(b"\n")
    row_nnz = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    indptr = np.zeros(row_nnz.size + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    return ParsedBlock(
        data=np.concatenate(datas) if datas else np.zeros(0, dtype),
        indices=np.concatenate(indices) if indices else np.zeros(0, np.int64),
        indptr=indptr,
        y=np.concatenate(labels) if labels else np.zeros(0),
        n_lines=lines_before,
        min_index=min_index,
        max_index=max_index,
        max_index_line=max_line,
        max_index_pos=max_pos,
    )


def _parse_piece(text: bytes, dtype: np.dtype, zero_based, n_features):
    """Labels, indices, values and row lengths of one piece of lines, with the range of its indices.

    Returns ``(y, indices, values, row_nnz, lo, hi, hi_line, hi_pos)``: ``lo`` and ``hi`` are the
    smallest and largest index (-1 without features), ``hi_line`` the 1-based line of ``hi`` and
    ``hi_pos`` the offset of its colon in ``text``.  Raises :class:`_Invalid` (or a numeric error) when the
    piece does not fit the fast path and the reference parser must find the bad line.
    """
    buf, u64 = _padded_buffer(text)
    body = buf[_PAD : _PAD + len(text) + 2]
    ev, typ = _events(body)
    free, colon, line_colon, row = _token_layout(ev, typ)
    dots = np.flatnonzero(body == 46) + _PAD
    y = _piece_labels(buf, u64, ev[free] + 1, ev[free + 1], dots)
    colon_pos = ev[colon]
    indices, values = _piece_features(buf, u64, ev[colon - 1] + 1, colon_pos, ev[colon + 1], dots, dtype)
    row_nnz = np.bincount(row, minlength=free.size).astype(np.int64)
    lo, hi, hi_line, hi_pos = _index_range(indices, row, line_colon, colon_pos, zero_based, n_features)
    return y, indices, values, row_nnz, lo, hi, hi_line, hi_pos


def _padded_buffer(text: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``text`` between two virtual newlines and :data:`_PAD` spaces each side, with its unaligned ``uint64`` view.

    The padding keeps the word loads of the digit conversion (up to 16 bytes before a token's end)
    inside the buffer.
    """
    n = len(text)
    buf = np.empty(n + 2 * _PAD + 2, dtype=np.uint8)
    buf[:_PAD] = 32
    buf[_PAD] = 10  # virtual newline: every line, the first included, follows a newline
    buf[_PAD + 1 : _PAD + 1 + n] = np.frombuffer(text, dtype=np.uint8)
    buf[_PAD + 1 + n] = 10  # virtual newline at the end
    buf[_PAD + 2 + n :] = 32
    u64 = np.ndarray(shape=(buf.shape[0] - 7,), dtype="<u8", buffer=buf, strides=(1,))
    return buf, u64


def _events(body: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in the padded buffer and classes (``_WS``, ``_NL``, ``_COLON``) of the separators in ``body``.

    A control character other than whitespace is invalid.
    """
    mask = body <= 32
    mask |= body == 58
    ev = np.flatnonzero(mask)
    typ = _CLS[body[ev]]
    if typ.max() > _COLON:
        raise _Invalid
    ev += _PAD
    return ev, typ


def _token_layout(ev: np.ndarray, typ: np.ndarray):
    """The tokens between the events: which are labels, which are ``index:value``, and their rows.

    Returns ``(free, colon, line_colon, row)``: the events that open a label, the colon events, the
    line of each colon and the row (label) it belongs to.  A line holds one label, before its features,
    and each feature token has exactly one colon with text on both sides, else :class:`_Invalid`.
    """
    nonempty = np.diff(ev) > 1  # segment j lies between events j and j+1
    is_sep = typ <= _NL
    colon = np.flatnonzero(typ == _COLON)  # never the first or last event
    free = np.flatnonzero(nonempty & is_sep[:-1] & is_sep[1:])  # label segments
    if np.count_nonzero(nonempty) != free.size + 2 * colon.size:
        raise _Invalid  # a segment between two colons, or next to a colon on only one side
    if colon.size and not (
        nonempty[colon - 1].all() and nonempty[colon].all()
        and (typ[colon - 1] == _WS).all() and is_sep[colon + 1].all()
    ):
        raise _Invalid
    line_of_event = np.cumsum(typ == _NL)
    line_free = line_of_event[free]
    if free.size > 1 and (np.diff(line_free) <= 0).any():
        raise _Invalid  # two labels on a line
    line_colon = line_of_event[colon]
    row = np.searchsorted(line_free, line_colon)
    if colon.size:
        if row.max() >= free.size:
            raise _Invalid
        if not ((line_free[row] == line_colon).all() and (free[row] < colon).all()):
            raise _Invalid  # a feature without a label before it
    return free, colon, line_colon, row


def _piece_labels(buf: np.ndarray, u64: np.ndarray, start: np.ndarray, end: np.ndarray, dots: np.ndarray):
    """The labels in ``[start, end)``; finite, and an integer one exact in a float64, else :class:`_Invalid`."""
    y = _parse_numbers(buf, u64, start, end, _dot_in(dots, start, end))
    if not np.isfinite(y).all():
        raise _Invalid
    for k in np.flatnonzero(np.abs(y) >= MAX_EXACT_INTEGER).tolist():  # an integer a float64 cannot hold?
        if integer_text_problem(buf[start[k]:end[k]].tobytes().decode("ascii", "replace")) is not None:
            raise _Invalid
    return y


def _piece_features(buf: np.ndarray, u64: np.ndarray, start: np.ndarray, colon_pos: np.ndarray, end: np.ndarray,
                    dots: np.ndarray, dtype):
    """Indices (int64) and values (``dtype``, finite) of the tokens ``index:value`` in ``[start, end)``.

    ``colon_pos`` is the position of each token's colon; a bad index or value raises :class:`_Invalid`.
    """
    idx, ok = _parse_uint(u64, start, colon_pos)
    if not ok.all():
        raise _Invalid
    v_start = colon_pos + 1
    with np.errstate(over="ignore", invalid="ignore"):
        values = _parse_numbers(buf, u64, v_start, end, _dot_in(dots, v_start, end)).astype(dtype)
    if not np.isfinite(values).all():
        raise _Invalid
    return idx.view(np.int64), values


def _index_range(indices, row, line_colon, colon_pos, zero_based, n_features) -> tuple[int, int, int, int]:
    """``(lo, hi, hi_line, hi_pos)`` of a piece's indices (``(-1, -1, 0, -1)`` without any).

    Indices increase strictly within a row and stay within :data:`MAX_FEATURE_INDEX` and, for a
    known base and ``n_features``, within the features, else :class:`_Invalid`.
    """
    if not indices.size:
        return -1, -1, 0, -1
    if indices.size > 1 and np.any((np.diff(indices) <= 0) & (np.diff(row) == 0)):
        raise _Invalid
    amax = int(np.argmax(indices))
    hi = int(indices[amax])
    lo = int(indices.min())
    if zero_based is False and lo == 0:
        raise _Invalid
    if hi > MAX_FEATURE_INDEX:
        raise _Invalid
    if n_features is not None and zero_based in (True, False) and hi > n_features - (1 if zero_based else 0):
        raise _Invalid
    return lo, hi, int(line_colon[amax]), int(colon_pos[amax]) - _PAD - 1


def _dot_in(dots: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Position of the '.' inside each token ``[start, end)``, -1 if none; raises on two."""
    if dots.size == 0:
        return np.full(start.shape, -1, dtype=np.int64)
    i = np.searchsorted(dots, start)
    padded = np.append(dots, np.iinfo(np.int64).max)
    first = padded[i]
    has = first < end
    if np.any(has & (padded[np.minimum(i + 1, dots.size)] < end)):
        raise _Invalid
    return np.where(has, first, -1)


# Reference parser -------------------------------------------------------------
def _short(line: bytes, limit: int = 120) -> str:
    text = line.rstrip(b"\r\n").decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "..."


def line_at(raw: bytes, pos: int) -> bytes:
    """The line of ``raw`` that contains byte ``pos``."""
    start = raw.rfind(b"\n", 0, pos) + 1
    end = raw.find(b"\n", pos)
    return raw[start : end if end >= 0 else len(raw)]


def _checked_label(label_tok: bytes, where: str) -> float:
    """The label a line's first token holds, or a ``ValueError`` naming it."""
    if not _NUMBER_RE.fullmatch(label_tok):
        raise ValueError(f"cannot parse label {_short(label_tok)!r} {where}")
    label = float(label_tok)
    if not np.isfinite(label):
        raise ValueError(f"label {_short(label_tok)!r} is not finite {where}")
    problem = integer_text_problem(label_tok.decode("ascii"))
    if problem is not None:
        raise ValueError(f"{problem} {where}{INEXACT_HINT}")
    return label


def _checked_pair(tok: bytes, dtype: np.dtype, where: str) -> tuple[int, float]:
    """``(index, value)`` of one ``index:value`` token, or a ``ValueError`` naming it."""
    parts = tok.split(b":")
    if len(parts) != 2 or not _INDEX_RE.fullmatch(parts[0]) or not _NUMBER_RE.fullmatch(parts[1]):
        raise ValueError(f"cannot parse {_short(tok)!r} {where}")
    if len(parts[0]) > 16:
        raise ValueError(f"feature index {_short(parts[0])!r} is too large {where}")
    index = int(parts[0])
    if index > MAX_FEATURE_INDEX:
        raise ValueError(f"feature index {index} is too large (at most {MAX_FEATURE_INDEX}, so that n_features "
                         f"fits in 32 bits) {where}")
    with np.errstate(over="ignore"):
        value = float(parts[1])
        stored = dtype.type(value)
    if not (np.isfinite(value) and np.isfinite(stored)):
        raise ValueError(f"value in {_short(tok)!r} is not finite in {dtype.name} {where}")
    return index, value


def _check_index(index: int, last: int, zero_based, n_features: int | None, where: str) -> None:
    """Indices strictly increase and fit the index base and ``n_features``."""
    if index <= last:
        raise ValueError(
            f"feature indices must be strictly increasing: {index} after {last} {where}"
        )
    if zero_based is False and index == 0:
        raise ValueError(f"feature index 0 with one-based indices (zero_based=False) {where}")
    if n_features is not None and zero_based in (True, False):
        limit = n_features - 1 if zero_based else n_features
        if index > limit:
            base = "zero" if zero_based else "one"
            raise ValueError(
                f"feature index {index} is out of range for n_features={n_features} "
                f"({base}-based indices) {where}"
            )


def check_line(
    line: bytes,
    *,
    dtype=np.float32,
    zero_based: bool | str = "auto",
    n_features: int | None = None,
) -> tuple[float, list[tuple[int, float]]] | None:
    """Parse one LIBSVM line with plain Python (the reference for the fast parser).

    Returns ``None`` for a blank or comment-only line, else ``(label, [(index,
    value), ...])`` with indices as written.  Raises ``ValueError`` with a
    message naming the offending text.
    """
    dtype = np.dtype(dtype)
    tokens = line.split(b"#", 1)[0].split()
    if not tokens:
        return None
    where = f"in line {_short(line)!r}"
    label = _checked_label(tokens[0], where)
    feats: list[tuple[int, float]] = []
    last = -1
    for tok in tokens[1:]:
        if tok.startswith(b"qid:"):
            continue
        index, value = _checked_pair(tok, dtype, where)
        _check_index(index, last, zero_based, n_features, where)
        last = index
        feats.append((index, value))
    return label, feats


def locate_error(raw: bytes, **options) -> tuple[int, str]:
    """1-based line number and message of the first malformed line of ``raw``."""
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        try:
            check_line(line, **options)
        except ValueError as exc:
            return lineno, str(exc)
    return 1, "cannot parse this block (the fast parser rejected it but no line is malformed)"

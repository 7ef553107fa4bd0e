"""Synthetic trace files (docs/format.md) written fast, for the tests of
big traces: one thread whose EVENTS chunks all carry the same body (calls
of `outer` and `inner`, then an EXT record of an unknown kind that pads the
chunk to its size, which readers skip), so that a file of hundreds of MB
costs one CRC of one body and writing it out.

    info = write(path, chunks=64, chunk_bytes=8 << 20, pairs=10_000)

The clock is 1 unit = 1 ns (monotonic, clock_hz 1e9, time_shift 0). In a
chunk's body each pair is: CALL outer (+1 ns), CALL inner (+1 ns), RETURN
(+2 ns), RETURN (+3 ns), so outer lasts 6 ns (4 of them its own) and inner 2 ns per call, and
chunk k starts at k * (7 * pairs + 1) ns. write() returns a dict with what
a reader must find: calls and times of both functions, events, bytes.
"""
import struct

MAGIC = b"\x89SWT\r\n\x1a\n"
POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (POLY & -(_c & 1))
    _TABLE.append(_c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _gf2_times(mat, vec):
    s, i = 0, 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def _gf2_square(mat):
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def crc32c_combine(crc1, crc2, len2):
    """The CRC of A + B from crc(A), crc(B) and len(B): crc(A) moved over
    len(B) zero bytes (an operator on GF(2)^32, squared for each power of
    two), plus crc(B)."""
    op = [POLY] + [1 << n for n in range(31)]   # one zero bit
    for _ in range(3):
        op = _gf2_square(op)                     # one zero byte
    while len2:
        if len2 & 1:
            crc1 = _gf2_times(op, crc1)
        len2 >>= 1
        op = _gf2_square(op)
    return crc1 ^ crc2


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _str(s):
    b = s.encode()
    return varint(len(b)) + b


def _kv(pairs):
    """A key/value list: (str key, u8 type, value) until the payload ends."""
    out = b""
    for k, v in pairs:
        if isinstance(v, float):
            out += _str(k) + bytes([3]) + struct.pack("<d", v)
        elif isinstance(v, str):
            out += _str(k) + bytes([2]) + _str(v)
        else:
            out += _str(k) + bytes([0]) + varint(v)
    return out


def _chunk(kind, payload, crc=None):
    return struct.pack("<BBHII", kind, 0, 0, len(payload), crc32c(payload) if crc is None else crc) + payload


def write(path, chunks=64, chunk_bytes=8 << 20, pairs=10_000):
    ev = lambda op, delta: varint(delta << 3 | op)   # noqa: E731
    pair = ev(0, 1) + varint(0) + ev(0, 1) + varint(1) + ev(1, 2) + ev(1, 3)
    events = pair * pairs
    head_room = 32   # the chunk's head (thread, seq, t_start, ...) fits in it
    pad = chunk_bytes - len(events) - head_room - 8
    assert pad > 0, "chunk_bytes too small for the pairs"
    body = events + ev(7, 0) + varint(63) + varint(pad) + bytes(pad)   # EXT of unknown kind 63
    body_crc = crc32c(body)
    span = 7 * pairs + 1
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<HHI", 1, 5, 0))
        f.write(_chunk(1, _kv([("time_shift", 0), ("clock", "monotonic"), ("clock_hz", 1e9), ("tick0", 0),
                               ("mono0_ns", 0), ("real0_ns", 0), ("pid", 1)])))
        f.write(_chunk(2, varint(0) + bytes([0]) + _str("outer") + _str("outer") + _str("/synth/big.py") + varint(1)
                       + varint(1) + bytes([0]) + _str("inner") + _str("inner") + _str("/synth/big.py") + varint(5)))
        f.write(_chunk(3, varint(0) + varint(4242) + varint(4242) + _str("MainThread")))
        for k in range(chunks):
            head = varint(0) + varint(k) + varint(k * span) + varint(0) + varint(0) + varint(4 * pairs + 1)
            payload_crc = crc32c_combine(crc32c(head), body_crc, len(body))
            f.write(struct.pack("<BBHII", 4, 0, 0, len(head) + len(body), payload_crc))
            f.write(head)
            f.write(body)
        f.write(_chunk(5, _kv([("end_ticks", chunks * span), ("events", 4 * pairs * chunks), ("dropped", 0)])))
        size = f.tell()
    n = pairs * chunks
    return {"bytes": size, "events": 4 * n, "outer_calls": n, "inner_calls": n,
            "outer_total_ns": 6 * n, "outer_own_ns": 4 * n, "inner_total_ns": 2 * n}

#!/usr/bin/env python3
"""Writes the binary seeds of the chain_walker and vhost_user_messages fuzz targets.

The targets read plain little-endian formats (documented at the top of each target and
in their `read` functions); this script writes valid inputs in them: good chains and a
few classic bad ones, and a vhost-user negotiation as QEMU sends it. The control_request
seeds are text files written by hand.

Run from anywhere: python3 crates/vswitch/fuzz/seeds/gen_seeds.py
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

u8 = lambda v: struct.pack("<B", v)
u16 = lambda v: struct.pack("<H", v)
u32 = lambda v: struct.pack("<I", v)
u64 = lambda v: struct.pack("<Q", v)


def blob(b):
    return u16(len(b)) + b


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- chain_walker -------------------------------------------------------------------

NEXT, WRITE, INDIRECT = 1, 2, 4


def addr_in(region, off):
    return u8(0) + u8(region) + u32(off)


def addr_raw(a):
    return u8(1) + u64(a)


def desc(addr, length, flags, nxt=0):
    """addr: bytes from addr_in/addr_raw; length < 65536 uses the small form."""
    ln = u8(0) + u16(length) if length < 65536 else u8(1) + u32(length)
    return addr + ln + u8(flags) + u16(0) + u16(nxt)


def descs(lst):
    return u8(len(lst)) + b"".join(lst)


def u16s(lst):
    return u8(len(lst)) + b"".join(u16(v) for v in lst)


def walker(regions, qlog2, desc_at, avail_at, used_at, table, tables, avail, need=12,
           skips=(12, 12), event_idx=1, next_avail=0, pending=None, avail_flags=0):
    out = u8(0) + u8(len(regions) - 1 if len(regions) else 0)
    for kind, arg, pages in regions:
        out += u8(kind)
        if kind == 0:
            out += u16(arg)
        elif kind == 2:
            out += u8(arg)
        out += u8(pages)
    out += u8(qlog2) + desc_at + avail_at + used_at + u8(event_idx) + u16(next_avail)
    out += descs(table)
    out += u8(len(tables)) + b"".join(a + descs(t) for a, t in tables)
    out += u16(avail_flags) + u16(len(avail) if pending is None else pending) + u16s(avail)
    out += u16(0) + u16(need) + u16(skips[0]) + u16(skips[1])
    return out


def chain_walker():
    one = [(0, 0, 15)]  # one 64 KiB region at 0
    rings = (addr_in(0, 0), addr_in(0, 0x1000), addr_in(0, 0x2000))
    table = [
        desc(addr_in(0, 0x4000), 74, 0),                 # 0: tx, one buffer
        desc(addr_in(0, 0x5000), 12, NEXT, 2),           # 1: tx, header ...
        desc(addr_in(0, 0x5100), 60, 0),                 # 2: ... and frame
        desc(addr_in(0, 0x6000), 2048, WRITE),           # 3: rx, one buffer
        desc(addr_in(0, 0x8000), 32, INDIRECT),          # 4: tx, indirect table
        desc(addr_in(0, 0x9000), 12, WRITE | NEXT, 6),   # 5: rx, two buffers
        desc(addr_in(0, 0x9100), 1500, WRITE),           # 6
    ]
    tables = [(addr_in(0, 0x8000), [desc(addr_in(0, 0xA000), 12, NEXT, 1),
                                    desc(addr_in(0, 0xA100), 64, 0)])]
    write("chain_walker", "walker-good",
          walker(one, 4, *rings, table, tables, [0, 1, 3, 4, 5]))
    # Two regions with a hole; the rings in the second; a buffer straddling the hole.
    two = [(0, 0, 3), (0, 8, 3)]
    rings2 = (addr_in(1, 0), addr_in(1, 0x800), addr_in(1, 0xC00))
    table2 = [
        desc(addr_in(0, 0x3F00), 0x200, 0),              # crosses into the hole
        desc(addr_in(1, 0x1000), 100, 0),                # fine
        desc(addr_raw(0x4000), 16, 0),                   # in the hole
        desc(addr_in(0, 0x100), 64, WRITE | NEXT, 4),    # rx across regions ...
        desc(addr_in(1, 0x2000), 64, WRITE),             # ... fine
    ]
    write("chain_walker", "walker-holes",
          walker(two, 3, *rings2, table2, [], [0, 1, 2, 3]))
    # Classic bad chains: a loop, next out of range, nested indirect, indirect with
    # NEXT, a length not a multiple of 16, a head out of range, a too-long chain.
    table3 = [
        desc(addr_in(0, 0x4000), 40, NEXT, 1),           # 0 -> 1 -> 0 ...
        desc(addr_in(0, 0x4100), 40, NEXT, 0),
        desc(addr_in(0, 0x4000), 40, NEXT, 300),         # 2: next out of range
        desc(addr_in(0, 0x8000), 16, INDIRECT),          # 3: nested indirect
        desc(addr_in(0, 0x8000), 32, INDIRECT | NEXT, 0),  # 4
        desc(addr_in(0, 0x8000), 10, INDIRECT),          # 5
    ] + [desc(addr_in(0, 0x5000 + i), 1, NEXT, 7 + i) for i in range(70)]
    tables3 = [(addr_in(0, 0x8000), [desc(addr_in(0, 0x8000), 16, INDIRECT),
                                     desc(addr_in(0, 0xA000), 16, 0)])]
    write("chain_walker", "walker-bad",
          walker(one, 8, *rings, table3, tables3, [0, 2, 3, 4, 5, 999, 6]))
    # Memory at the top of the address space, a buffer running off its end.
    top = [(2, 1, 3)]
    rings4 = (addr_in(0, 0), addr_in(0, 0x400), addr_in(0, 0x800))
    table4 = [desc(addr_in(0, 0x1000), 0x100, 0),
              desc(addr_in(0, 0x3FF0), 0x20, 0),
              desc(addr_raw(0xFFFFFFFFFFFFFFF0), 0x20, WRITE)]
    write("chain_walker", "walker-top",
          walker(top, 2, *rings4, table4, [], [0, 1, 2]))

    # Packed rings (mode 2): the descriptor's last field is its packed flags (AVAIL
    # 0x80 for wrap 1), the 16-bit field before it its buffer id; position slot 0,
    # wrap 1. Good chains: one buffer, header + frame, an indirect table, a receive
    # buffer; then the ring's end (a chain wrapping to slot 0 is not available yet).
    A = 0x80
    ptable = [
        desc(addr_in(0, 0x4000), 74, 0, A),                   # tx, one buffer
        desc(addr_in(0, 0x5000), 12, 0, A | NEXT),            # tx, header ...
        desc(addr_in(0, 0x5100), 60, 0, A),                   # ... and frame
        desc(addr_in(0, 0x8000), 32, 0, A | INDIRECT),        # tx, indirect table
        desc(addr_in(0, 0x6000), 2048, 0, A | WRITE),         # rx, one buffer
        desc(addr_in(0, 0x9000), 12, 0, A | WRITE | NEXT),    # rx, two buffers
        desc(addr_in(0, 0x9100), 1500, 0, A | WRITE),
    ]
    ptables = [(addr_in(0, 0x8000), [desc(addr_in(0, 0xA000), 12, 0, 0),
                                     desc(addr_in(0, 0xA100), 64, 0, WRITE)])]
    write("chain_walker", "packed-good",
          u8(2) + walker(one, 3, *rings, ptable, ptables, [], next_avail=0x8000,
                         pending=8)[1:])
    # Bad packed chains: nested indirect, INDIRECT with NEXT, a length not a multiple
    # of 16, a buffer out of memory, a chain through the whole ring.
    pbad = [
        desc(addr_in(0, 0x8000), 16, 0, A | INDIRECT),
        desc(addr_in(0, 0x8000), 32, 0, A | INDIRECT | NEXT),
        desc(addr_in(0, 0x4000), 40, 0, A),
        desc(addr_in(0, 0x8000), 10, 0, A | INDIRECT),
        desc(addr_raw(1 << 40), 64, 0, A),
    ] + [desc(addr_in(0, 0x5000 + i), 1, 0, A | NEXT) for i in range(11)]
    ptables_bad = [(addr_in(0, 0x8000), [desc(addr_in(0, 0x8000), 16, 0, INDIRECT),
                                         desc(addr_in(0, 0xA000), 16, 0, 0)])]
    write("chain_walker", "packed-bad",
          u8(2) + walker(one, 4, *rings, pbad, ptables_bad, [], next_avail=0x8000,
                         pending=16)[1:])

    # Pipeline: three guests with 8-descriptor queues. SimGuest's layout for size 8:
    # queue 0 (rx) at 0, queue 1 (tx) at 143360; buffers 12288 into each queue.
    rxq, txq, slots = 0, 143360, 12288
    base = 0xF  # VERSION_1, MRG_RXBUF, EVENT_IDX, INDIRECT_DESC

    def eth(dst, src, ethertype, payload):
        return bytes(dst) + bytes(src) + u16(ethertype)[::-1] + payload

    A, B, C = [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]

    def guest(features, tx, tx_avail, rx, rx_avail, frame, writes=()):
        out = u16(features) + descs(tx) + u16s(tx_avail) + u16(len(tx_avail))
        out += descs(rx) + u16s(rx_avail) + u16(len(rx_avail))
        out += u8(len(writes)) + b"".join(a + blob(b) for a, b in writes)
        return out + blob(frame)

    rx_bufs = [desc(addr_in(0, rxq + slots + i * 2048), 2048, WRITE) for i in range(4)]
    frame = bytes(12) + eth(B, A, 0x88B5, bytes(range(64)))
    ga = guest(base, [desc(addr_in(0, txq + slots), len(frame), 0)], [0],
               rx_bufs, [0, 1, 2, 3], frame)
    gb = guest(base, [], [], rx_bufs, [0, 1, 2, 3], b"")
    gc = guest(0x1, [], [], rx_bufs[:2], [0, 1], b"")
    write("chain_walker", "pipeline-unicast", u8(1) + u8(3) + u8(0) + ga + gb + gc)

    # A broadcast in a two-buffer chain, and a partially checksummed TCP frame with
    # a TSO header from a guest that acked CSUM and HOST_TSO4 (port a offers them).
    ip = bytes([0x45, 0, 0x05, 0xDC, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    tcp = u16(1234)[::-1] + u16(80)[::-1] + bytes(8) + bytes([0x50, 0x18]) + bytes(6)
    tso = eth(B, A, 0x0800, ip + tcp + bytes(1460))
    # virtio-net header: NEEDS_CSUM, GSO_TCPV4, hdr_len 54, gso_size 1000,
    # csum_start 34, csum_offset 16, num_buffers 0.
    vhdr = bytes([1, 1]) + u16(54) + u16(1000) + u16(34) + u16(16) + u16(0)
    # Feature bits of the input: 0-3 the base features, 4-11 the offloads in the
    # order CSUM, GUEST_CSUM, HOST_TSO4, HOST_TSO6, GUEST_TSO4, GUEST_TSO6, HOST_ECN,
    # GUEST_ECN (ports a and b offer them, c does not).
    features_a = base | (1 << 4) | (1 << 6)
    bcast = bytes(12) + eth([0xFF] * 6, A, 0x88B5, bytes(100))
    tx = [
        desc(addr_in(0, txq + slots), 12, NEXT, 1),
        desc(addr_in(0, txq + slots + 2048), len(bcast) - 12, 0),
        desc(addr_in(0, txq + slots + 4096), len(vhdr) + len(tso), 0),
    ]
    writes = [(addr_in(0, txq + slots), bcast[:12]),
              (addr_in(0, txq + slots + 2048), bcast[12:]),
              (addr_in(0, txq + slots + 4096), vhdr + tso)]
    ga = guest(features_a, tx, [0, 2], rx_bufs, [0, 1], b"", writes)
    gb = guest(base | (1 << 5) | (1 << 8), [], [], rx_bufs, [0, 1, 2, 3], b"")
    write("chain_walker", "pipeline-bcast-tso", u8(1) + u8(3) + u8(1) + ga + gb + gc)


# ---- vhost_user_messages ------------------------------------------------------------

GET_FEATURES, SET_FEATURES, SET_OWNER, RESET_OWNER, SET_MEM_TABLE = 1, 2, 3, 4, 5
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE = 8, 9, 10, 11
SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR = 12, 13, 14
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM, SET_VRING_ENABLE = 15, 16, 17, 18
GET_CONFIG, SET_CONFIG, RESET_DEVICE, GET_MAX_MEM_SLOTS, ADD_MEM_REG = 24, 25, 34, 36, 37

FD_MEMFD, FD_EVENTFD, FD_DEVNULL, FD_PIPE, FD_SOCKET, FD_MANY = range(6)


def msg(request, body=b"", fds=(), need_reply=False, flags=None, size=None):
    out = u8(request) if request < 0xFF else u8(0xFF) + u32(request)
    if flags is None:
        out += u8(1 if need_reply else 0)
    else:
        out += u8(2) + u32(flags)
    out += u8(0) if size is None else u8(1) + u32(size)
    out += blob(body) + u8(len(fds)) + b"".join(fds)
    return out


def memfd(pages, data=b""):
    return u8(FD_MEMFD) + u8(pages) + blob(data)


def vstate(i, n):
    return u32(i) + u32(n)


def region(gpa, size, uaddr, off):
    return u64(gpa) + u64(size) + u64(uaddr) + u64(off)


UADDR = 0x7F0000000000
FEATURES = (1 << 32) | (1 << 15) | (1 << 29) | (1 << 28) | (1 << 30)  # V1 MRG EVENT_IDX INDIRECT PROTOCOL
PROTOCOL = (1 << 0) | (1 << 3)  # MQ, REPLY_ACK


def ring_memory():
    """64 KiB of guest memory: queue 0's rings at 0x0/0x100/0x200, queue 1's at
    0x400/0x500/0x600, each with one available chain."""
    m = bytearray(0x700)
    # q0 (rx): descriptor 0 a 2 KiB device-writable buffer at 0x1000.
    m[0:16] = u64(0x1000) + u32(2048) + u16(WRITE) + u16(0)
    m[0x100:0x106] = u16(0) + u16(1) + u16(0)
    # q1 (tx): descriptor 0 a 76-byte buffer at 0x2000.
    m[0x400:0x410] = u64(0x2000) + u32(76) + u16(0) + u16(0)
    m[0x500:0x506] = u16(0) + u16(1) + u16(0)
    return bytes(m)


def negotiation(queues=1, need_reply=False):
    out = [msg(GET_FEATURES), msg(GET_PROTOCOL_FEATURES),
           msg(SET_PROTOCOL_FEATURES, u64(PROTOCOL)),
           msg(SET_FEATURES, u64(FEATURES)), msg(SET_OWNER)]
    if queues > 1:
        out.append(msg(GET_QUEUE_NUM))
    out.append(msg(SET_MEM_TABLE, u32(1) + u32(0) + region(0, 0x10000, UADDR, 0),
                   [memfd(15, ring_memory())], need_reply=need_reply))
    for q in range(2 * queues):
        d, a, u = (0, 0x100, 0x200) if q % 2 == 0 else (0x400, 0x500, 0x600)
        out += [
            msg(SET_VRING_NUM, vstate(q, 16), need_reply=need_reply),
            msg(SET_VRING_ADDR, u32(q) + u32(0) + u64(UADDR + d) + u64(UADDR + u)
                + u64(UADDR + a) + u64(0), need_reply=need_reply),
            msg(SET_VRING_BASE, vstate(q, 0)),
            msg(SET_VRING_KICK, u64(q), [u8(FD_EVENTFD)]),
            msg(SET_VRING_CALL, u64(q), [u8(FD_EVENTFD)]),
            msg(SET_VRING_ERR, u64(q), [u8(FD_EVENTFD)]),
            msg(SET_VRING_ENABLE, vstate(q, 1), need_reply=need_reply),
        ]
    return out


def vhost_user_messages():
    w = lambda name, port, msgs: write("vhost_user_messages", name, u8(port) + b"".join(msgs))
    w("negotiate", 0, negotiation())
    w("negotiate-reply-ack", 4, negotiation(need_reply=True))
    w("negotiate-mq", 1 | 4 | 8, negotiation(queues=2))
    w("negotiate-stop", 0, negotiation() + [msg(GET_VRING_BASE, vstate(0, 0)),
                                            msg(GET_VRING_BASE, vstate(1, 0)),
                                            msg(SET_VRING_ENABLE, vstate(0, 0)),
                                            msg(RESET_OWNER)])
    # Two memory tables: the second replaces the first while rings are set.
    w("remap", 0, negotiation() + [
        msg(SET_MEM_TABLE, u32(2) + u32(0) + region(0, 0x4000, UADDR, 0)
            + region(0x100000, 0x4000, UADDR + 0x100000, 0x4000),
            [memfd(7, ring_memory()), memfd(7)])])
    # Refused: a region past its file's end, more regions than fds, a protocol feature
    # that was not offered, a queue pair the port lacks, too many fds, no fd at all.
    w("bad-region", 0, [msg(GET_FEATURES), msg(SET_FEATURES, u64(FEATURES)),
                        msg(SET_MEM_TABLE, u32(1) + u32(0) + region(0, 0x20000, UADDR, 0),
                            [memfd(3)])])
    w("bad-offset", 0, [msg(SET_MEM_TABLE, u32(1) + u32(0)
                            + region(0, 0x1000, UADDR, 0xFFFFFFFFFFFFF000), [memfd(3)])])
    w("bad-count", 0, [msg(SET_MEM_TABLE, u32(3) + u32(0) + region(0, 0x1000, UADDR, 0),
                           [memfd(0)])])
    w("bad-protocol", 0, [msg(GET_FEATURES), msg(GET_PROTOCOL_FEATURES),
                          msg(SET_PROTOCOL_FEATURES, u64(0xFFFFFFFF))])
    w("bad-queue", 0, negotiation()[:6] + [msg(SET_VRING_NUM, vstate(5, 16)),
                                           msg(SET_VRING_ENABLE, vstate(9, 1))])
    w("many-fds", 0, [msg(SET_VRING_KICK, u64(0), [u8(FD_MANY) + u8(40)]),
                      msg(SET_VRING_CALL, u64(0x100), [u8(FD_DEVNULL), u8(FD_PIPE), u8(FD_SOCKET)])])
    w("config", 0, [msg(GET_FEATURES), msg(GET_PROTOCOL_FEATURES),
                    msg(SET_PROTOCOL_FEATURES, u64(PROTOCOL)),
                    msg(GET_CONFIG, u32(0) + u32(12) + u32(0) + bytes(12)),
                    msg(SET_CONFIG, u32(0) + u32(6) + u32(0) + bytes(6)),
                    msg(GET_MAX_MEM_SLOTS),
                    msg(ADD_MEM_REG, u64(0) + region(0, 0x1000, UADDR, 0), [memfd(0)]),
                    msg(RESET_DEVICE)])
    w("bad-header", 0, [msg(GET_FEATURES, flags=0), msg(SET_FEATURES, u64(0), size=4096),
                        msg(0x7FFF, b"x" * 8)])


if __name__ == "__main__":
    chain_walker()
    vhost_user_messages()

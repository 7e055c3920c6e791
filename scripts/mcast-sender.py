#!/usr/bin/env python3
"""Paced multicast sender for scripts/bench-mcast.sh (stdlib only, as root).

  mcast-sender.py IFACE --rate PPS --secs S [--size BYTES] [--group 239.1.1.1]

Writes IPv4/UDP frames of SIZE bytes (without FCS) to GROUP's MAC out of IFACE through
an AF_PACKET socket (on a tap device: into the switch that reads the tap), at PPS frames
per second for S seconds: each pass sends what the elapsed time owes, at most BURST (32)
frames, then naps 100 us, so the rate holds on average over any millisecond or more. The
cap matters on a shared core: a sender that was off the CPU for 8 ms would otherwise send
320 frames at once, more than a receiver's ring (256) holds while the receivers, which
share that core, wait for it to finish; a guest's virtio driver sends bursts of 32 too. Prints the frames sent and
the seconds it took (more than S when Python could not keep up: the rate is then lower).
DPDK testpmd cannot pace its txonly mode on virtio-user, and this kernel has no pktgen.
"""
import argparse
import socket
import struct
import time

BURST = 32

def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def frame(group, size):
    g = socket.inet_aton(group)
    dst = bytes([0x01, 0x00, 0x5E, g[1] & 0x7F, g[2], g[3]])
    src = bytes([0x02, 0x00, 0x00, 0x00, 0xBE, 0x01])
    payload = bytes(size - 14 - 20 - 8)
    udp = struct.pack("!HHHH", 5000, 5001, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 16, 17, 0,
                     socket.inet_aton("198.18.0.1"), g)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return dst + src + b"\x08\x00" + ip + udp


def main():
    a = argparse.ArgumentParser()
    a.add_argument("iface")
    a.add_argument("--rate", type=float, required=True)
    a.add_argument("--secs", type=float, required=True)
    a.add_argument("--size", type=int, default=800)
    a.add_argument("--group", default="239.1.1.1")
    o = a.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((o.iface, 0))
    f = frame(o.group, o.size)
    send = s.send
    sent = 0
    total = int(o.rate * o.secs)
    start = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * o.rate), sent + BURST)
        while sent < due:
            try:
                send(f)
                sent += 1
            except BlockingIOError:
                break
        time.sleep(0.0001)
    print(sent, f"{time.perf_counter() - start:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Multicast test peer for tests/multicast.rs, run in a namespace (stdlib only).

  mcast.py recv IFACE GROUP PORT OUT   join GROUP on IFACE (the kernel sends the IGMP or
                                       MLD report), count datagrams to PORT into OUT;
                                       SIGTERM closes the socket (the kernel's leave)
  mcast.py sniff IFACE GROUP OUT       count frames to GROUP seen on IFACE (joined or
                                       not) into OUT, from an AF_PACKET socket
  mcast.py send IFACE GROUP PORT N     send N datagrams to GROUP:PORT out of IFACE
  mcast.py raw IFACE HEX               send one Ethernet frame (hex) out of IFACE

OUT is rewritten (write then rename) with the count after every datagram or frame.
"""
import os
import signal
import socket
import struct
import sys


def write_count(out, n):
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(n))
    os.rename(tmp, out)


def ifindex(iface):
    return socket.if_nametoindex(iface)


def recv(iface, group, port, out):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    v6 = ":" in group
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
    if v6:
        s.bind(("::", port))
        mreq = socket.inet_pton(socket.AF_INET6, group) + struct.pack("@I", ifindex(iface))
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, mreq)
    else:
        s.bind(("0.0.0.0", port))
        # struct ip_mreqn: group, local address (any), interface index.
        mreq = socket.inet_aton(group) + socket.inet_aton("0.0.0.0") + struct.pack("@i", ifindex(iface))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    n = 0
    write_count(out, n)
    try:
        while True:
            s.recv(65536)
            n += 1
            write_count(out, n)
    finally:
        s.close()


def sniff(iface, group, out):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    v6 = ":" in group
    want = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, group)
    n = 0
    write_count(out, n)
    while True:
        f, addr = s.recvfrom(65536)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        if v6 and f[12:14] == b"\x86\xdd" and f[14 + 24:14 + 40] == want and f[14 + 6] == 17:
            n += 1
        elif not v6 and f[12:14] == b"\x08\x00" and f[14 + 16:14 + 20] == want and f[14 + 9] == 17:
            n += 1
        else:
            continue
        write_count(out, n)


def send(iface, group, port, count):
    v6 = ":" in group
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
    if v6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, ifindex(iface))
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
    else:
        mreq = socket.inet_aton("0.0.0.0") + socket.inet_aton("0.0.0.0") + struct.pack("@i", ifindex(iface))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, mreq)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    for i in range(count):
        s.sendto(b"m%06d" % i + b"x" * 200, (group, port))


def raw(iface, frame_hex):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.send(bytes.fromhex(frame_hex))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "recv":
        recv(args[0], args[1], int(args[2]), args[3])
    elif cmd == "sniff":
        sniff(args[0], args[1], args[2])
    elif cmd == "send":
        send(args[0], args[1], int(args[2]), int(args[3]))
    elif cmd == "raw":
        raw(args[0], args[1])
    else:
        sys.exit(f"mcast.py: unknown command {cmd}")

#!/usr/bin/python3
"""Frames made by scapy for the geneve_pcap oracle tests (tests/oracle.rs).

Usage:
  scapy_oracle.py segment-input  OUT.pcap EXPECT_DIR
  scapy_oracle.py coalesce-input OUT.pcap EXPECT_DIR
  scapy_oracle.py decap-input    OUT.pcap EXPECT.pcap
  scapy_oracle.py check-encap    IN.pcap OUT.pcap VNI

EXPECT_DIR receives one file per TCP flow, named after its source port,
holding the flow's payload bytes.
"""
import os
import random
import sys

from scapy.all import Ether, IP, IPv6, TCP, UDP, ARP, Raw, rdpcap, wrpcap, conf
from scapy.contrib.geneve import GENEVE, GeneveOptions

conf.verb = 0
random.seed(8926)
MAC_A = "02:00:00:00:00:0a"
MAC_B = "02:00:00:00:00:0b"


def payload(n):
    return bytes(random.getrandbits(8) for _ in range(n))


def expect(d, sport, data):
    with open(os.path.join(d, "%d.bin" % sport), "wb") as f:
        f.write(data)


def segment_input(out, d):
    frames = []
    p4 = payload(30000)
    expect(d, 40001, p4)
    frames.append(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2", id=100, flags="DF")
                  / TCP(sport=40001, dport=5201, seq=1000, ack=1, flags="PA",
                        options=[("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]) / Raw(p4))
    p6 = payload(20000)
    expect(d, 40002, p6)
    frames.append(Ether(src=MAC_A, dst=MAC_B) / IPv6(src="fd00::1", dst="fd00::2")
                  / TCP(sport=40002, dport=5201, seq=0xfffff000, ack=1, flags="FA") / Raw(p6))
    small = payload(100)
    expect(d, 40003, small)
    frames.append(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2")
                  / TCP(sport=40003, dport=5201, seq=5, flags="A") / Raw(small))
    frames.append(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=53, dport=53) / Raw(b"dns?"))
    wrpcap(out, [Ether(bytes(f)) for f in frames])


def tcp_segments(src, dst, sport, data, mss, ipv6):
    segs = []
    n = (len(data) + mss - 1) // mss
    for i in range(n):
        chunk = data[i * mss:(i + 1) * mss]
        flags = "PA" if i == n - 1 else "A"
        tcp = TCP(sport=sport, dport=5201, seq=7777 + i * mss, ack=99, flags=flags, window=512)
        ip = IPv6(src=src, dst=dst) if ipv6 else IP(src=src, dst=dst, id=300 + i, flags="DF")
        segs.append(Ether(src=MAC_A, dst=MAC_B) / ip / tcp / Raw(chunk))
    return segs


def geneve(inner, vni, ipv6_outer):
    ip = IPv6(src="fd00:1::1", dst="fd00:1::2") if ipv6_outer else IP(src="192.0.2.1", dst="192.0.2.2", flags="DF")
    return (Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") / ip / UDP(sport=50000, dport=6081)
            / GENEVE(vni=vni, proto=0x6558, options=[GeneveOptions(classid=0x0102, type=0x01, data=b"\x00\x00\x00\x2a")])
            / inner)


def coalesce_input(out, d):
    frames = [Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.0.0.1", pdst="10.0.0.2")]
    p4 = payload(40 * 1448)
    expect(d, 41001, p4)
    frames += tcp_segments("10.0.0.1", "10.0.0.2", 41001, p4, 1448, False)
    p6 = payload(20 * 1000 - 17)
    expect(d, 41002, p6)
    frames += [geneve(s, 9, True) for s in tcp_segments("fd00::1", "fd00::2", 41002, p6, 1000, True)]
    wrpcap(out, [Ether(bytes(f)) for f in frames])


def decap_input(out, exp):
    inner = [Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=i, dport=80) / Raw(payload(50 + i))
             for i in range(1, 8)]
    inner = [Ether(bytes(f)) for f in inner]
    opt_known = GeneveOptions(classid=0x0102, type=0x80, data=b"\xde\xad\xbe\xef")
    opt_unknown = GeneveOptions(classid=0x0103, type=0x81, data=b"")
    frames, expected = [], []
    # 1: IPv4 underlay, no options.
    frames.append(geneve(inner[0], 1, False))
    expected.append(inner[0])
    # 2: IPv6 underlay, known critical option.
    frames.append(Ether() / IPv6(src="fd00:1::1", dst="fd00:1::2") / UDP(sport=50001, dport=6081)
                  / GENEVE(vni=2, proto=0x6558, critical=1, options=[opt_known]) / inner[1])
    expected.append(inner[1])
    # 3: unknown critical option: dropped.
    frames.append(Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50002, dport=6081)
                  / GENEVE(vni=3, proto=0x6558, critical=1, options=[opt_unknown]) / inner[2])
    # 4: O bit: dropped.
    frames.append(Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50003, dport=6081)
                  / GENEVE(vni=4, proto=0x6558, oam=1) / inner[3])
    # 5: version 1: dropped.
    frames.append(Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50004, dport=6081)
                  / GENEVE(version=1, vni=5, proto=0x6558) / inner[4])
    # 6: corrupted payload under a UDP checksum: dropped.
    bad = bytearray(bytes(Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50005, dport=6081)
                          / GENEVE(vni=6, proto=0x6558) / inner[5]))
    bad[-1] ^= 0xff
    frames.append(Ether(bytes(bad)))
    # 7: not Geneve (VXLAN port): dropped.
    frames.append(Ether() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50006, dport=4789) / Raw(b"\x08" + b"\x00" * 7) / inner[6])
    wrpcap(out, [Ether(bytes(f)) for f in frames])
    wrpcap(exp, expected)


def check_encap(inp, out, vni):
    a = rdpcap(inp)
    b = rdpcap(out)
    assert len(a) == len(b), "frame count %d != %d" % (len(a), len(b))
    for i, (x, y) in enumerate(zip(a, b)):
        g = y[GENEVE]
        assert g.vni == int(vni), "frame %d: vni %d" % (i, g.vni)
        assert bytes(g.payload) == bytes(x), "frame %d: inner bytes differ" % i
    print("ok %d" % len(a))


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"segment-input": segment_input, "coalesce-input": coalesce_input,
     "decap-input": decap_input, "check-encap": check_encap}[cmd](*sys.argv[2:])

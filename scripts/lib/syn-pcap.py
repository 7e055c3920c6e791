#!/usr/bin/python3
"""Writes a pcap of N TCP SYNs, each opening a new connection (bench-cps.sh's traffic).

    syn-pcap.py OUT N SRC_MAC DST_MAC SRC_NET DST_IP DST_PORT

Frame k (0 <= k < N) is Ethernet SRC_MAC -> DST_MAC, IPv4 from SRC_NET + k // 60000
(SRC_NET an IPv4 address, counted up as a 32-bit number) to DST_IP, TCP SYN from port
1024 + k % 60000 to DST_PORT, sequence number k: no two frames share a 5-tuple. 60 bytes
(the minimum frame without its FCS), IPv4 and TCP checksums correct (RFC 791 §3.1,
RFC 9293 §3.1). Plain struct packing rather than scapy: scapy writes about 20,000 frames
per second, this about 500,000.
"""
import ipaddress
import struct
import sys

PORTS = 60000


def csum_fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def words(b):
    return sum(struct.unpack(f"!{len(b) // 2}H", b))


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    out, n = sys.argv[1], int(sys.argv[2])
    src_mac = bytes.fromhex(sys.argv[3].replace(":", ""))
    dst_mac = bytes.fromhex(sys.argv[4].replace(":", ""))
    src_net = int(ipaddress.IPv4Address(sys.argv[5]))
    dst_ip = int(ipaddress.IPv4Address(sys.argv[6]))
    dport = int(sys.argv[7])
    eth = dst_mac + src_mac + b"\x08\x00"
    # The fixed parts' checksum sums; per frame only the source address, the source
    # port and the sequence number are added.
    ip_fixed = words(struct.pack("!BBHHHBBHI", 0x45, 0, 40, 0, 0x4000, 64, 6, 0, dst_ip))
    tcp_fixed = words(struct.pack("!HIIBBHHH", dport, 0, 0, 5 << 4, 0x02, 64240, 0, 0))
    pseudo_fixed = words(struct.pack("!IBBH", dst_ip, 0, 6, 20))
    pcap_rec = struct.pack("<IIII", 0, 0, 60, 60)
    pad = b"\x00" * 6
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        chunk = []
        for k in range(n):
            src = src_net + k // PORTS
            sport = 1024 + k % PORTS
            src_sum = (src >> 16) + (src & 0xFFFF)
            ip_sum = csum_fold(ip_fixed + src_sum)
            tcp_sum = csum_fold(tcp_fixed + pseudo_fixed + src_sum + sport + (k >> 16) + (k & 0xFFFF))
            chunk.append(
                pcap_rec
                + eth
                + struct.pack("!BBHHHBBHII", 0x45, 0, 40, 0, 0x4000, 64, 6, ip_sum, src, dst_ip)
                + struct.pack("!HHIIBBHHH", sport, dport, k, 0, 5 << 4, 0x02, 64240, tcp_sum, 0)
                + pad
            )
            if len(chunk) == 65536:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))


if __name__ == "__main__":
    main()

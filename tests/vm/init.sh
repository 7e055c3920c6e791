#!/bin/busybox sh
# /init of vswitch's test guest (built by tests/vm/build-guest.sh). Loads virtio-net,
# configures eth0 from the kernel command line, runs the test named there, prints
# parseable lines (READY, RESULT ..., STATS ..., DONE) on the console and powers off.
#
# Kernel command line:  vm.ip=A.B.C.D|dhcp  vm.peer=A.B.C.D  vm.test=NAME  [vm.bytes=N]
#                       [vm.conns=N]  [vm.mtu=N]  [vm.rate=N]  [vm.secs=N]
# Tests:  server   ping the peer (56 and 1400 bytes), then receive and verify the peer's
#                  stream (vmtool recv)
#         client   ping the peer, then send vm.bytes per connection (vmtool send)
#         server-loop  like server, receiving one stream after another forever
#         tso      send TSO frames to vm.dstmac with AF_PACKET (vmtool tso); no pings
#         idle     ping the peer, then stay up until powered off from outside
#         sink     ping the peer, then receive one TCP stream on port 5001 into
#                  /tmp/blob (busybox nc) and print its size and sha256
#         source   ping the peer, then write vm.bytes of /dev/urandom to /tmp/blob and
#                  print its sha256, ping the peer every 10 ms while sending the blob
#                  to the peer's port 5001 at vm.rate bytes/s (vmtool sendfile), then
#                  print the ping's loss
#         exchange like sink (the peer's stream in, its size and sha256 printed), then
#                  like source without the ping flood: vm.bytes of /dev/urandom, its
#                  sha256 printed, sent to the peer's port 5001 as fast as it goes
#         rr-server  ping the peer, then answer request/response connections on port
#                  5002 (vmtool rrserve) until powered off
#         rr       ping the peer, then TCP_RR and TCP_CRR against the peer's port 5002
#                  for vm.secs seconds each (vmtool rr, vmtool crr)
#         [vm.stay=1] keeps the guest up after its test (the host kills it)
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null

for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
         failover net_failover virtio_net; do
    insmod /lib/modules/$m.ko || echo "RESULT error msg=insmod_$m"
done

ip= peer= test=idle bytes=16777216 conns=1 mtu= stay=0 dstmac= rate=0 secs=10
for a in $(cat /proc/cmdline); do
    case "$a" in
        vm.ip=*) ip=${a#vm.ip=} ;;
        vm.peer=*) peer=${a#vm.peer=} ;;
        vm.test=*) test=${a#vm.test=} ;;
        vm.bytes=*) bytes=${a#vm.bytes=} ;;
        vm.conns=*) conns=${a#vm.conns=} ;;
        vm.mtu=*) mtu=${a#vm.mtu=} ;;
        vm.stay=*) stay=${a#vm.stay=} ;;
        vm.rate=*) rate=${a#vm.rate=} ;;
        vm.dstmac=*) dstmac=${a#vm.dstmac=} ;;
        vm.secs=*) secs=${a#vm.secs=} ;;
    esac
done

ip link set lo up
# The MTU the driver chose (VIRTIO_NET_F_MTU, from QEMU's host_mtu=), before any change.
echo "LINK mtu=$(cat /sys/class/net/eth0/mtu)"
[ -n "$mtu" ] && ip link set eth0 mtu "$mtu"
if [ "$ip" = dhcp ]; then
    # vm.ip=dhcp: address, default route and MTU by DHCP (busybox udhcpc).
    cat > /tmp/dhcp.sh <<'EOS'
#!/bin/busybox sh
[ "$1" = bound ] || exit 0
ip addr add "$ip/$mask" dev "$interface"
ip route add default via "$router"
[ -n "$mtu" ] && ip link set "$interface" mtu "$mtu"
echo "LEASE ip=$ip router=$router mtu=$mtu lease=$lease"
EOS
    chmod +x /tmp/dhcp.sh
    ip link set eth0 up
    udhcpc -i eth0 -f -q -n -t 60 -T 1 -s /tmp/dhcp.sh 2>/dev/null || echo "RESULT error msg=no_lease"
else
    ip addr add "$ip/24" dev eth0
    ip link set eth0 up
fi
echo "FEATURES $(cat /sys/class/net/eth0/device/features 2>/dev/null) queues=$(ls -d /sys/class/net/eth0/queues/tx-* | wc -l)"
echo READY

# Waits until the peer answers (it may still be booting), then pings with 56 and 1400
# bytes of payload.
[ "$test" = tso ] && { vmtool tso eth0 "$dstmac" fd00::2 "${conns}"; vmtool stats eth0; echo DONE; poweroff -f; }
i=0
until ping -c 1 -W 1 "$peer" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -ge 120 ] && { echo "RESULT error msg=peer_unreachable"; break; }
done
for size in 56 1400; do
    out=$(ping -c 3 -i 0.2 -W 2 -s $size "$peer" 2>&1)
    sent=$(echo "$out" | sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p')
    recv=$(echo "$out" | sed -n 's/.* \([0-9]*\) packets received.*/\1/p')
    echo "RESULT ping size=$size sent=${sent:-0} received=${recv:-0}"
done

case "$test" in
    server) vmtool recv 5001 ;;
    server-loop) while :; do vmtool recv 5001; vmtool stats eth0; done ;;
    client) vmtool send "$peer" 5001 "$bytes" "$conns" ;;
    idle) ;;
    rr-server) vmtool rrserve 5002 ;;
    rr) vmtool rr "$peer" 5002 "$secs"; vmtool crr "$peer" 5002 "$secs" ;;
    source) head -c "$bytes" /dev/urandom > /tmp/blob
            echo "RESULT blob bytes=$(wc -c < /tmp/blob) sha256=$(sha256sum /tmp/blob | cut -d' ' -f1)"
            ping -q -i 0.01 "$peer" > /tmp/flood 2>&1 &
            flood=$!
            vmtool sendfile "$peer" 5001 /tmp/blob "$rate"
            kill -INT $flood; wait $flood
            sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' /tmp/flood)
            recv=$(sed -n 's/.* \([0-9]*\) packets received.*/\1/p' /tmp/flood)
            echo "RESULT flood sent=${sent:-0} received=${recv:-0}" ;;
    sink) nc -l -p 5001 > /tmp/blob
          echo "RESULT sink bytes=$(wc -c < /tmp/blob) sha256=$(sha256sum /tmp/blob | cut -d' ' -f1)" ;;
    exchange) nc -l -p 5001 > /tmp/in
          echo "RESULT sink bytes=$(wc -c < /tmp/in) sha256=$(sha256sum /tmp/in | cut -d' ' -f1)"
          rm /tmp/in
          head -c "$bytes" /dev/urandom > /tmp/blob
          echo "RESULT blob bytes=$(wc -c < /tmp/blob) sha256=$(sha256sum /tmp/blob | cut -d' ' -f1)"
          vmtool sendfile "$peer" 5001 /tmp/blob 0 ;;
esac
vmtool stats eth0
echo DONE
# Idle guests stay up (the test powers them off); the others power off now.
[ "$test" = idle ] || [ "$stay" = 1 ] && while :; do sleep 3600; done
poweroff -f

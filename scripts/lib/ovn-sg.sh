# Shared by the benchmarks' security-group and load-balancer scenarios (bench-pvp.sh,
# bench-vm-rr.sh, bench-cps.sh):
# Open vSwitch with DPDK, an OVN central in a directory, one logical switch of two ports with Neutron's security
# groups, and the namespace a vswitchd chassis keeps its tunnel endpoint in. Sourced, not
# run. The caller sets `central` (a directory) before calling any of these.
#
# The tenant (sg_tenant), Neutron's shape:
#   neutron_pg_drop   both ports; drops all IP both ways (priority 1001)
#   pg_<ls>           both ports; allow-related (1002) everything IPv4 a member sends, and
#                     what members send each other that matches the caller's filter
#                     (remote group $pg_<ls>_ip4): every admitted frame goes through
#                     conntrack in the sender's zone and in the receiver's

nbctl() { ovn-nbctl --db="unix:$central/nb.sock" --timeout=60 "$@"; }
sbctl() { ovn-sbctl --db="unix:$central/sb.sock" --timeout=60 "$@"; }

# shellcheck source=scripts/lib/procs.sh
. scripts/lib/procs.sh

# ovn_central: Northbound and Southbound ovsdb-servers and ovn-northd, all in $central.
ovn_central() {
    mkdir -p "$central"
    local db
    for db in nb sb; do
        ovsdb-tool create "$central/$db.db" "/usr/share/ovn/ovn-$db.ovsschema"
        ovsdb-server "$central/$db.db" --remote="punix:$central/$db.sock" \
            --pidfile="$central/$db.pid" --log-file="$central/$db.log" \
            --unixctl="$central/$db.ctl" --detach
    done
    OVN_RUNDIR=$central OVN_LOGDIR=$central ovn-northd --ovnnb-db="unix:$central/nb.sock" \
        --ovnsb-db="unix:$central/sb.sock" --pidfile="$central/northd.pid" \
        --log-file="$central/northd.log" --unixctl="$central/northd.ctl" --detach
}

# ovn_central_stop: kills what ovn_central started (the files stay).
ovn_central_stop() {
    local f
    for f in northd nb sb; do
        if [ -f "$central/$f.pid" ]; then kill "$(cat "$central/$f.pid")" 2>/dev/null || true; fi
    done
}

# two_ports LS PORT_A "MAC IP" SECURITY_A PORT_B "MAC IP" SECURITY_B: logical switch LS
# with the two ports, each with its addresses and port security.
two_ports() {
    nbctl ls-add "$1" \
        -- lsp-add "$1" "$2" -- lsp-set-addresses "$2" "$3" -- lsp-set-port-security "$2" "$4" \
        -- lsp-add "$1" "$5" -- lsp-set-addresses "$5" "$6" -- lsp-set-port-security "$5" "$7"
}

# sg_groups LS DROP PORT_A PORT_B FILTER: the security groups above on LS's two ports,
# port group DROP dropping all IP both ways (1001) and pg_LS admitting (allow-related,
# 1002) everything IPv4 a member sends and what matches FILTER (an OVN match) from the
# other members.
sg_groups() {
    local ls=$1 drop=$2 pa=$3 pb=$4 filter=$5
    nbctl pg-add "$drop" "$pa" "$pb" -- pg-add "pg_$ls" "$pa" "$pb"
    nbctl acl-add "$drop" to-lport 1001 "outport == @$drop && ip" drop \
        -- acl-add "$drop" from-lport 1001 "inport == @$drop && ip" drop \
        -- acl-add "pg_$ls" from-lport 1002 "inport == @pg_$ls && ip4" allow-related \
        -- acl-add "pg_$ls" to-lport 1002 \
        "outport == @pg_$ls && ip4 && ip4.src == \$pg_${ls}_ip4 && ($filter)" allow-related
}

# sg_tenant LS PORT_A "MAC IP" PORT_B "MAC IP" FILTER: logical switch LS with the two
# ports (port security: the port's MAC and IP, plus the other port's IP as an allowed
# source, as the PVP guests forward each other's frames), and the security groups above
# (neutron_pg_drop); FILTER is what a member admits from the other.
sg_tenant() {
    local ls=$1 pa=$2 a=$3 pb=$4 b=$5 filter=$6
    two_ports "$ls" "$pa" "$a" "$a ${b#* }" "$pb" "$b" "$b ${a#* }"
    sg_groups "$ls" neutron_pg_drop "$pa" "$pb" "$filter"
    nbctl --wait=sb sync
}

# lb_tenant LS PORT_A "MAC IP" PORT_B "MAC IP" VIP: logical switch LS with the two ports
# (port security: each port its own MAC and IP, nothing else), security groups of the
# same shape as sg_tenant's (port groups LS_drop and pg_LS; members admit UDP from each
# other), and a UDP load balancer LS-lb from VIP:9 to PORT_B's address, port 9, on LS:
# what PORT_A sends to the VIP reaches PORT_B DNAT'd, and PORT_B's answers reach PORT_A
# from the VIP, un-DNAT'd. Every frame passes conntrack twice (the sender's zone and the
# receiver's), one of them translating it.
lb_tenant() {
    local ls=$1 pa=$2 a=$3 pb=$4 b=$5 vip=$6
    two_ports "$ls" "$pa" "$a" "$a" "$pb" "$b" "$b"
    sg_groups "$ls" "${ls}_drop" "$pa" "$pb" udp
    nbctl lb-add "$ls-lb" "$vip:9" "${b#* }:9" udp -- ls-lb-add "$ls" "$ls-lb"
    nbctl --wait=sb sync
}

# fip_tenant CHASSIS PORT_A "MAC IP" PORT_B "MAC IP" FIP OUT: a floating IP, OpenStack's
# shape on a gateway router: switch fipout with PORT_A (the external client), switch fipin
# with PORT_B (the VM, 198.18.1.0/24), gateway router fipgw bound to CHASSIS
# (options:chassis) between them (fipgw-out at OUT, "MAC ADDRESS/PREFIX" on PORT_A's
# network; fipgw-in 198.18.1.254, MAC 00:00:00:00:f1:01), and dnat_and_snat
# FIP -> PORT_B's address. Port
# security on each port's own MAC and IP. What PORT_A sends to FIP (through the router's
# MAC) reaches PORT_B DNAT'd; what PORT_B sends PORT_A leaves SNAT'd to FIP.
fip_tenant() {
    local chassis=$1 pa=$2 a=$3 pb=$4 b=$5 fip=$6 out=$7
    nbctl ls-add fipout -- ls-add fipin \
        -- lsp-add fipout "$pa" -- lsp-set-addresses "$pa" "$a" \
        -- lsp-set-port-security "$pa" "$a" \
        -- lsp-add fipin "$pb" -- lsp-set-addresses "$pb" "$b" \
        -- lsp-set-port-security "$pb" "$b" \
        -- lr-add fipgw -- set logical_router fipgw "options:chassis=$chassis" \
        -- lrp-add fipgw fipgw-out "${out% *}" "${out#* }" \
        -- lrp-add fipgw fipgw-in 00:00:00:00:f1:01 198.18.1.254/24
    local sw
    for sw in out in; do
        nbctl lsp-add "fip$sw" "fip$sw-gw" -- lsp-set-type "fip$sw-gw" router \
            -- lsp-set-addresses "fip$sw-gw" router \
            -- lsp-set-options "fip$sw-gw" "router-port=fipgw-$sw"
    done
    nbctl lr-nat-add fipgw dnat_and_snat "$fip" "${b#* }"
    nbctl --wait=sb sync
}

# sg_ready PORT...: every port up (bound by its chassis) and every chassis caught up with
# the Northbound database; 60 s at most.
sg_ready() {
    local p args=()
    for p in "$@"; do args+=(-- wait-until Logical_Switch_Port "$p" up=true); done
    nbctl "${args[@]:1}"
    nbctl --wait=hv sync
}

# sg_netns NS: namespace NS with veth NS0 (198.51.100.1/24, a vswitchd chassis's tunnel
# uplink; idle when every port is on the one chassis) and its peer NS1.
sg_netns() {
    local ns=$1
    ip netns del "$ns" 2>/dev/null || true
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add "${ns}0" type veth peer name "${ns}1"
    ip -n "$ns" link set "${ns}0" up
    ip -n "$ns" link set "${ns}1" up
    ip -n "$ns" addr add 198.51.100.1/24 dev "${ns}0"
}

# ovs_dpdk DIR BRIDGE PREFIX [OTHER_CONFIG...]: Open vSwitch with DPDK (PMD on CPU 0,
# lcores on CPU 1, 512 MiB, DPDK file prefix PREFIX), its database and logs in DIR, and
# netdev bridge BRIDGE; OTHER_CONFIG are more `other_config:` settings. The caller adds
# the ports with `ovs-vsctl --db=unix:DIR/db.sock`.
ovs_dpdk() {
    local d=$1 br=$2 prefix=$3; shift 3
    local vsctl="ovs-vsctl --timeout=60 --db=unix:$d/db.sock" extra=() o
    for o in "$@"; do extra+=("other_config:$o"); done
    mkdir -p "$d"
    export OVS_RUNDIR=$d OVS_LOGDIR=$d OVS_DBDIR=$d
    ovsdb-tool create "$d/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$d/conf.db" --remote="punix:$d/db.sock" --pidfile="$d/ovsdb-server.pid" \
        --detach --log-file="$d/ovsdb.log"
    $vsctl --no-wait init
    $vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
        other_config:dpdk-lcore-mask=0x2 other_config:pmd-cpu-mask=0x1 \
        other_config:dpdk-socket-mem=512 "${extra[@]}" \
        "other_config:dpdk-extra=--file-prefix=$prefix --no-pci --single-file-segments"
    /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk "unix:$d/db.sock" \
        --pidfile="$d/ovs-vswitchd.pid" --detach --log-file="$d/ovs-vswitchd.log"
    $vsctl add-br "$br" -- set bridge "$br" datapath_type=netdev
}

# ovs_ovn_chassis VSCTL DIR CHASSIS: makes the OVS of database VSCTL an OVN chassis named
# CHASSIS (encap 198.51.100.1) of $central's Southbound, ovn-controller's files in DIR.
ovs_ovn_chassis() {
    local vsctl=$1 d=$2 chassis=$3
    $vsctl set open . "external_ids:system-id=$chassis" \
        "external_ids:ovn-remote=unix:$central/sb.sock" external_ids:ovn-encap-type=geneve \
        external_ids:ovn-encap-ip=198.51.100.1
    OVN_RUNDIR=$d OVN_LOGDIR=$d ovn-controller "unix:$d/db.sock" --pidfile="$d/ovn-controller.pid" \
        --detach --log-file="$d/ovn-controller.log"
}

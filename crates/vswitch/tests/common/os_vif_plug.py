#!/usr/bin/python3
"""Plugs or unplugs a vhost-user VIF through os-vif's ovs plugin, as Nova does
(nova/network/os_vif_util.py builds the same VIFVHostUser, os_vif.plug/unplug).

    os_vif_plug.py plug|unplug OVSDB_REMOTE VIF_ID MAC MODE SOCKET_PATH

MODE is the guest's side, as Nova's: 'server' (QEMU listens; OVS type
dpdkvhostuserclient on SOCKET_PATH) or 'client' (QEMU connects; OVS type
dpdkvhostuser). Prints the OVS port name os-vif chose (vhu + the VIF id).
"""
import sys
import tempfile

from oslo_config import cfg

import os_vif
from os_vif import objects


def main():
    action, remote, vif_id, mac, mode, path = sys.argv[1:7]
    # The ovs plugin reads its [os_vif_ovs] options when os_vif.initialize() loads it;
    # its privileged helper (unplug deletes the netdev) runs as we do (root), not
    # through sudo as on a Nova host.
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write("[os_vif_ovs]\novsdb_connection = %s\n" % remote)
        f.write("[vif_plug_ovs_privileged]\n"
                "helper_command = privsep-helper --config-file %s\n" % f.name)
    cfg.CONF(["--config-file", f.name], project="os_vif_plug")
    os_vif.initialize()
    network = objects.network.Network(
        id="b9e6e1a4-2d0e-4a8a-9a6e-5a1c3a7f0001", bridge="br-int",
        subnets=objects.subnet.SubnetList(objects=[]), mtu=1500)
    profile = objects.vif.VIFPortProfileOpenVSwitch(
        interface_id=vif_id, datapath_type="netdev")
    vif = objects.vif.VIFVHostUser(
        id=vif_id, address=mac, network=network, plugin="ovs",
        port_profile=profile, vif_name="vhu" + vif_id[:11],
        has_traffic_filtering=False, preserve_on_delete=False,
        active=False, mode=mode, path=path)
    instance = objects.instance_info.InstanceInfo(
        uuid="8ff5b4e2-7c1a-4d3e-9b55-6f1f0a2b0001", name="instance-00000001",
        project_id="p")
    if action == "plug":
        os_vif.plug(vif, instance)
    else:
        os_vif.unplug(vif, instance)
    print(vif.vif_name)


if __name__ == "__main__":
    main()

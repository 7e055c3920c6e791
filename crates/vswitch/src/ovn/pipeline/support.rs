//! Which logical actions vswitchd executes. A datapath whose flows use any other is
//! not claimed (DESIGN.md §9: refused, never guessed).

use ovn_lflow::Action;

/// The name of `a` if vswitchd does not execute it, else `None`.
///
/// Executed: the pipeline's own actions (`next`, `output`, assignments, `ip.ttl--`,
/// `clone`, port security checks, FDB and MAC binding lookups), connection tracking
/// with NAT (`ct_next`, `ct_commit`, `ct_commit_nat`, `ct_dnat`, `ct_snat` and their
/// `_in_czone` forms, `ct_lb_mark`/`ct_lb` with or without backends, `ct_clear`), a
/// load balancer's hairpin (`chk_lb_hairpin`, `chk_lb_hairpin_reply`,
/// `ct_snat_to_vip`) and affinity sessions (`chk_lb_aff`, `commit_lb_aff`), and the
/// controller actions of switches and routers (ARP and ND
/// requests and replies, ICMP errors, TCP resets, SCTP aborts, `reject`, DHCPv4 and
/// DHCPv6 replies, MAC binding learning). `log`, `set_meter` and `trigger_event`
/// have no effect on forwarding and are counted; `handle_svc_check` hands a load
/// balancer health check's answer to the chassis' prober (`ovn::svc_monitor`) and
/// `igmp` an IGMP/MLD report to the chassis' group database (`ovn::igmp`);
/// `handle_dhcpv6_reply` drops the packet, as ovn-controller does when nothing waits
/// for it; `check_pkt_larger` compares the frame's length (a TSO frame's segments').
pub fn refusal(a: &Action) -> Option<&'static str> {
    use Action::*;
    match a {
        Output
        | Next(_)
        | Load(_)
        | Move(_)
        | Push(_)
        | Pop(_)
        | Exchange(_)
        | DecTtl
        | CtNext(_)
        | CtCommitV1(_)
        | CtCommitV2(_)
        | CtLb(_)
        | CtLbMark(_)
        | CtClear
        | CtCommitNat(_)
        | CtDnat(_)
        | CtSnat(_)
        | CtDnatInCzone(_)
        | CtSnatInCzone(_)
        | CtSnatToVip
        | ChkLbHairpin(_)
        | ChkLbHairpinReply(_)
        | Clone(_)
        | Arp(_)
        | Icmp4(_)
        | Icmp4Error(_)
        | Icmp6(_)
        | Icmp6Error(_)
        | TcpReset(_)
        | SctpAbort(_)
        | Reject(_)
        | NdNa(_)
        | NdNaRouter(_)
        | NdNs(_)
        | GetArp(_)
        | PutArp(_)
        | LookupArp(_)
        | LookupArpIp(_)
        | GetNd(_)
        | PutNd(_)
        | LookupNd(_)
        | LookupNdIp(_)
        | PutDhcpv4Opts(_)
        | PutDhcpv6Opts(_)
        | Dhcp6Reply
        | Log(_)
        | SetMeter { .. }
        | TriggerEvent(_)
        | HandleSvcCheck(_)
        | OvnFieldLoad(_)
        | CheckInPortSec(_)
        | CheckOutPortSec(_)
        | GetFdb { .. }
        | LookupFdb { .. }
        | PutFdb { .. }
        | CommitLbAff(_)
        | ChkLbAff(_)
        | CheckPktLarger { .. }
        | Igmp => None,
        Select(_)
        | CommitEcmpNh { .. }
        | ChkEcmpNh(_)
        | ChkEcmpNhMac(_)
        | FwdGroup(_)
        | BindVport { .. }
        | DnsLookup(_)
        | PutNdRaOpts(_)
        | BfdMsg
        | Sample(_)
        | SetQueue(_) => Some(a.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovn_lflow::actions::{ActionParams, Pipeline};
    use ovn_lflow::dhcp::OptionTable;
    use ovn_lflow::SymbolTable;

    fn first(text: &str) -> Option<&'static str> {
        let symtab = SymbolTable::ovn();
        let (d4, d6, ra, ev) = (
            OptionTable::dhcpv4(),
            OptionTable::dhcpv6(),
            OptionTable::nd_ra(),
            OptionTable::new(),
        );
        let params = ActionParams {
            symtab: &symtab,
            dhcp_opts: &d4,
            dhcpv6_opts: &d6,
            nd_ra_opts: &ra,
            event_opts: &ev,
            pipeline: Pipeline::Ingress,
            n_tables: 29,
            cur_ltable: 5,
        };
        let acts = ovn_lflow::actions::parse(text, &params).unwrap().actions;
        acts.walk().into_iter().find_map(refusal)
    }

    #[test]
    fn nat_and_affinity_are_executed_and_the_rest_refused_by_name() {
        assert_eq!(first("ct_lb_mark;"), None);
        assert_eq!(first("ct_lb_mark(backends=10.0.0.2:80,10.0.0.3:80);"), None);
        assert_eq!(first("ct_dnat(10.0.0.5);"), None);
        assert_eq!(first("clone { ct_snat; };"), None);
        assert_eq!(first("ct_commit { ct_mark.blocked = 0; }; next;"), None);
        assert_eq!(first("reg0[6] = chk_lb_hairpin();"), None);
        assert_eq!(first("ct_snat_to_vip;"), None);
        assert_eq!(first("reg9[6] = chk_lb_aff(); next;"), None);
        assert_eq!(first("reg9[1] = check_pkt_larger(1418); next;"), None);
        assert_eq!(
            first("clone { reg0[1] = dns_lookup(); };"),
            Some("dns_lookup"),
            "nested"
        );
    }
}

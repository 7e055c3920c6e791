//! The actions parser on untrusted text: must never panic, and whatever
//! parses prints to text that parses and prints identically (test-ovn.c's
//! "bad reformat" check).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovn_lflow::actions::{self, ActionParams, Pipeline};
use ovn_lflow::dhcp::OptionTable;
use ovn_lflow::SymbolTable;
use std::sync::OnceLock;

struct Tables {
    symtab: SymbolTable,
    dhcp: OptionTable,
    dhcpv6: OptionTable,
    nd_ra: OptionTable,
    events: OptionTable,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| Tables {
        symtab: SymbolTable::ovn(),
        dhcp: OptionTable::dhcpv4(),
        dhcpv6: OptionTable::dhcpv6(),
        nd_ra: OptionTable::nd_ra(),
        events: OptionTable::empty_lb_backends(),
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let t = tables();
    let pp = ActionParams {
        symtab: &t.symtab,
        dhcp_opts: &t.dhcp,
        dhcpv6_opts: &t.dhcpv6,
        nd_ra_opts: &t.nd_ra,
        event_opts: &t.events,
        pipeline: Pipeline::Ingress,
        n_tables: 24,
        cur_ltable: 10,
    };
    let Ok(parsed) = actions::parse(text, &pp) else { return };
    let printed = parsed.actions.to_string();
    let again = actions::parse(&printed, &pp)
        .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which fails: {e}"));
    assert_eq!(again.actions.to_string(), printed, "{text:?}");
    let _ = parsed.actions.walk().iter().map(|a| a.name()).count();
    if let Some(p) = parsed.prereqs {
        let _ = p.to_string();
    }
});

//! Parses a real logical flow of OVN 23.03's northd (a switch's
//! `ls_in_acl` stage: allow new TCP connections to port 80 of the ports
//! of a port group), annotates and compiles its match, evaluates it on a
//! packet's flow, and parses and prints its actions.
//!
//! Run with `cargo run -p ovn-lflow --example lflow`.

use ovn_lflow::actions::{self, Action, ActionParams, Pipeline, Value};
use ovn_lflow::dhcp::OptionTable;
use ovn_lflow::{CompiledExpr, Expr, Field, Flow, MapContext, SymbolTable};

const MATCH: &str =
    "((ct.new && !ct.est) || (!ct.new && ct.est && !ct.rpl && ct_mark.blocked == 1)) \
                     && (outport == @pg_web && ip4 && tcp.dst == 80)";
const ACTIONS: &str = "reg0[1] = 1; next;";

fn main() -> Result<(), ovn_lflow::Error> {
    let symtab = SymbolTable::ovn();
    // What the Southbound database says: port keys and the port group
    // (northd names it "<datapath key>_<group>"; the caller resolves that).
    let ctx = MapContext::new()
        .with_port("vm1", 1)
        .with_port("web1", 2)
        .with_port_group("pg_web", &["web1"]);

    let parsed = Expr::parse(MATCH, &symtab)?;
    println!("match:     {parsed}");
    let annotated = parsed.annotate(&symtab, &ctx)?;
    println!("annotated: {annotated}");
    let m = CompiledExpr::compile(&annotated, &ctx)?;
    println!(
        "{} tests; exact conjuncts: {:?}",
        m.n_tests(),
        m.conjuncts().collect::<Vec<_>>()
    );

    // A TCP SYN from vm1 to web1:80, tracked and new (ct_state trk|new).
    let mut flow = Flow::new()
        .with(Field::LogInport, 1)
        .with(Field::LogOutport, 2)
        .with(Field::CtState, 0x21)
        .with(Field::EthType, 0x0800)
        .with(Field::IpProto, 6)
        .with(Field::TcpDst, 80);
    println!("SYN to web1:80 matches: {}", m.matches(&flow));
    let to_vm1 = flow.clone().with(Field::LogOutport, 1);
    println!("SYN to vm1:80 matches:  {}", m.matches(&to_vm1));

    let (dhcp, dhcpv6, nd_ra, events) = (
        OptionTable::dhcpv4(),
        OptionTable::dhcpv6(),
        OptionTable::nd_ra(),
        OptionTable::empty_lb_backends(),
    );
    let pp = ActionParams {
        symtab: &symtab,
        dhcp_opts: &dhcp,
        dhcpv6_opts: &dhcpv6,
        nd_ra_opts: &nd_ra,
        event_opts: &events,
        pipeline: Pipeline::Ingress,
        n_tables: 27,
        cur_ltable: 9,
    };
    let acts = actions::parse(ACTIONS, &pp)?;
    println!("actions:   {}", acts.actions);
    // A pipeline interpreter executes each action; here, the loads.
    for a in &acts.actions.0 {
        match a {
            Action::Load(l) => {
                if let Value::Int(i) = &l.value {
                    flow.write(&l.dst, i.value);
                }
            }
            Action::Next(n) => println!("next: table {} of {:?}", n.table, n.pipeline),
            other => println!("not executed here: {}", other.name()),
        }
    }
    println!("reg0 = {:#x}", flow.get_symbol(&symtab, "reg0")?);
    Ok(())
}

//! `vswitchctl ovn trace`: a packet given as a microflow (`inport == "vm1" && eth.src
//! == ... && ip4 && tcp.dst == 80`, as `ovn-trace` takes it) through the pipelines,
//! printed as `ovn-trace` prints its detailed and minimal traces.

use ovn_lflow::{CompiledExpr, Expr, Field, Flow};

use super::interp::{cs, CtReq, CtResult, Mode, Node, NodeKind, Origin, Outcome, Run, Tracker};
use super::tables::Pipelines;
use crate::model::lflow::NatSeen;

/// Connection tracking as `ovn-trace --ct` answers it: each step takes the next state
/// of the list, then `est|trk` (the interpreter does not ask for a NAT step of a packet
/// already tracked: `ct(nat)` implies `ct()` only for an untracked packet); commits
/// change nothing; a translation to an address is applied as asked, one without
/// (`ct_dnat;`) changes nothing (`ovn-trace` assumes no un-NAT entry). A load
/// balancer picks its backend by hash (`ovn-trace` at random: they agree where there
/// is one backend).
#[derive(Debug, Clone, Default)]
pub struct ScriptedCt {
    states: Vec<u32>,
    next: usize,
}

impl ScriptedCt {
    /// Answers lookups with `states` in turn.
    pub fn new(states: Vec<u32>) -> Self {
        ScriptedCt { states, next: 0 }
    }
}

/// What a tracer that does not track answers for `req` on `flow` in `state`: the
/// translation a request with an address asks for (and its `snat`/`dnat` bit).
pub fn traced_result(req: &CtReq, flow: &Flow, mut state: u32) -> CtResult {
    let nat = super::nat::traced_translation(req, flow).map(|packet| {
        state |= match req.nat {
            Some(conntrack::Nat::Src(_)) => 0x40,
            _ => 0x80,
        };
        NatSeen {
            packet,
            original: super::nat::endpoints_of(flow).unwrap_or(packet),
            inner: None,
        }
    });
    CtResult {
        state,
        nat,
        ..CtResult::default()
    }
}

impl Tracker for ScriptedCt {
    fn ct(&mut self, req: &CtReq, (flow, _): (&Flow, &Origin)) -> CtResult {
        if req.is_plain_commit() {
            return CtResult::default();
        }
        let state = self
            .states
            .get(self.next)
            .copied()
            .unwrap_or(cs::EST | cs::TRK);
        self.next += 1;
        traced_result(req, flow, state)
    }

    fn zone(&mut self, _dp: u32, port: u16) -> u16 {
        port
    }
}

/// Parses `--ct` flags as `ovn-trace` does: `new`, `est|trk`, `rpl,est` (names joined
/// by `|` or `,`); `trk` is implied.
///
/// # Errors
/// An unknown flag name.
pub fn parse_ct_state(s: &str) -> Result<u32, String> {
    let mut state = cs::TRK;
    for name in s.split(['|', ',']).map(str::trim).filter(|n| !n.is_empty()) {
        state |= match name {
            "new" => cs::NEW,
            "est" => cs::EST,
            "rel" => cs::REL,
            "rpl" => cs::RPL,
            "inv" => cs::INV,
            "trk" => cs::TRK,
            "snat" => 0x40,
            "dnat" => 0x80,
            other => return Err(format!("unknown ct_state flag {other:?}")),
        };
    }
    Ok(state)
}

/// The datapath and fields of `microflow`: the datapath of its `inport`, every field
/// the expression pins (with the prerequisites it implies), the rest zero.
///
/// # Errors
/// The expression does not parse, names no known `inport`, or leaves a prerequisite
/// open (`tcp.dst == 80` alone: IPv4 or IPv6? say `ip4 && tcp.dst == 80`).
pub fn microflow(p: &Pipelines, text: &str) -> Result<(u32, Flow), String> {
    let e = Expr::parse(text, &p.symtab).map_err(|e| format!("microflow: {e}"))?;
    let inport = find_inport(&e).ok_or("the microflow must say inport == \"NAME\"")?;
    let &(dp_key, _) = p
        .ports
        .get(&inport)
        .ok_or_else(|| format!("unknown logical port {inport:?}"))?;
    let dp = p
        .datapath(dp_key)
        .ok_or("the port's datapath is not local")?;
    let ctx = ovn_lflow::MapContext {
        ports: dp
            .names
            .iter()
            .map(|(n, k)| (n.clone(), u32::from(*k)))
            .collect(),
        ..Default::default()
    };
    let annotated = e
        .annotate(&p.symtab, &ctx)
        .map_err(|e| format!("microflow: {e}"))?;
    let m = CompiledExpr::compile(&annotated, &ctx).map_err(|e| format!("microflow: {e}"))?;
    let mut flow = Flow::new();
    for c in m.conjuncts() {
        flow.set(c.field, (flow.get(c.field) & !c.mask) | c.value);
    }
    if !m.matches(&flow) {
        return Err(format!(
            "microflow {text:?} does not pin every prerequisite: name the protocols (ip4 or ip6, tcp, udp...) explicitly"
        ));
    }
    Ok((dp_key, flow))
}

fn find_inport(e: &Expr) -> Option<String> {
    match e {
        Expr::StrCmp(s) if s.symbol.name == "inport" && s.relop == ovn_lflow::Relop::Eq => {
            Some(s.value.clone())
        }
        Expr::And(v) => v.iter().find_map(find_inport),
        _ => None,
    }
}

/// Traces `microflow` through `p` with connection tracking answering `ct` in turn,
/// ports on other chassis reached as `mode` says (as `ovn-trace` would, every port
/// local; or as this chassis does, by tunnel): the outcome and the trace tree.
///
/// # Errors
/// As [`microflow`].
pub fn trace(
    p: &Pipelines,
    text: &str,
    ct: Vec<u32>,
    mode: Mode,
) -> Result<(Outcome, Vec<Node>), String> {
    let (dp, flow) = microflow(p, text)?;
    let mut tracker = ScriptedCt::new(ct);
    let mut nodes = Vec::new();
    let outcome = Run::new(p, &mut tracker, mode).run(
        dp,
        ovn_lflow::actions::Pipeline::Ingress,
        flow,
        Some(&mut nodes),
    );
    Ok((outcome, nodes))
}

/// The minimal trace (`ovn-trace --minimal`): only what changes the packet, the
/// transformations and the outputs.
pub fn minimal(nodes: &[Node]) -> String {
    let mut out = String::new();
    print_summary(&mut out, &prune_hard(nodes), 0);
    out
}

/// `ovn-trace`'s `ovntrace_node_prune_hard`: actions, pipelines, tables and output
/// notes give way to their children.
fn prune_hard(nodes: &[Node]) -> Vec<Node> {
    let mut out = Vec::new();
    for n in nodes {
        let subs = prune_hard(&n.subs);
        match n.kind {
            NodeKind::Action | NodeKind::Pipeline | NodeKind::Table | NodeKind::Output => {
                out.extend(subs)
            }
            _ => out.push(Node {
                kind: n.kind,
                text: n.text.clone(),
                subs,
            }),
        }
    }
    out
}

fn print_summary(out: &mut String, nodes: &[Node], level: usize) {
    for n in nodes {
        if n.kind == NodeKind::Action && n.text.starts_with("next(") {
            continue;
        }
        out.push_str(&" ".repeat(level * 4));
        out.push_str(&n.text);
        if !n.subs.is_empty() {
            out.push_str(" {\n");
            print_summary(out, &n.subs, level + 1);
            out.push_str(&" ".repeat(level * 4));
            out.push('}');
        }
        if n.kind != NodeKind::Action {
            out.push(';');
        }
        out.push('\n');
    }
}

/// The detailed trace (`ovn-trace --detailed`): pipelines, tables with the flow that
/// matched, actions.
pub fn detailed(nodes: &[Node]) -> String {
    let mut out = String::new();
    print_details(&mut out, nodes, 0);
    out
}

fn print_details(out: &mut String, nodes: &[Node], level: usize) {
    for (i, n) in nodes.iter().enumerate() {
        if n.kind == NodeKind::Modify {
            continue;
        }
        let terminal = matches!(
            n.kind,
            NodeKind::Output | NodeKind::Modify | NodeKind::Action | NodeKind::Error
        );
        let more = usize::from(i + 1 < nodes.len() || terminal);
        let title = matches!(n.kind, NodeKind::Pipeline | NodeKind::Transformation);
        if title {
            out.push('\n');
        }
        let indent = " ".repeat((level + more) * 4);
        out.push_str(&indent);
        out.push_str(&n.text);
        out.push('\n');
        if title {
            out.push_str(&indent);
            out.push_str(&"-".repeat(n.text.len()));
            out.push('\n');
        }
        print_details(out, &n.subs, level + 2 * more);
    }
}

/// The fields of `flow` that differ from zero, as `name=value` (for a trace's header
/// line).
pub fn flow_text(flow: &Flow) -> String {
    Field::all()
        .filter(|f| flow.get(*f) != 0)
        .map(|f| format!("{}={:#x}", f.info().name, flow.get(f)))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ct_flags_parse_as_ovn_trace_takes_them() {
        assert_eq!(parse_ct_state("new"), Ok(cs::NEW | cs::TRK));
        assert_eq!(parse_ct_state("est|rpl"), Ok(cs::EST | cs::RPL | cs::TRK));
        assert!(parse_ct_state("bogus").is_err());
    }

    #[test]
    fn minimal_keeps_changes_transformations_and_outputs() {
        let leaf = |kind, text: &str| Node {
            kind,
            text: text.into(),
            subs: Vec::new(),
        };
        let nodes = vec![Node {
            kind: NodeKind::Pipeline,
            text: "ingress(dp=\"sw0\", inport=\"vm1\")".into(),
            subs: vec![
                leaf(NodeKind::Action, "next;"),
                Node {
                    kind: NodeKind::Transformation,
                    text: "ct_next(ct_state=new|trk)".into(),
                    subs: vec![
                        leaf(NodeKind::Modify, "ip.ttl--"),
                        leaf(NodeKind::Modify, "output(\"vm4\")"),
                    ],
                },
            ],
        }];
        assert_eq!(
            minimal(&nodes),
            "ct_next(ct_state=new|trk) {\n    ip.ttl--;\n    output(\"vm4\");\n};\n"
        );
    }
}

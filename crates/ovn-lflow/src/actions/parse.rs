//! The actions parser (actions.c `ovnacts_parse()` and one `parse_*()` per
//! action). Errors are actions.c's; the first one wins, as there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::dhcp::OptionTable;
use crate::error::{Error, Result};
use crate::expr::{AndOr, ParseCtx, SetItem};
use crate::lex::{IntFormat, Lexer, Token};
use crate::symtab::{SymbolTable, WriteScope, WR_CT_COMMIT, WR_DEFAULT};

/// actions.c `MAX_NESTED_ACTION_DEPTH`.
const MAX_NESTED_ACTION_DEPTH: u32 = 32;

/// The actions that start with a keyword and are not nested (the rest
/// start with a field).
const KEYWORDS: &[&str] = &[
    "next",
    "push",
    "pop",
    "output",
    "ip.ttl",
    "ct_next",
    "ct_commit",
    "ct_dnat",
    "ct_snat",
    "ct_dnat_in_czone",
    "ct_snat_in_czone",
    "ct_lb",
    "ct_lb_mark",
    "ct_clear",
    "ct_commit_nat",
    "igmp",
    "get_arp",
    "put_arp",
    "get_nd",
    "put_nd",
    "set_queue",
    "log",
    "set_meter",
    "trigger_event",
    "bind_vport",
    "handle_svc_check",
    "fwd_group",
    "handle_dhcpv6_reply",
    "handle_bfd_msg",
    "ct_snat_to_vip",
    "put_fdb",
    "commit_ecmp_nh",
    "commit_lb_aff",
    "sample",
];

/// The actions that run `{ nested actions }` (actions.c
/// `parse_nested_action()` callers): name, the prerequisite they add (with
/// none, the inner actions' prerequisites join the outer ones), whether the
/// inner actions get the default write scope (else the enclosing one), and
/// the variant.
#[allow(clippy::type_complexity)]
const NESTED: &[(&str, Option<&str>, bool, fn(Actions) -> Action)] = &[
    ("clone", None, true, Action::Clone),
    ("arp", Some("ip4"), false, Action::Arp),
    ("icmp4", Some("ip4"), false, Action::Icmp4),
    ("icmp4_error", Some("ip4"), false, Action::Icmp4Error),
    ("icmp6", Some("ip6"), false, Action::Icmp6),
    ("icmp6_error", Some("ip6"), false, Action::Icmp6Error),
    ("tcp_reset", Some("tcp"), false, Action::TcpReset),
    ("sctp_abort", Some("sctp"), false, Action::SctpAbort),
    ("nd_na", Some("nd_ns"), false, Action::NdNa),
    ("nd_na_router", Some("nd_ns"), false, Action::NdNaRouter),
    ("nd_ns", Some("ip6"), false, Action::NdNs),
    ("reject", None, false, Action::Reject),
];

/// What the parser needs besides the text (actions.h
/// `struct ovnact_parse_params`).
#[derive(Debug, Clone, Copy)]
pub struct ActionParams<'a> {
    /// Symbols.
    pub symtab: &'a SymbolTable,
    /// Options of `put_dhcp_opts`.
    pub dhcp_opts: &'a OptionTable,
    /// Options of `put_dhcpv6_opts`.
    pub dhcpv6_opts: &'a OptionTable,
    /// Options of `put_nd_ra_opts`.
    pub nd_ra_opts: &'a OptionTable,
    /// Options of `trigger_event(event = "empty_lb_backends", ...)`.
    pub event_opts: &'a OptionTable,
    /// The pipeline of the flow.
    pub pipeline: Pipeline,
    /// Number of tables in each pipeline (0 forbids `next`).
    pub n_tables: u8,
    /// The flow's table.
    pub cur_ltable: u8,
}

/// Parses an actions string (actions.c `ovnacts_parse_string()`).
pub fn parse(input: &str, params: &ActionParams<'_>) -> Result<ParsedActions> {
    let mut p = Parser {
        p: ParseCtx::for_actions(Lexer::new(input), params.symtab),
        pp: params,
        prereqs: None,
        depth: 0,
        scope: WR_DEFAULT,
    };
    let actions = p.parse_actions(&Token::End)?;
    Ok(ParsedActions {
        actions,
        prereqs: p.prereqs,
    })
}

/// actions.c `struct action_context`.
struct Parser<'a, 's> {
    p: ParseCtx<'a, 's>,
    pp: &'s ActionParams<'s>,
    prereqs: Option<Expr>,
    depth: u32,
    scope: WriteScope,
}

type R<T> = Result<T>;

fn kind_name(f: &FieldRef) -> &'static str {
    if f.symbol.width != 0 {
        "integer"
    } else {
        "string"
    }
}

impl<'a, 's> Parser<'a, 's> {
    fn lexer(&mut self) -> &mut Lexer<'a> {
        &mut self.p.lexer
    }

    fn tok(&self) -> &Token {
        &self.p.lexer.token
    }

    fn err(&self, m: impl Into<String>) -> Error {
        self.p.lexer.error(m)
    }

    fn syntax(&self, m: Option<&str>) -> Error {
        self.p.lexer.syntax_error(m)
    }

    fn expect(&mut self, t: Token) -> R<()> {
        self.lexer().force_match(&t)
    }

    /// actions.c `add_prerequisite()`: parsed, not annotated.
    fn add_prerequisite(&mut self, prereq: &str) -> R<()> {
        let e = Expr::parse(prereq, self.pp.symtab)?;
        self.prereqs = Some(Expr::combine_opt(AndOr::And, self.prereqs.take(), e));
        Ok(())
    }

    /// actions.c `parse_actions()`: until `sentinel`; `drop;` alone is
    /// the empty list.
    fn parse_actions(&mut self, sentinel: &Token) -> R<Actions> {
        let mut out = Vec::new();
        if matches!(self.tok(), Token::Id(s) if s == "drop")
            && self.p.lexer.lookahead() == Token::Semicolon
        {
            self.lexer().get();
            self.lexer().get();
            self.lexer().force_match(sentinel)?;
            return Ok(Actions(out));
        }
        while !self.lexer().matches(sentinel) {
            if let Some(a) = self.parse_action()? {
                out.push(a);
            }
        }
        // A switch holds 10^4 parsed action lists for its life: no growth slack.
        out.shrink_to_fit();
        Ok(Actions(out))
    }

    /// actions.c `parse_action()`: one action and its `;`.
    fn parse_action(&mut self) -> R<Option<Action>> {
        if let Token::Template(_) = self.tok() {
            return Err(self.err("Unexpanded template."));
        }
        let Token::Id(id) = self.tok().clone() else {
            return Err(self.syntax(None));
        };
        let la = self.p.lexer.lookahead();
        let a = if matches!(la, Token::Equals | Token::Exchange | Token::LSquare) {
            self.parse_set_action()?
        } else {
            self.parse_keyword_action(&id)?
        };
        if a.is_none() {
            // A parse function gave up without an error, as actions.c's do
            // where `lexer_get_int()` fails; OVN then reports the missing
            // `;`, or, if there is one, carries on with a half-built action.
            if *self.tok() == Token::Semicolon {
                return Err(self.syntax(Some("expecting small integer")));
            }
        }
        self.expect(Token::Semicolon)?;
        Ok(a)
    }

    fn parse_keyword_action(&mut self, id: &str) -> R<Option<Action>> {
        if !KEYWORDS.contains(&id) && !NESTED.iter().any(|n| n.0 == id) {
            return Err(self.syntax(Some("expecting action")));
        }
        self.lexer().get();
        if let Some(&(_, prereq, default_scope, make)) = NESTED.iter().find(|n| n.0 == id) {
            let scope = if default_scope {
                WR_DEFAULT
            } else {
                self.scope
            };
            return Ok(Some(make(self.parse_nested(prereq, scope)?)));
        }
        if id.starts_with("ct_") {
            return self.parse_ct_keyword(id).map(Some);
        }
        self.parse_other_keyword(id)
    }

    /// The other actions that start with their keyword.
    fn parse_other_keyword(&mut self, id: &str) -> R<Option<Action>> {
        use Action::*;
        Ok(Some(match id {
            "next" => self.parse_next()?,
            "push" => Push(self.parse_push_pop(true)?),
            "pop" => Pop(self.parse_push_pop(false)?),
            "output" => Output,
            "ip.ttl" => {
                self.expect(Token::Decrement)?;
                self.add_prerequisite("ip")?;
                DecTtl
            }
            "igmp" => Igmp,
            "get_arp" => GetArp(self.parse_get_mac_bind(32)?),
            "put_arp" => PutArp(self.parse_put_mac_bind(32)?),
            "get_nd" => GetNd(self.parse_get_mac_bind(128)?),
            "put_nd" => PutNd(self.parse_put_mac_bind(128)?),
            "set_queue" => return self.parse_set_queue(),
            "log" => Log(self.parse_log()?),
            "set_meter" => self.parse_set_meter()?,
            "trigger_event" => TriggerEvent(self.parse_trigger_event()?),
            "bind_vport" => self.parse_bind_vport()?,
            "handle_svc_check" => HandleSvcCheck(self.parse_port_arg()?),
            "fwd_group" => FwdGroup(self.parse_fwd_group()?),
            "handle_dhcpv6_reply" => Dhcp6Reply,
            "handle_bfd_msg" => {
                self.expect(Token::LParen)?;
                self.expect(Token::RParen)?;
                BfdMsg
            }
            "put_fdb" => self.parse_put_fdb()?,
            "commit_ecmp_nh" => self.parse_commit_ecmp_nh()?,
            "commit_lb_aff" => CommitLbAff(self.parse_commit_lb_aff()?),
            "sample" => Sample(self.parse_sample()?),
            // Unreachable while KEYWORDS lists exactly these.
            _ => return Err(self.err(format!("Syntax error at `{id}' expecting action."))),
        }))
    }

    /// `(port)`: one string field.
    fn parse_port_arg(&mut self) -> R<FieldRef> {
        self.expect(Token::LParen)?;
        let port = self.action_field(0, false)?;
        self.expect(Token::RParen)?;
        Ok(port)
    }

    fn parse_put_fdb(&mut self) -> R<Action> {
        self.expect(Token::LParen)?;
        let port = self.action_field(0, false)?;
        self.expect(Token::Comma)?;
        let mac = self.action_field(48, false)?;
        self.expect(Token::RParen)?;
        Ok(Action::PutFdb { port, mac })
    }

    fn not_last_table(&self, name: &str) -> R<()> {
        if self.pp.cur_ltable >= self.pp.n_tables {
            return Err(self.err(format!("\"{name}\" action not allowed in last table.")));
        }
        Ok(())
    }

    /// expr.c `expr_field_parse()`: a field that is not a predicate, whose
    /// prerequisites (and its parents') join the actions' prerequisites.
    fn field(&mut self) -> R<FieldRef> {
        let f = self.p.parse_field()?;
        if f.symbol.predicate().is_some() {
            let m = format!(
                "Predicate symbol {} used where lvalue required.",
                f.symbol.name
            );
            return Err(self.err(m));
        }
        let pre = crate::expr::field_prereqs(&f.symbol, self.pp.symtab)
            .map_err(|e| self.err(e.message()))?;
        for e in pre {
            self.prereqs = Some(Expr::combine_opt(AndOr::And, self.prereqs.take(), e));
        }
        Ok(f)
    }

    /// expr.c `expr_type_check()`.
    fn type_check(&self, f: &FieldRef, n_bits: u16, rw: bool) -> R<()> {
        let name = &f.symbol.name;
        if n_bits != f.n_bits {
            let m = if n_bits != 0 && f.n_bits != 0 {
                format!(
                    "Cannot use {}-bit field {name}[{}..{}] where {n_bits}-bit field is required.",
                    f.n_bits,
                    f.ofs,
                    f.ofs + f.n_bits - 1
                )
            } else if n_bits != 0 {
                format!("Cannot use string field {name} where numeric field is required.")
            } else {
                format!("Cannot use numeric field {name} where string field is required.")
            };
            return Err(self.err(m));
        }
        if rw && f.symbol.rw & self.scope == 0 {
            return Err(self.err(format!("Field {name} is not modifiable.")));
        }
        Ok(())
    }

    /// actions.c `action_parse_field()`.
    fn action_field(&mut self, n_bits: u16, rw: bool) -> R<FieldRef> {
        let f = self.field()?;
        self.type_check(&f, n_bits, rw)?;
        Ok(f)
    }

    /// actions.c `action_parse_uint16()`.
    fn uint16(&mut self, what: &str) -> R<u16> {
        if let Some(v) = self.small_int().filter(|&v| v <= 65535) {
            self.lexer().get();
            return Ok(v as u16);
        }
        Err(self.syntax(Some(&format!("expecting {what}"))))
    }

    fn small_int(&self) -> Option<u32> {
        let mut l = self.p.lexer.clone();
        l.get_int().map(|v| v as u32)
    }

    fn decimal(&self) -> Option<u64> {
        match self.tok() {
            Token::Integer(i) if i.mask.is_none() && i.format == IntFormat::Decimal => {
                Some(i.value as u64)
            }
            _ => None,
        }
    }

    fn unmasked_int(&self) -> Option<crate::lex::Int> {
        match self.tok() {
            Token::Integer(i) if i.mask.is_none() => Some(*i),
            _ => None,
        }
    }

    fn parse_next(&mut self) -> R<Action> {
        let pp = self.pp;
        if pp.n_tables == 0 {
            return Err(self.err("\"next\" action not allowed here."));
        }
        let mut pipeline = pp.pipeline;
        let mut table = i32::from(pp.cur_ltable) + 1;
        if self.lexer().matches(&Token::LParen) {
            if let Some(t) = self.lexer().get_int() {
                table = t;
            } else {
                loop {
                    if self.lexer().match_id("pipeline") {
                        self.expect(Token::Equals)?;
                        pipeline = if self.lexer().match_id("ingress") {
                            Pipeline::Ingress
                        } else if self.lexer().match_id("egress") {
                            Pipeline::Egress
                        } else {
                            return Err(self.syntax(Some("expecting \"ingress\" or \"egress\"")));
                        };
                    } else if self.lexer().match_id("table") {
                        self.expect(Token::Equals)?;
                        table = self.lexer().force_int()?;
                    } else {
                        return Err(self.syntax(Some("expecting \"pipeline\" or \"table\"")));
                    }
                    if !self.lexer().matches(&Token::Comma) {
                        break;
                    }
                }
            }
            self.expect(Token::RParen)?;
        }
        if table >= i32::from(pp.n_tables) {
            let m = format!(
                "\"next\" action cannot advance beyond table {}.",
                pp.n_tables - 1
            );
            return Err(self.err(m));
        }
        Ok(Action::Next(Next {
            pipeline,
            table: table as u8,
            src_pipeline: pp.pipeline,
            src_table: pp.cur_ltable,
        }))
    }

    fn parse_push_pop(&mut self, push: bool) -> R<FieldRef> {
        self.expect(Token::LParen)?;
        let f = self.field()?;
        self.type_check(&f, f.n_bits, !push)?;
        self.expect(Token::RParen)?;
        Ok(f)
    }

    /// actions.c `parse_nested_action()`: `{ actions }`. With a
    /// prerequisite, the inner actions' prerequisites are dropped and it is
    /// added instead; without, they join the outer ones.
    fn parse_nested(&mut self, prereq: Option<&str>, scope: WriteScope) -> R<Actions> {
        self.expect(Token::LCurly)?;
        if self.depth + 1 == MAX_NESTED_ACTION_DEPTH {
            return Err(self.err("maximum depth of nested actions reached"));
        }
        let outer = (self.prereqs.take(), self.depth, self.scope);
        self.depth += 1;
        self.scope = scope;
        let inner = self.parse_actions(&Token::RCurly);
        let inner_prereqs = self.prereqs.take();
        (self.prereqs, self.depth, self.scope) = outer;
        match prereq {
            Some(p) => self.add_prerequisite(p)?,
            None => {
                if let Some(i) = inner_prereqs {
                    let outer = self.prereqs.take();
                    self.prereqs = Some(match outer {
                        Some(o) => Expr::combine(AndOr::And, i, o),
                        None => i,
                    });
                }
            }
        }
        inner
    }

    fn parse_get_mac_bind(&mut self, width: u16) -> R<GetMacBind> {
        self.expect(Token::LParen)?;
        let port = self.action_field(0, false)?;
        self.expect(Token::Comma)?;
        let ip = self.action_field(width, false)?;
        self.expect(Token::RParen)?;
        Ok(GetMacBind { port, ip })
    }

    fn parse_put_mac_bind(&mut self, width: u16) -> R<PutMacBind> {
        self.expect(Token::LParen)?;
        let port = self.action_field(0, false)?;
        self.expect(Token::Comma)?;
        let ip = self.action_field(width, false)?;
        self.expect(Token::Comma)?;
        let mac = self.action_field(48, false)?;
        self.expect(Token::RParen)?;
        Ok(PutMacBind { port, ip, mac })
    }

    fn parse_set_queue(&mut self) -> R<Option<Action>> {
        self.expect(Token::LParen)?;
        let Some(q) = self.lexer().get_int() else {
            return Ok(None);
        };
        self.expect(Token::RParen)?;
        if !(0..=0xf000).contains(&q) {
            let m = format!("Queue ID {q} for set_queue is not in valid range 0 to 61440.");
            return Err(self.err(m));
        }
        Ok(Some(Action::SetQueue(q as u16)))
    }
}

mod ct;
mod misc;
mod opts;
mod set;

pub(crate) use opts::parse_host_port;

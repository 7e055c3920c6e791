//! What an expression needs from the outside world: address sets, port
//! groups, port keys and chassis residency (the tables and callbacks
//! ovn-controller passes to `expr_parse()`, `expr_to_matches()` and
//! `expr_evaluate_condition()`).

use std::collections::{HashMap, HashSet};

use super::parse::{build_cmps, check_width, nominal_predicate_error, MASKED_RELOP};
use super::{AndOr, Expr, Relop, SetCmp, SetItem};
use crate::error::{Error, Result};
use crate::lex::Int;
use crate::lex::{Lexer, Token};
use crate::symtab::Level;

/// The caller's view of the Southbound database and of this chassis.
pub trait Context {
    /// The values of address set `name` (SB `Address_Set`), if it exists.
    fn address_set(&self, name: &str) -> Option<&AddressSet>;
    /// The member port names of port group `name` (SB `Port_Group`, whose
    /// names northd prefixes with the datapath key), if it exists.
    fn port_group(&self, name: &str) -> Option<&[String]>;
    /// The tunnel key of logical port `name` (SB `Port_Binding`), which is
    /// what `inport == "name"` compares.
    fn port_key(&self, name: &str) -> Option<u32>;
    /// Whether logical port `name` is bound to this chassis.
    fn is_chassis_resident(&self, name: &str) -> bool;
}

/// The values of an address set, lexed and sorted as ovn-controller does
/// (expr.c `expr_constant_set_create_integers()`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressSet {
    values: Vec<Int>,
}

impl AddressSet {
    /// Lexes each address (`10.0.0.1`, `10.0.0.0/8`, `::1`, a MAC); like
    /// OVN, an entry that does not start with an integer token is skipped.
    pub fn new<S: AsRef<str>>(addresses: impl IntoIterator<Item = S>) -> AddressSet {
        let mut values: Vec<Int> = addresses
            .into_iter()
            .filter_map(|a| match Lexer::new(a.as_ref()).token {
                Token::Integer(i) => Some(i),
                _ => None,
            })
            .collect();
        values.sort_by(|a, b| {
            (a.value, a.mask.is_some(), a.mask.unwrap_or(0)).cmp(&(
                b.value,
                b.mask.is_some(),
                b.mask.unwrap_or(0),
            ))
        });
        AddressSet { values }
    }

    /// The values, sorted.
    pub fn values(&self) -> &[Int] {
        &self.values
    }
}

/// A [`Context`] made of maps, for tools, tests and small users.
#[derive(Debug, Clone, Default)]
pub struct MapContext {
    /// Address sets by name.
    pub address_sets: HashMap<String, AddressSet>,
    /// Port groups by name.
    pub port_groups: HashMap<String, Vec<String>>,
    /// Port keys by port name.
    pub ports: HashMap<String, u32>,
    /// Ports resident on this chassis.
    pub resident: HashSet<String>,
}

impl MapContext {
    /// An empty context: no sets, no ports, nothing resident.
    pub fn new() -> MapContext {
        MapContext::default()
    }

    /// Adds an address set.
    pub fn with_address_set<S: AsRef<str>>(mut self, name: &str, addresses: &[S]) -> Self {
        self.address_sets
            .insert(name.to_string(), AddressSet::new(addresses));
        self
    }

    /// Adds a port group.
    pub fn with_port_group<S: AsRef<str>>(mut self, name: &str, ports: &[S]) -> Self {
        let ports = ports.iter().map(|p| p.as_ref().to_string()).collect();
        self.port_groups.insert(name.to_string(), ports);
        self
    }

    /// Adds a port and its key.
    pub fn with_port(mut self, name: &str, key: u32) -> Self {
        self.ports.insert(name.to_string(), key);
        self
    }

    /// Marks a port resident on this chassis.
    pub fn with_resident(mut self, name: &str) -> Self {
        self.resident.insert(name.to_string());
        self
    }
}

impl Context for MapContext {
    fn address_set(&self, name: &str) -> Option<&AddressSet> {
        self.address_sets.get(name)
    }
    fn port_group(&self, name: &str) -> Option<&[String]> {
        self.port_groups.get(name).map(Vec::as_slice)
    }
    fn port_key(&self, name: &str) -> Option<u32> {
        self.ports.get(name).copied()
    }
    fn is_chassis_resident(&self, name: &str) -> bool {
        self.resident.contains(name)
    }
}

/// Replaces every set comparison in `e` by its expansion.
pub(super) fn resolve(e: Expr, ctx: &dyn Context) -> Result<Expr> {
    match e {
        Expr::SetCmp(s) => expand(s, ctx),
        Expr::And(v) => resolve_andor(AndOr::And, v, ctx),
        Expr::Or(v) => resolve_andor(AndOr::Or, v, ctx),
        e => Ok(e),
    }
}

fn resolve_andor(kind: AndOr, v: Vec<Expr>, ctx: &dyn Context) -> Result<Expr> {
    let mut out = Vec::with_capacity(v.len());
    for e in v {
        match (kind, resolve(e, ctx)?) {
            (AndOr::And, Expr::And(w)) | (AndOr::Or, Expr::Or(w)) => out.extend(w),
            (_, e) => out.push(e),
        }
    }
    Ok(kind.make(out))
}

/// Expands one set comparison the way expr.c's `make_cmp()` treats the
/// set's values, with its messages.
fn expand(s: SetCmp, ctx: &dyn Context) -> Result<Expr> {
    let mut values = Vec::new();
    for item in &s.items {
        match item {
            SetItem::AddressSet(n) => {
                let set = ctx.address_set(n).ok_or_else(|| {
                    Error::Resolve(format!(
                        "Syntax error at `${n}' expecting address set name."
                    ))
                })?;
                values.extend(set.values().iter().map(|i| SetItem::Int(*i)));
            }
            SetItem::PortGroup(n) => {
                let ports = ctx.port_group(n).ok_or_else(|| {
                    Error::Resolve(format!("Syntax error at `@{n}' expecting port group name."))
                })?;
                values.extend(ports.iter().map(|p| SetItem::Str(p.clone())));
            }
            v => values.push(v.clone()),
        }
    }
    check_values(&s, &values)?;
    let e = build_cmps(&s.field, s.relop, values.iter());
    Ok(if s.negated { !e } else { e })
}

fn check_values(s: &SetCmp, values: &[SetItem]) -> Result<()> {
    let sym = &s.field.symbol;
    for v in values {
        if let SetItem::Int(i) = v {
            check_width(i, &s.field).map_err(Error::Resolve)?;
        }
    }
    if !s.relop.is_equality() {
        match values.first() {
            None => {
                return Err(Error::Resolve(
                    "Only == and != operators may be used to compare a field against an empty \
                     value set."
                        .into(),
                ))
            }
            Some(SetItem::Int(i)) if i.mask.is_some() => {
                return Err(Error::Resolve(MASKED_RELOP.into()))
            }
            _ => {}
        }
    }
    if sym.level == Level::Nominal && sym.predicate().is_some() {
        for v in values {
            if let SetItem::Int(i) = v {
                if !((i.value & 1 == 1) ^ (s.relop == Relop::Ne)) {
                    return Err(Error::Resolve(nominal_predicate_error(&sym.name)));
                }
            }
        }
    }
    Ok(())
}

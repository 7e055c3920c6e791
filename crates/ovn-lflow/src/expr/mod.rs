//! OVN match expressions (OVN 23.03 `lib/expr.c`, `include/ovn/expr.h`;
//! the `match` column of `Logical_Flow` in ovn-sb(5)).
//!
//! [`Expr::parse`] builds the tree expr.c's parser builds: `!` is pushed
//! into the leaves, `x == {a, b}` becomes `x == a || x == b`, `a < x`
//! becomes `x > a`, and comparisons hold their constant shifted into the
//! symbol's bits. Set references (`$as`, `@pg`) stay as
//! [`Expr::SetCmp`] until [`Expr::annotate`] resolves them against a
//! [`Context`], expands predicates and subfields and adds prerequisites.
//! The annotated tree compiles to a [`CompiledExpr`](crate::CompiledExpr).
//!
//! `Display` prints as expr.c `expr_format()` does, and what it prints
//! parses back to an equal tree.

mod annotate;
mod context;
mod parse;

use std::fmt;

pub(crate) use annotate::field_prereqs;
pub use context::{AddressSet, Context, MapContext};
pub(crate) use parse::ParseCtx;

use crate::error::Result;
use crate::lex::{format_hex, write_json_string, Int};
use crate::symtab::{FieldRef, Level, SymbolRef, SymbolTable};

/// A relational operator (expr.h `enum expr_relop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Relop {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Relop {
    /// Its text.
    pub fn as_str(self) -> &'static str {
        match self {
            Relop::Eq => "==",
            Relop::Ne => "!=",
            Relop::Lt => "<",
            Relop::Le => "<=",
            Relop::Gt => ">",
            Relop::Ge => ">=",
        }
    }

    /// The operator with operands swapped: `a < b` is `b > a`.
    pub fn turn(self) -> Relop {
        match self {
            Relop::Lt => Relop::Gt,
            Relop::Le => Relop::Ge,
            Relop::Gt => Relop::Lt,
            Relop::Ge => Relop::Le,
            r => r,
        }
    }

    /// The opposite operator: `!(a < b)` is `a >= b`.
    pub fn invert(self) -> Relop {
        match self {
            Relop::Eq => Relop::Ne,
            Relop::Ne => Relop::Eq,
            Relop::Lt => Relop::Ge,
            Relop::Le => Relop::Gt,
            Relop::Gt => Relop::Le,
            Relop::Ge => Relop::Lt,
        }
    }

    /// Whether it is `==` or `!=`.
    pub fn is_equality(self) -> bool {
        matches!(self, Relop::Eq | Relop::Ne)
    }

    /// Applies the operator to two integers.
    pub fn test<T: Ord>(self, a: T, b: T) -> bool {
        match self {
            Relop::Eq => a == b,
            Relop::Ne => a != b,
            Relop::Lt => a < b,
            Relop::Le => a <= b,
            Relop::Gt => a > b,
            Relop::Ge => a >= b,
        }
    }
}

impl fmt::Display for Relop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A comparison of an integer symbol's bits against a constant:
/// `(symbol & mask) relop value`, with `value` and `mask` in the symbol's
/// own bit positions (expr.h `EXPR_T_CMP` with a numeric symbol).
///
/// Invariants: `value & !mask == 0`; for relational operators `mask` is one
/// contiguous run of bits; a one-bit `==`/`!=` test is always stored as
/// `==` (so that printing, which shows both as `x[n]` or `!x[n]`, is
/// one-to-one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cmp {
    /// The symbol compared.
    pub symbol: SymbolRef,
    /// The operator.
    pub relop: Relop,
    /// The constant, shifted into place.
    pub value: u128,
    /// The bits compared.
    pub mask: u128,
}

impl Cmp {
    /// Builds a comparison, keeping the one-bit invariant.
    pub fn new(symbol: SymbolRef, relop: Relop, value: u128, mask: u128) -> Cmp {
        let mut c = Cmp {
            symbol,
            relop,
            value: value & mask,
            mask,
        };
        c.canonicalize();
        c
    }

    fn canonicalize(&mut self) {
        if self.relop == Relop::Ne && self.mask.count_ones() == 1 {
            self.relop = Relop::Eq;
            self.value ^= self.mask;
        }
    }
}

/// A comparison of a string symbol (`inport`, `outport`) with a port name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StrCmp {
    /// The symbol compared.
    pub symbol: SymbolRef,
    /// The operator (`==` or `!=`).
    pub relop: Relop,
    /// The port name.
    pub value: String,
}

/// One member of a `{...}` constant set that refers to an address set or
/// port group (expr.c `parse_constant()`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SetItem {
    /// An integer constant.
    Int(Int),
    /// A string constant.
    Str(String),
    /// `$name`: the values of address set `name`.
    AddressSet(String),
    /// `@name`: the port names of port group `name`.
    PortGroup(String),
}

impl fmt::Display for SetItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetItem::Int(i) => write!(f, "{i}"),
            SetItem::Str(s) => write_json_string(f, s),
            SetItem::AddressSet(n) => write!(f, "${n}"),
            SetItem::PortGroup(n) => write!(f, "@{n}"),
        }
    }
}

/// A comparison against a constant set that names an address set or port
/// group, kept until [`Expr::annotate`] resolves it into what expr.c's
/// `make_cmp()` builds: the `||` of `==` tests (the `&&` for the other
/// operators).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SetCmp {
    /// The field (or bits of it) compared.
    pub field: FieldRef,
    /// The operator.
    pub relop: Relop,
    /// The members, in order.
    pub items: Vec<SetItem>,
    /// Whether the set was written in `{}`.
    pub in_curlies: bool,
    /// Whether an enclosing `!` applies to the whole expansion (only for
    /// relational operators; `!` of `==`/`!=` just inverts `relop`).
    pub negated: bool,
}

/// A match expression (expr.h `struct expr`).
///
/// Invariants kept by the parser: an `And` or `Or` has at least two
/// children, none of its own kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// `1` or `0`.
    Bool(bool),
    /// An integer comparison.
    Cmp(Cmp),
    /// A string comparison.
    StrCmp(StrCmp),
    /// An unresolved set comparison.
    SetCmp(SetCmp),
    /// All of the children.
    And(Vec<Expr>),
    /// Any of the children.
    Or(Vec<Expr>),
    /// `is_chassis_resident("port")`, or its negation.
    ChassisResident {
        /// The logical port name.
        port: String,
        /// Whether negated.
        not: bool,
    },
}

/// Which of `And`/`Or` a combination builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AndOr {
    And,
    Or,
}

impl Expr {
    /// Parses `input` with the symbols of `symtab` (expr.c
    /// `expr_parse_string()`). Address sets and port groups are resolved
    /// later, by [`Expr::annotate`].
    pub fn parse(input: &str, symtab: &SymbolTable) -> Result<Expr> {
        parse::parse(input, symtab, None)
    }

    /// Like [`Expr::parse`], but a `$name` or `@name` that `ctx` does not
    /// know is a syntax error at that token, as in expr.c. The sets are
    /// still kept by name, for [`Expr::annotate`].
    pub fn parse_with_context(
        input: &str,
        symtab: &SymbolTable,
        ctx: &dyn Context,
    ) -> Result<Expr> {
        parse::parse(input, symtab, Some(ctx))
    }

    /// Resolves set references against `ctx`, then expands predicates and
    /// subfields and adds prerequisites (expr.c `expr_annotate()`), so that
    /// every comparison is of a base field or string field.
    pub fn annotate(&self, symtab: &SymbolTable, ctx: &dyn Context) -> Result<Expr> {
        let resolved = self.resolve_sets(ctx)?;
        annotate::annotate(resolved, symtab)
    }

    /// Replaces every [`Expr::SetCmp`] by its expansion, with the errors
    /// expr.c reports when it meets the set while parsing.
    pub fn resolve_sets(&self, ctx: &dyn Context) -> Result<Expr> {
        context::resolve(self.clone(), ctx)
    }

    /// Names of the address sets this expression refers to.
    pub fn address_sets(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.visit_set_items(&mut |i| {
            if let SetItem::AddressSet(n) = i {
                out.push(n.as_str());
            }
        });
        out
    }

    /// Names of the port groups this expression refers to.
    pub fn port_groups(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.visit_set_items(&mut |i| {
            if let SetItem::PortGroup(n) = i {
                out.push(n.as_str());
            }
        });
        out
    }

    fn visit_set_items<'a>(&'a self, f: &mut dyn FnMut(&'a SetItem)) {
        match self {
            Expr::SetCmp(s) => s.items.iter().for_each(f),
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.visit_set_items(f)),
            _ => {}
        }
    }

    /// Level of measurement of the expression (expr.c `expr_get_level()`),
    /// which becomes a predicate's level.
    pub fn level(&self) -> Level {
        match self {
            Expr::Cmp(Cmp { symbol, .. }) | Expr::StrCmp(StrCmp { symbol, .. }) => {
                if symbol.level == Level::Nominal {
                    Level::Nominal
                } else {
                    Level::Boolean
                }
            }
            Expr::SetCmp(s) if s.field.symbol.level == Level::Nominal => Level::Nominal,
            Expr::SetCmp(_) | Expr::Bool(_) | Expr::ChassisResident { .. } => Level::Boolean,
            Expr::And(v) | Expr::Or(v) => {
                v.iter().map(Expr::level).fold(Level::Ordinal, Level::min)
            }
        }
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;

    /// Logical negation pushed into the leaves (expr.c `expr_not()`).
    fn not(self) -> Expr {
        match self {
            Expr::Cmp(mut c) => {
                c.relop = c.relop.invert();
                c.canonicalize();
                Expr::Cmp(c)
            }
            Expr::StrCmp(mut c) => {
                c.relop = c.relop.invert();
                Expr::StrCmp(c)
            }
            Expr::SetCmp(mut s) => {
                if s.relop.is_equality() {
                    s.relop = s.relop.invert();
                } else {
                    s.negated = !s.negated;
                }
                Expr::SetCmp(s)
            }
            Expr::And(v) => Expr::Or(v.into_iter().map(|e| !e).collect()),
            Expr::Or(v) => Expr::And(v.into_iter().map(|e| !e).collect()),
            Expr::Bool(b) => Expr::Bool(!b),
            Expr::ChassisResident { port, not } => Expr::ChassisResident { port, not: !not },
        }
    }
}

impl Expr {
    /// `a && b` or `a || b`, merging children of the same kind (expr.c
    /// `expr_combine()`).
    pub(crate) fn combine(kind: AndOr, a: Expr, b: Expr) -> Expr {
        match (kind, a, b) {
            (AndOr::And, Expr::And(mut x), Expr::And(y))
            | (AndOr::Or, Expr::Or(mut x), Expr::Or(y)) => {
                x.extend(y);
                kind.make(x)
            }
            (AndOr::And, Expr::And(mut x), b) | (AndOr::Or, Expr::Or(mut x), b) => {
                x.push(b);
                kind.make(x)
            }
            (AndOr::And, a, Expr::And(mut y)) | (AndOr::Or, a, Expr::Or(mut y)) => {
                y.insert(0, a);
                kind.make(y)
            }
            (kind, a, b) => kind.make(vec![a, b]),
        }
    }

    /// Combines an optional left side, as expr_combine() does with NULL.
    pub(crate) fn combine_opt(kind: AndOr, a: Option<Expr>, b: Expr) -> Expr {
        match a {
            Some(a) => Expr::combine(kind, a, b),
            None => b,
        }
    }
}

impl AndOr {
    pub(crate) fn make(self, v: Vec<Expr>) -> Expr {
        match self {
            AndOr::And => Expr::And(v),
            AndOr::Or => Expr::Or(v),
        }
    }
}

/// Finds the single run of 1-bits in the low `width` bits of `mask` (expr.c
/// `find_bitwise_range()`): `Some((start, n))`, or `None` if there are none
/// or several.
pub(crate) fn bit_range(mask: u128, width: u32) -> Option<(u32, u32)> {
    let m = mask & crate::field::low_bits(width);
    if m == 0 {
        return None;
    }
    let start = m.trailing_zeros();
    let run = (m >> start).trailing_ones();
    let rest = (m >> start).checked_shr(run).unwrap_or(0);
    (rest == 0).then_some((start, run))
}

impl fmt::Display for Cmp {
    /// expr.c `expr_format_cmp()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.symbol.name;
        let width = u32::from(self.symbol.width);
        let mut range = bit_range(self.mask, width);
        if self.symbol.level == Level::Nominal && range != Some((0, width)) {
            // A nominal field has no subfields to print a partial mask
            // with (expr.c prints one anyway, which does not parse back).
            range = None;
        }
        if let (Some((ofs, 1)), true) = (range, self.relop.is_equality()) {
            let positive = (self.value >> ofs & 1 == 1) ^ (self.relop == Relop::Ne);
            if !positive {
                f.write_str("!")?;
            }
            f.write_str(name)?;
            if width > 1 {
                write!(f, "[{ofs}]")?;
            }
            return Ok(());
        }
        f.write_str(name)?;
        if let Some((ofs, n)) = range.filter(|&(_, n)| n < width) {
            if n > 1 {
                write!(f, "[{}..{}]", ofs, ofs + n - 1)?;
            } else {
                write!(f, "[{ofs}]")?;
            }
        }
        write!(f, " {} ", self.relop)?;
        match range {
            Some((ofs, _)) => f.write_str(&format_hex(self.value >> ofs)),
            None => write!(f, "{}/{}", format_hex(self.value), format_hex(self.mask)),
        }
    }
}

impl fmt::Display for SetCmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negated {
            f.write_str("!(")?;
        }
        write!(f, "{} {} ", self.field, self.relop)?;
        let curlies = self.in_curlies || self.items.len() != 1;
        if curlies {
            f.write_str("{")?;
        }
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{item}")?;
        }
        if curlies {
            f.write_str("}")?;
        }
        if self.negated {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl fmt::Display for Expr {
    /// expr.c `expr_format()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Bool(b) => f.write_str(if *b { "1" } else { "0" }),
            Expr::Cmp(c) => write!(f, "{c}"),
            Expr::StrCmp(c) => {
                write!(f, "{} {} ", c.symbol.name, c.relop)?;
                write_json_string(f, &c.value)
            }
            Expr::SetCmp(s) => write!(f, "{s}"),
            Expr::And(v) => format_andor(f, v, " && "),
            Expr::Or(v) => format_andor(f, v, " || "),
            Expr::ChassisResident { port, not } => {
                if *not {
                    f.write_str("!")?;
                }
                f.write_str("is_chassis_resident(")?;
                write_json_string(f, port)?;
                f.write_str(")")
            }
        }
    }
}

fn format_andor(f: &mut fmt::Formatter<'_>, v: &[Expr], op: &str) -> fmt::Result {
    for (i, e) in v.iter().enumerate() {
        if i > 0 {
            f.write_str(op)?;
        }
        if matches!(e, Expr::And(_) | Expr::Or(_)) {
            write!(f, "({e})")?;
        } else {
            write!(f, "{e}")?;
        }
    }
    Ok(())
}

/// Parses a field reference such as `reg0[3..5]` (expr.c
/// `parse_field_from_string()`).
pub fn parse_field(input: &str, symtab: &SymbolTable) -> Result<FieldRef> {
    parse::parse_field_string(input, symtab)
}

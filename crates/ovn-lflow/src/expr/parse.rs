//! The expression parser (expr.c `expr_parse__()` and helpers).

use super::{AndOr, Cmp, Context, Expr, Relop, SetCmp, SetItem, StrCmp};
use crate::error::Result;
use crate::field::low_bits;
use crate::lex::{Int, IntFormat, Lexer, Token};
use crate::symtab::{FieldRef, Level, SymbolTable};

/// expr.c `MAX_PAREN_DEPTH`.
const MAX_PAREN_DEPTH: u32 = 100;

/// Parses a whole expression; with `sets`, set names are checked as they
/// are met.
pub(super) fn parse(input: &str, symtab: &SymbolTable, sets: Option<&dyn Context>) -> Result<Expr> {
    let mut p = ParseCtx::new(Lexer::new(input), symtab);
    p.sets = sets;
    let e = p.parse_expr()?;
    p.lexer.force_end()?;
    Ok(e)
}

/// Parses a whole field reference (expr.c `parse_field_from_string()`).
pub(super) fn parse_field_string(input: &str, symtab: &SymbolTable) -> Result<FieldRef> {
    let mut p = ParseCtx::new(Lexer::new(input), symtab);
    let f = p.parse_field()?;
    p.lexer.force_end()?;
    Ok(f)
}

/// Type of the constants in a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CType {
    Int,
    Str,
}

impl CType {
    fn as_str(self) -> &'static str {
        match self {
            CType::Int => "integer",
            CType::Str => "string",
        }
    }
}

/// A constant set being parsed (expr.h `struct expr_constant_set`).
#[derive(Debug, Clone)]
pub(crate) struct ConstSet {
    pub items: Vec<SetItem>,
    ty: Option<CType>,
    pub in_curlies: bool,
}

impl ConstSet {
    fn has_refs(&self) -> bool {
        self.items
            .iter()
            .any(|i| matches!(i, SetItem::AddressSet(_) | SetItem::PortGroup(_)))
    }
}

/// Parser state (expr.c `struct expr_context`), also used by the actions
/// parser for the fields and constants in actions.
pub(crate) struct ParseCtx<'a, 's> {
    pub lexer: Lexer<'a>,
    pub symtab: &'s SymbolTable,
    /// If given, `$name` and `@name` must exist in it.
    sets: Option<&'s dyn Context>,
    /// Inside an odd number of `!`.
    not: bool,
    paren_depth: u32,
    /// Whether `$set` and `@group` may appear (in matches, not in actions).
    allow_sets: bool,
}

impl<'a, 's> ParseCtx<'a, 's> {
    pub fn new(lexer: Lexer<'a>, symtab: &'s SymbolTable) -> Self {
        ParseCtx {
            lexer,
            symtab,
            sets: None,
            not: false,
            paren_depth: 0,
            allow_sets: true,
        }
    }

    /// A context for the constants of actions, where sets are not allowed.
    pub fn for_actions(lexer: Lexer<'a>, symtab: &'s SymbolTable) -> Self {
        ParseCtx {
            allow_sets: false,
            ..ParseCtx::new(lexer, symtab)
        }
    }

    /// expr.c `expr_parse__()`: `a && b && ...` or `a || b || ...`.
    fn parse_expr(&mut self) -> Result<Expr> {
        let mut e = self.parse_not()?;
        let op = self.lexer.token.clone();
        let kind = match op {
            Token::LogAnd => AndOr::And,
            Token::LogOr => AndOr::Or,
            _ => return Ok(e),
        };
        self.lexer.get();
        loop {
            let e2 = self.parse_not()?;
            e = Expr::combine(kind, e, e2);
            if !self.lexer.matches(&op) {
                break;
            }
        }
        if matches!(self.lexer.token, Token::LogAnd | Token::LogOr) {
            return Err(self
                .lexer
                .error("&& and || must be parenthesized when used together."));
        }
        Ok(e)
    }

    /// expr.c `expr_parse_not()`.
    fn parse_not(&mut self) -> Result<Expr> {
        if !self.lexer.matches(&Token::LogNot) {
            return Ok(self.parse_primary()?.0);
        }
        self.not = !self.not;
        let r = self.parse_primary();
        self.not = !self.not;
        let (e, atomic) = r?;
        if !atomic {
            return Err(self.lexer.error("Missing parentheses around operand of !."));
        }
        Ok(!e)
    }

    /// expr.c `expr_parse_primary()`: returns the expression and whether it
    /// is "atomic" (may follow `!` without parentheses).
    fn parse_primary(&mut self) -> Result<(Expr, bool)> {
        if self.lexer.matches(&Token::LParen) {
            if self.paren_depth >= MAX_PAREN_DEPTH {
                return Err(self.lexer.error("Parentheses nested too deeply."));
            }
            self.paren_depth += 1;
            let e = self.parse_expr();
            self.paren_depth -= 1;
            let e = e?;
            self.lexer.force_match(&Token::RParen)?;
            return Ok((e, true));
        }
        match &self.lexer.token {
            Token::Template(_) => Err(self.lexer.error("Unexpanded template.")),
            Token::Id(_) => self.parse_field_test(),
            _ => self.parse_constant_first(),
        }
    }

    /// A primary that starts with an identifier: a function call, a bare
    /// field (`x` means `x != 0`) or `field relop constants`.
    fn parse_field_test(&mut self) -> Result<(Expr, bool)> {
        if self.lexer.lookahead() == Token::LParen {
            if self.lexer.match_id("is_chassis_resident") {
                self.lexer.get();
                return Ok((self.parse_chassis_resident()?, true));
            }
            return Err(self.lexer.error("parsing function name"));
        }
        let f = self.parse_field()?;
        match relop_of(&self.lexer.token) {
            Some(r) => {
                self.lexer.get();
                let cs = self.parse_constant_set()?;
                Ok((self.make_cmp(&f, r, cs)?, false))
            }
            None => {
                if f.n_bits == 0 || self.lexer.token == Token::Equals {
                    return Err(self
                        .lexer
                        .syntax_error(Some("expecting relational operator")));
                }
                if f.n_bits > 1 && !self.not {
                    return Err(self.lexer.error(
                        "Explicit `!= 0' is required for inequality test of multibit field \
                         against 0.",
                    ));
                }
                let zero = ConstSet {
                    items: vec![SetItem::Int(Int::new(0, IntFormat::Hexadecimal))],
                    ty: Some(CType::Int),
                    in_curlies: false,
                };
                Ok((self.make_cmp(&f, Relop::Ne, zero)?, true))
            }
        }
    }

    /// A primary that starts with constants: `1`, `0`, `c relop field` or
    /// `c1 relop field relop c2`.
    fn parse_constant_first(&mut self) -> Result<(Expr, bool)> {
        let c1 = self.parse_constant_set()?;
        if relop_of(&self.lexer.token).is_none() && !c1.in_curlies {
            if let [SetItem::Int(i)] = c1.items.as_slice() {
                if i.format == IntFormat::Decimal && i.mask.is_none() && i.value <= 1 {
                    return Ok((Expr::Bool(i.value == 1), true));
                }
            }
        }
        let r1 = self.parse_relop()?;
        let f = self.parse_field()?;
        let Some(r2) = relop_of(&self.lexer.token) else {
            return Ok((self.make_cmp(&f, r1.turn(), c1)?, false));
        };
        self.lexer.get();
        let c2 = self.parse_constant_set()?;
        let lt = |r| matches!(r, Relop::Lt | Relop::Le);
        let gt = |r| matches!(r, Relop::Gt | Relop::Ge);
        if !((lt(r1) && lt(r2)) || (gt(r1) && gt(r2))) {
            return Err(self.lexer.error(
                "Range expressions must have the form `x < field < y' or `x > field > y', with \
                 each `<' optionally replaced by `<=' or `>' by `>=').",
            ));
        }
        let e1 = self.make_cmp(&f, r1.turn(), c1)?;
        let e2 = self.make_cmp(&f, r2, c2)?;
        Ok((Expr::combine(AndOr::And, e1, e2), false))
    }

    fn parse_relop(&mut self) -> Result<Relop> {
        match relop_of(&self.lexer.token) {
            Some(r) => {
                self.lexer.get();
                Ok(r)
            }
            None => Err(self
                .lexer
                .syntax_error(Some("expecting relational operator"))),
        }
    }

    fn parse_chassis_resident(&mut self) -> Result<Expr> {
        let Token::String(port) = &self.lexer.token else {
            return Err(self.lexer.syntax_error(Some("expecting string")));
        };
        let port = port.clone();
        self.lexer.get();
        self.lexer.force_match(&Token::RParen)?;
        Ok(Expr::ChassisResident { port, not: false })
    }

    /// expr.c `parse_field()`: `name`, `name[n]` or `name[lo..hi]`.
    pub fn parse_field(&mut self) -> Result<FieldRef> {
        let symbol = match &self.lexer.token {
            Token::Id(name) => self.symtab.get(name).cloned(),
            _ => None,
        };
        let Some(symbol) = symbol else {
            return Err(self.lexer.syntax_error(Some("expecting field name")));
        };
        self.lexer.get();
        if !self.lexer.matches(&Token::LSquare) {
            return Ok(FieldRef::whole(symbol));
        }
        if symbol.width == 0 {
            let m = format!("Cannot select subfield of string field {}.", symbol.name);
            return Err(self.lexer.error(m));
        }
        let low = self.lexer.force_int()?;
        let high = if self.lexer.matches(&Token::Ellipsis) {
            self.lexer.force_int()?
        } else {
            low
        };
        self.lexer.force_match(&Token::RSquare)?;
        let width = i32::from(symbol.width);
        let message = if low > high {
            format!("Invalid bit range {low} to {high}.")
        } else if high >= width {
            format!(
                "Cannot select bits {low} to {high} of {width}-bit field {}.",
                symbol.name
            )
        } else if symbol.level == Level::Nominal && (low != 0 || high != width - 1) {
            format!("Cannot select subfield of nominal field {}.", symbol.name)
        } else {
            // 0 <= low <= high < width <= 128, so these fit.
            let (ofs, n_bits) = (low as u16, (high - low + 1) as u16);
            return Ok(FieldRef {
                symbol,
                ofs,
                n_bits,
            });
        };
        Err(self.lexer.error(message))
    }

    /// expr.c `parse_constant_set()`: one constant or `{c1, c2, ...}`.
    pub fn parse_constant_set(&mut self) -> Result<ConstSet> {
        let mut cs = ConstSet {
            items: Vec::new(),
            ty: None,
            in_curlies: false,
        };
        if self.lexer.matches(&Token::LCurly) {
            cs.in_curlies = true;
            loop {
                self.parse_constant(&mut cs)?;
                self.lexer.matches(&Token::Comma);
                if self.lexer.matches(&Token::RCurly) {
                    break;
                }
            }
        } else {
            self.parse_constant(&mut cs)?;
        }
        Ok(cs)
    }

    fn assign_type(&self, cs: &mut ConstSet, ty: CType) -> Result<()> {
        match cs.ty {
            Some(t) if t != ty && !cs.items.is_empty() => Err(self
                .lexer
                .syntax_error(Some(&format!("expecting {}", t.as_str())))),
            _ => {
                cs.ty = Some(ty);
                Ok(())
            }
        }
    }

    /// expr.c `parse_constant()`.
    fn parse_constant(&mut self, cs: &mut ConstSet) -> Result<()> {
        let (item, ty) = match &self.lexer.token {
            Token::Template(_) => return Err(self.lexer.error("Unexpanded template.")),
            Token::String(s) => (SetItem::Str(s.clone()), CType::Str),
            Token::Integer(i) => (SetItem::Int(i.normalized()), CType::Int),
            Token::Macro(n) if self.allow_sets && self.set_known(n, true) => {
                (SetItem::AddressSet(n.clone()), CType::Int)
            }
            Token::PortGroup(n) if self.allow_sets && self.set_known(n, false) => {
                (SetItem::PortGroup(n.clone()), CType::Str)
            }
            Token::Macro(_) => {
                return Err(self.lexer.syntax_error(Some("expecting address set name")))
            }
            Token::PortGroup(_) => {
                return Err(self.lexer.syntax_error(Some("expecting port group name")))
            }
            _ => return Err(self.lexer.syntax_error(Some("expecting constant"))),
        };
        self.assign_type(cs, ty)?;
        cs.items.push(item);
        self.lexer.get();
        Ok(())
    }

    fn set_known(&self, name: &str, address_set: bool) -> bool {
        match self.sets {
            None => true,
            Some(c) if address_set => c.address_set(name).is_some(),
            Some(c) => c.port_group(name).is_some(),
        }
    }

    /// expr.c `expr_constant_parse()`: one constant that fits `f`.
    pub fn parse_single_constant(&mut self, f: &FieldRef) -> Result<SetItem> {
        let mut cs = ConstSet {
            items: Vec::new(),
            ty: None,
            in_curlies: false,
        };
        self.parse_constant(&mut cs)?;
        self.type_check(f, &cs)?;
        Ok(cs.items.remove(0))
    }

    /// expr.c `type_check()`.
    fn type_check(&self, f: &FieldRef, cs: &ConstSet) -> Result<()> {
        let sym = &f.symbol;
        let want = if sym.width != 0 {
            CType::Int
        } else {
            CType::Str
        };
        let ty = cs.ty.unwrap_or(CType::Int);
        if ty != want {
            let kind = if sym.width != 0 { "Integer" } else { "String" };
            let m = format!(
                "{kind} field {} is not compatible with {} constant.",
                sym.name,
                ty.as_str()
            );
            return Err(self.lexer.error(m));
        }
        for item in &cs.items {
            if let SetItem::Int(i) = item {
                check_width(i, f).map_err(|m| self.lexer.error(m))?;
            }
        }
        Ok(())
    }

    /// expr.c `make_cmp()`, checking operators against the field's level.
    fn make_cmp(&self, f: &FieldRef, r: Relop, cs: ConstSet) -> Result<Expr> {
        self.type_check(f, &cs)?;
        let sym = &f.symbol;
        if !r.is_equality() {
            let message = if cs.in_curlies {
                Some("Only == and != operators may be used with value sets.".to_string())
            } else if matches!(sym.level, Level::Nominal | Level::Boolean) {
                Some(format!(
                    "Only == and != operators may be used with {} field {}.",
                    sym.level.as_str(),
                    sym.name
                ))
            } else if matches!(cs.items.first(), Some(SetItem::Int(i)) if i.mask.is_some()) {
                Some(MASKED_RELOP.to_string())
            } else {
                None
            };
            if let Some(m) = message {
                return Err(self.lexer.error(m));
            }
        }
        if sym.level == Level::Nominal {
            if sym.predicate().is_some() {
                for item in &cs.items {
                    if let SetItem::Int(i) = item {
                        let positive = (i.value & 1 == 1) ^ (r == Relop::Ne) ^ self.not;
                        if !positive {
                            return Err(self.lexer.error(nominal_predicate_error(&sym.name)));
                        }
                    }
                }
            } else if r != if self.not { Relop::Ne } else { Relop::Eq } {
                let m = format!(
                    "Nominal field {} may only be tested for equality (taking enclosing `!' \
                     operators into account).",
                    sym.name
                );
                return Err(self.lexer.error(m));
            }
        }
        if cs.has_refs() {
            let items = cs.items;
            let in_curlies = cs.in_curlies;
            return Ok(Expr::SetCmp(SetCmp {
                field: f.clone(),
                relop: r,
                items,
                in_curlies,
                negated: false,
            }));
        }
        Ok(build_cmps(f, r, cs.items.iter()))
    }
}

/// expr.c's message for a relational operator with a masked constant.
pub(super) const MASKED_RELOP: &str =
    "Only == and != operators may be used with masked constants.  Consider using subfields \
     instead (e.g. eth.src[0..15] > 0x1111 in place of eth.src > \
     00:00:00:00:11:11/00:00:00:00:ff:ff).";

pub(super) fn nominal_predicate_error(name: &str) -> String {
    format!(
        "Nominal predicate {name} may only be tested positively, e.g. `{name}' or `{name} == 1' \
         but not `!{name}' or `{name} == 0'."
    )
}

/// The width half of expr.c `type_check()`.
pub(super) fn check_width(i: &Int, f: &FieldRef) -> std::result::Result<(), String> {
    let w = i.width();
    if w > u32::from(f.symbol.width) {
        return Err(format!(
            "{w}-bit constant is not compatible with {}-bit field {}.",
            f.symbol.width, f.symbol.name
        ));
    }
    Ok(())
}

/// The comparisons of `f` with each constant, combined by `||` for `==`
/// and by `&&` otherwise (the tail of expr.c `make_cmp()`); `items` must
/// hold only `Int` and `Str`.
pub(super) fn build_cmps<'i>(
    f: &FieldRef,
    r: Relop,
    items: impl Iterator<Item = &'i SetItem>,
) -> Expr {
    let kind = if r == Relop::Eq {
        AndOr::Or
    } else {
        AndOr::And
    };
    let mut e = None;
    for item in items {
        let c = match item {
            SetItem::Int(i) => Expr::Cmp(make_cmp_int(f, r, i)),
            SetItem::Str(s) => Expr::StrCmp(StrCmp {
                symbol: f.symbol.clone(),
                relop: r,
                value: s.clone(),
            }),
            SetItem::AddressSet(_) | SetItem::PortGroup(_) => continue,
        };
        e = Some(Expr::combine_opt(kind, e, c));
    }
    e.unwrap_or(Expr::Bool(r == Relop::Ne))
}

/// expr.c `make_cmp__()`: copies the constant into bits `f.ofs..` of the
/// symbol, truncated to the field reference's width.
pub(super) fn make_cmp_int(f: &FieldRef, r: Relop, i: &Int) -> Cmp {
    let n = low_bits(f.n_bits.into());
    let mask = i.mask.map_or(n, |m| m & n) << f.ofs;
    Cmp::new(f.symbol.clone(), r, (i.value & n) << f.ofs, mask)
}

fn relop_of(t: &Token) -> Option<Relop> {
    Some(match t {
        Token::Eq => Relop::Eq,
        Token::Ne => Relop::Ne,
        Token::Lt => Relop::Lt,
        Token::Le => Relop::Le,
        Token::Gt => Relop::Gt,
        Token::Ge => Relop::Ge,
        _ => return None,
    })
}

//! Evaluation of an annotated expression on a [`Flow`] (what expr.c
//! `expr_evaluate()` computes, compiled once for speed).
//!
//! [`CompiledExpr::compile`] turns an annotated [`Expr`] into a flat tree of
//! masked tests on base fields: string comparisons become port-key tests
//! (an unknown port never matches, as in `expr_to_matches()`),
//! `is_chassis_resident()` becomes a constant, constants are folded
//! (expr.c `expr_fix()`), the `==` tests of one field under an `&&` are
//! merged into one masked test (annotation repeats prerequisites such as
//! `ct.trk` and `ip4`), and repeated children of an `||` are dropped.
//! [`CompiledExpr::matches`] then walks the tree with no allocation.

use std::fmt;

use crate::error::{Error, Result};
use crate::expr::{Context, Expr, Relop};
use crate::field::Field;
use crate::flow::Flow;
use crate::symtab::SymbolKind;

/// One masked test of a base field: `(flow[field] & mask) op value`.
/// For relational operators the mask is one run of bits, so comparing the
/// masked values as integers compares the bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Test {
    /// The field.
    pub field: Field,
    /// The operator.
    pub op: Relop,
    /// The bits tested.
    pub mask: u128,
    /// The value, within `mask`.
    pub value: u128,
}

impl Test {
    /// Whether `flow` passes the test. What it read is noted ([`Flow::note_bits`]):
    /// the bits tested, but for an equality that does not hold only those down to the
    /// first that differs (every value equal to the flow's there differs from the
    /// test's value too), as Open vSwitch's prefix tracking un-wildcards.
    #[inline]
    pub fn eval(&self, flow: &Flow) -> bool {
        let v = flow.peek(self.field) & self.mask;
        let (pass, read) = match self.op {
            Relop::Eq => (v == self.value, self.decisive_bits(v)),
            Relop::Ne => (v != self.value, self.decisive_bits(v)),
            Relop::Lt => (v < self.value, self.mask),
            Relop::Le => (v <= self.value, self.mask),
            Relop::Gt => (v > self.value, self.mask),
            Relop::Ge => (v >= self.value, self.mask),
        };
        flow.note_bits(self.field, read);
        pass
    }

    /// The bits of the mask an (in)equality with masked value `v` rests on: all of
    /// them when `v` equals the value, else those from the top down to the first
    /// that differs.
    #[inline]
    fn decisive_bits(&self, v: u128) -> u128 {
        let differ = v ^ self.value;
        if differ == 0 {
            return self.mask;
        }
        let first = 127 - differ.leading_zeros();
        self.mask & !((1u128 << first) - 1)
    }
}

/// An equality test that must hold for the whole expression to match, which
/// a caller can use to index many expressions of one table (e.g. by
/// `inport` key or `eth.dst`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conjunct {
    /// The field.
    pub field: Field,
    /// The bits tested.
    pub mask: u128,
    /// Their required value.
    pub value: u128,
}

/// A node of the compiled tree: 24 bytes. A test of at most 64 bits (every field but
/// IPv6 addresses and `xxreg`s) is held in place; a wider one in `CompiledExpr::wide`
/// (a deployment's 10^5 compiled matches hold 10^6 tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Node {
    Const(bool),
    Narrow {
        field: Field,
        op: Relop,
        mask: u64,
        value: u64,
    },
    /// `wide[i]`.
    Wide(u32),
    /// All of `kids[start..start + len]`.
    And {
        start: u32,
        len: u32,
    },
    /// Any of `kids[start..start + len]`.
    Or {
        start: u32,
        len: u32,
    },
}

/// A compiled match expression. Equal expressions test the same bits the
/// same way (a caller may keep one copy of equal ones: [`Hash`] agrees).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompiledExpr {
    nodes: Vec<Node>,
    kids: Vec<u32>,
    wide: Vec<Test>,
    root: u32,
}

/// Compilation result before flattening.
#[derive(PartialEq)]
enum Tree {
    Const(bool),
    Test(Test),
    And(Vec<Tree>),
    Or(Vec<Tree>),
}

impl CompiledExpr {
    /// Compiles an annotated expression (see [`Expr::annotate`]). Fails if
    /// it still contains predicates or unresolved sets.
    pub fn compile(e: &Expr, ctx: &dyn Context) -> Result<CompiledExpr> {
        let tree = to_tree(e, ctx)?;
        let mut c = CompiledExpr {
            nodes: Vec::new(),
            kids: Vec::new(),
            wide: Vec::new(),
            root: 0,
        };
        c.root = c.flatten(tree);
        // Held for the flow's life, once per (datapath, flow): no growth slack.
        c.nodes.shrink_to_fit();
        c.kids.shrink_to_fit();
        c.wide.shrink_to_fit();
        Ok(c)
    }

    /// Parses, annotates and compiles `input` in one step.
    pub fn parse(
        input: &str,
        symtab: &crate::SymbolTable,
        ctx: &dyn Context,
    ) -> Result<CompiledExpr> {
        let e = Expr::parse(input, symtab)?.annotate(symtab, ctx)?;
        CompiledExpr::compile(&e, ctx)
    }

    fn flatten(&mut self, t: Tree) -> u32 {
        let node = match t {
            Tree::Const(b) => Node::Const(b),
            Tree::Test(t) => match (u64::try_from(t.mask), u64::try_from(t.value)) {
                (Ok(mask), Ok(value)) => Node::Narrow {
                    field: t.field,
                    op: t.op,
                    mask,
                    value,
                },
                _ => {
                    self.wide.push(t);
                    Node::Wide((self.wide.len() - 1) as u32)
                }
            },
            Tree::And(v) | Tree::Or(v) if v.is_empty() => unreachable!("folded away"),
            Tree::And(v) => {
                let (start, len) = self.flatten_kids(v);
                Node::And { start, len }
            }
            Tree::Or(v) => {
                let (start, len) = self.flatten_kids(v);
                Node::Or { start, len }
            }
        };
        self.nodes.push(node);
        (self.nodes.len() - 1) as u32
    }

    fn flatten_kids(&mut self, v: Vec<Tree>) -> (u32, u32) {
        let ids: Vec<u32> = v.into_iter().map(|t| self.flatten(t)).collect();
        let start = self.kids.len() as u32;
        self.kids.extend_from_slice(&ids);
        (start, ids.len() as u32)
    }

    /// Whether `flow` matches.
    #[inline]
    pub fn matches(&self, flow: &Flow) -> bool {
        self.eval(self.root, flow)
    }

    /// The test of node `n`, if it is one.
    #[inline]
    fn test(&self, n: Node) -> Option<Test> {
        match n {
            Node::Narrow {
                field,
                op,
                mask,
                value,
            } => Some(Test {
                field,
                op,
                mask: mask.into(),
                value: value.into(),
            }),
            Node::Wide(i) => Some(self.wide[i as usize]),
            _ => None,
        }
    }

    fn eval(&self, i: u32, flow: &Flow) -> bool {
        let n = self.nodes[i as usize];
        match n {
            Node::Const(b) => b,
            Node::Narrow { .. } | Node::Wide(_) => self.test(n).is_some_and(|t| t.eval(flow)),
            Node::And { start, len } => {
                let kids = &self.kids[start as usize..(start + len) as usize];
                kids.iter().all(|&k| self.eval(k, flow))
            }
            Node::Or { start, len } => {
                let kids = &self.kids[start as usize..(start + len) as usize];
                kids.iter().any(|&k| self.eval(k, flow))
            }
        }
    }

    /// `Some(b)` if the expression is the constant `b` (for example a flow
    /// for a port that is not resident here).
    pub fn as_const(&self) -> Option<bool> {
        match self.nodes[self.root as usize] {
            Node::Const(b) => Some(b),
            _ => None,
        }
    }

    /// The equality tests that must all hold for a match: the root if it is
    /// one, or the equality tests directly under a root `&&`.
    pub fn conjuncts(&self) -> impl Iterator<Item = Conjunct> + '_ {
        let ids: &[u32] = match self.nodes[self.root as usize] {
            Node::And { start, len } => &self.kids[start as usize..(start + len) as usize],
            _ => std::slice::from_ref(&self.root),
        };
        ids.iter()
            .filter_map(|&i| match self.test(self.nodes[i as usize]) {
                Some(t) if t.op == Relop::Eq => Some(Conjunct {
                    field: t.field,
                    mask: t.mask,
                    value: t.value,
                }),
                _ => None,
            })
    }

    /// The value `field` must have, if a conjunct tests all of its bits.
    pub fn exact(&self, field: Field) -> Option<u128> {
        self.conjuncts()
            .find(|c| c.field == field && c.mask == field.full_mask())
            .map(|c| c.value)
    }

    /// Every field the expression tests, each once, in field order (what a cache of
    /// its decisions must key on).
    pub fn fields(&self) -> Vec<Field> {
        let mut v: Vec<Field> = self
            .nodes
            .iter()
            .filter_map(|&n| self.test(n).map(|t| t.field))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Number of tests, a measure of evaluation cost.
    pub fn n_tests(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n, Node::Narrow { .. } | Node::Wide(_)))
            .count()
    }
}

fn to_tree(e: &Expr, ctx: &dyn Context) -> Result<Tree> {
    Ok(match e {
        Expr::Bool(b) => Tree::Const(*b),
        Expr::Cmp(c) => {
            let mut sym = c.symbol.clone();
            let (mut value, mut mask) = (c.value, c.mask);
            while let SymbolKind::Subfield { parent, ofs } = &sym.kind {
                value <<= ofs;
                mask <<= ofs;
                sym = parent.clone();
            }
            let field = match &sym.kind {
                SymbolKind::Field(f) | SymbolKind::OvnField(f) => *f,
                _ => return Err(not_annotated(e)),
            };
            Tree::Test(Test {
                field,
                op: c.relop,
                mask,
                value,
            })
        }
        Expr::StrCmp(c) => {
            let SymbolKind::String(field) = c.symbol.kind else {
                return Err(not_annotated(e));
            };
            match ctx.port_key(&c.value) {
                Some(key) => Tree::Test(Test {
                    field,
                    op: c.relop,
                    mask: field.full_mask(),
                    value: u128::from(key) & field.full_mask(),
                }),
                None => Tree::Const(false),
            }
        }
        Expr::ChassisResident { port, not } => Tree::Const(ctx.is_chassis_resident(port) ^ not),
        Expr::SetCmp(_) => return Err(not_annotated(e)),
        Expr::And(v) => fold(v, ctx, false)?,
        Expr::Or(v) => fold(v, ctx, true)?,
    })
}

/// Compiles the children of an `&&` (`short_circuit` false) or `||`
/// (true), dropping neutral constants and collapsing on an absorbing one
/// (expr.c `expr_fix_andor()`).
fn fold(v: &[Expr], ctx: &dyn Context, short_circuit: bool) -> Result<Tree> {
    let mut kids = Vec::with_capacity(v.len());
    for e in v {
        match to_tree(e, ctx)? {
            Tree::Const(b) if b == short_circuit => return Ok(Tree::Const(b)),
            Tree::Const(_) => {}
            Tree::And(w) if !short_circuit => kids.extend(w),
            Tree::Or(w) if short_circuit => kids.extend(w),
            t => kids.push(t),
        }
    }
    let mut kids = if short_circuit {
        dedup(kids)
    } else {
        match merge_equalities(kids).and_then(prune_alternatives) {
            Some(k) => dedup(k),
            None => return Ok(Tree::Const(false)),
        }
    };
    Ok(match kids.len() {
        0 => Tree::Const(!short_circuit),
        1 => kids.pop().unwrap_or(Tree::Const(!short_circuit)),
        _ if short_circuit => Tree::Or(kids),
        _ => Tree::And(kids),
    })
}

/// Merges the `==` tests of one field under an `&&` into one test
/// (annotation repeats prerequisites such as `ct_state[5]` and
/// `eth.type == 0x800`); `None` if two of them contradict.
fn merge_equalities(kids: Vec<Tree>) -> Option<Vec<Tree>> {
    let mut out: Vec<Tree> = Vec::with_capacity(kids.len());
    for k in kids {
        if let Tree::Test(t) = &k {
            let same = out.iter_mut().find_map(|o| match o {
                Tree::Test(u) if u.op == Relop::Eq && t.op == Relop::Eq && u.field == t.field => {
                    Some(u)
                }
                _ => None,
            });
            if let Some(u) = same {
                let overlap = u.mask & t.mask;
                if u.value & overlap != t.value & overlap {
                    return None;
                }
                u.mask |= t.mask;
                u.value |= t.value;
                continue;
            }
        }
        out.push(k);
    }
    Some(out)
}

/// Simplifies the `||` children of an `&&` by the `==` tests beside them, which fix
/// bits of their fields: a test of an `||` that reads only fixed bits is a constant,
/// and so is an (in)equality the fixed bits contradict. A true one makes its `||` true
/// (dropped from the `&&`); a false one is dropped from its `||`; an `||` left with
/// one child becomes that child (merged in turn), with none the `&&` is false (`None`).
/// Annotation writes such alternatives beside the tests that decide them: every
/// `udp.dst` brings `ip.proto == 17 && (eth.type == 0x800 || eth.type == 0x86dd)`
/// into matches that also say `ip4` (expr.c simplifies the same way as it
/// normalises).
fn prune_alternatives(mut kids: Vec<Tree>) -> Option<Vec<Tree>> {
    loop {
        let fixed: Vec<Test> = kids
            .iter()
            .filter_map(|k| match k {
                Tree::Test(t) if t.op == Relop::Eq => Some(*t),
                _ => None,
            })
            .collect();
        let mut out = Vec::with_capacity(kids.len());
        let mut merged = false;
        for k in kids {
            let Tree::Or(alts) = k else {
                out.push(k);
                continue;
            };
            let mut left = Vec::with_capacity(alts.len());
            let mut holds = false;
            for a in alts {
                match decided(&a, &fixed) {
                    Some(true) => holds = true,
                    Some(false) => {}
                    None => left.push(a),
                }
            }
            match left.len() {
                _ if holds => {}
                0 => return None,
                1 => {
                    merged = true;
                    match left.pop() {
                        Some(Tree::And(w)) => out.extend(w),
                        Some(t) => out.push(t),
                        None => {}
                    }
                }
                _ => out.push(Tree::Or(left)),
            }
        }
        if !merged {
            return Some(out);
        }
        kids = merge_equalities(out)?;
    }
}

/// The value of test `a` under the `==` tests `fixed` (one per field), if they decide it.
fn decided(a: &Tree, fixed: &[Test]) -> Option<bool> {
    let Tree::Test(t) = a else { return None };
    let f = fixed.iter().find(|f| f.field == t.field)?;
    if t.mask & !f.mask == 0 {
        let v = f.value & t.mask;
        return Some(match t.op {
            Relop::Eq => v == t.value,
            Relop::Ne => v != t.value,
            Relop::Lt => v < t.value,
            Relop::Le => v <= t.value,
            Relop::Gt => v > t.value,
            Relop::Ge => v >= t.value,
        });
    }
    let clash = (f.value ^ t.value) & f.mask & t.mask != 0;
    match t.op {
        Relop::Eq if clash => Some(false),
        Relop::Ne if clash => Some(true),
        _ => None,
    }
}

/// Drops repeated children of an `||` or `&&`.
fn dedup(kids: Vec<Tree>) -> Vec<Tree> {
    let mut out: Vec<Tree> = Vec::with_capacity(kids.len());
    for k in kids {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn not_annotated(e: &Expr) -> Error {
    Error::Annotate(format!(
        "Cannot evaluate `{e}': annotate the expression first."
    ))
}

impl fmt::Display for Test {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{:#x} {} {:#x}",
            self.field, self.mask, self.op, self.value
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 24);
        let m = CompiledExpr::parse(
            "ip6.src == ::1 && eth.type == 0x86dd",
            &crate::SymbolTable::ovn(),
            &crate::MapContext::new(),
        );
        let m = m.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((m.wide.len(), m.n_tests()), (1, 2));
    }
}

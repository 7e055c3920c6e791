//! Annotation (expr.c `expr_annotate()`): expands predicates and subfields
//! and adds each symbol's prerequisites, recursively.

use super::{AndOr, Expr};
use crate::error::{Error, Result};
use crate::symtab::{Symbol, SymbolKind, SymbolRef, SymbolTable};

/// Annotates a resolved expression.
pub(super) fn annotate(e: Expr, symtab: &SymbolTable) -> Result<Expr> {
    let mut nesting = Vec::new();
    annotate_(e, symtab, true, &mut nesting).map_err(Error::Annotate)
}

type AResult = std::result::Result<Expr, String>;

/// expr.c `parse_and_annotate()`.
fn parse_and_annotate(s: &str, symtab: &SymbolTable, nesting: &mut Vec<String>) -> AResult {
    let wrap = |e: &dyn std::fmt::Display| {
        format!(
            "Error parsing expression `{s}' encountered as prerequisite or predicate of initial \
             expression: {e}"
        )
    };
    let e = Expr::parse(s, symtab).map_err(|e| wrap(&e))?;
    annotate_(e, symtab, true, nesting).map_err(|e| wrap(&e))
}

/// expr.c `expr_annotate__()`.
fn annotate_(e: Expr, symtab: &SymbolTable, append: bool, nesting: &mut Vec<String>) -> AResult {
    match e {
        Expr::Cmp(_) | Expr::StrCmp(_) => annotate_cmp(e, symtab, append, nesting),
        Expr::And(_) | Expr::Or(_) => annotate_andor(e, symtab, append, nesting),
        Expr::SetCmp(s) => Err(format!("Unresolved set in `{s}'.")),
        e @ (Expr::Bool(_) | Expr::ChassisResident { .. }) => Ok(e),
    }
}

fn annotate_andor(
    mut e: Expr,
    symtab: &SymbolTable,
    mut append: bool,
    nesting: &mut Vec<String>,
) -> AResult {
    // If every term mentions the same symbol, its prerequisites are added
    // once, here, instead of once per term.
    if append {
        if let Some(sym) = unique_symbol(&e).cloned() {
            append = false;
            if let Some(pre) = &sym.prereqs {
                let p = parse_and_annotate(pre, symtab, nesting)?;
                e = Expr::combine(AndOr::And, e, p);
            }
        }
    }
    let (kind, kids) = match e {
        Expr::And(v) => (AndOr::And, v),
        Expr::Or(v) => (AndOr::Or, v),
        e => return annotate_(e, symtab, append, nesting),
    };
    let mut out = Vec::with_capacity(kids.len());
    for k in kids {
        match (kind, annotate_(k, symtab, append, nesting)?) {
            (AndOr::And, Expr::And(w)) | (AndOr::Or, Expr::Or(w)) => out.extend(w),
            (_, k) => out.push(k),
        }
    }
    Ok(kind.make(out))
}

/// expr.c `expr_annotate_cmp()`.
fn annotate_cmp(e: Expr, symtab: &SymbolTable, append: bool, nesting: &mut Vec<String>) -> AResult {
    let symbol = match &e {
        Expr::Cmp(c) => c.symbol.clone(),
        Expr::StrCmp(c) => c.symbol.clone(),
        _ => unreachable!("annotate_cmp on a non-comparison"),
    };
    if nesting.contains(&symbol.name) {
        return Err(format!("Recursive expansion of symbol `{}'.", symbol.name));
    }
    nesting.push(symbol.name.clone());
    let r = expand_cmp(e, &symbol, symtab, append, nesting);
    nesting.pop();
    r
}

fn expand_cmp(
    e: Expr,
    symbol: &Symbol,
    symtab: &SymbolTable,
    append: bool,
    nesting: &mut Vec<String>,
) -> AResult {
    let prereqs = match (&symbol.prereqs, append) {
        (Some(p), true) => Some(parse_and_annotate(p, symtab, nesting)?),
        _ => None,
    };
    let e = match (e, &symbol.kind) {
        (Expr::Cmp(mut c), SymbolKind::Subfield { .. }) => {
            // Follow subfields to the base field, shifting into place.
            while let SymbolKind::Subfield { parent, ofs } = &c.symbol.kind {
                let (parent, ofs) = (parent.clone(), *ofs);
                c.value <<= ofs;
                c.mask <<= ofs;
                c.symbol = parent;
            }
            Expr::Cmp(c)
        }
        (Expr::Cmp(c), SymbolKind::Predicate(p)) => {
            let pred = parse_and_annotate(p, symtab, nesting)?;
            let positive = (c.value & 1 == 1) ^ (c.relop == super::Relop::Ne);
            if positive {
                pred
            } else {
                !pred
            }
        }
        (e, _) => e,
    };
    Ok(match prereqs {
        Some(p) => Expr::combine(AndOr::And, e, p),
        None => e,
    })
}

/// expr.c `expr_get_unique_symbol()`.
fn unique_symbol(e: &Expr) -> Option<&SymbolRef> {
    match e {
        Expr::Cmp(c) => Some(&c.symbol),
        Expr::StrCmp(c) => Some(&c.symbol),
        Expr::And(v) | Expr::Or(v) => {
            let mut prev: Option<&SymbolRef> = None;
            for sub in v {
                let s = unique_symbol(sub)?;
                if prev.is_some_and(|p| p != s) {
                    return None;
                }
                prev = Some(s);
            }
            prev
        }
        _ => None,
    }
}

/// The prerequisites of a field used in an action: those of its symbol and
/// of every symbol it is a subfield of, each parsed and annotated, in that
/// order (the loop in expr.c `expr_field_parse()`).
pub(crate) fn field_prereqs(symbol: &SymbolRef, symtab: &SymbolTable) -> Result<Vec<Expr>> {
    let mut out = Vec::new();
    let mut s = symbol.clone();
    loop {
        if let Some(p) = &s.prereqs {
            let mut nesting = Vec::new();
            out.push(parse_and_annotate(p, symtab, &mut nesting).map_err(Error::Annotate)?);
        }
        let SymbolKind::Subfield { parent, .. } = &s.kind else {
            break;
        };
        let parent = parent.clone();
        s = parent;
    }
    Ok(out)
}

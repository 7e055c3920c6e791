//! OVN 23.03 `tests/ovn.at` sections "lexer", "registers", "conntrack
//! fields", "expression parser" and "expression annotation", as tables.

#[path = "ovn_cases/expr.rs"]
mod cases;
mod common;

use ovn_lflow::lex::{self, Token};
use ovn_lflow::Expr;

/// `ovstest test-ovn lex`: every token printed, space-separated, and every
/// printed token lexes back to itself (test-ovn.c `compare_token()`).
#[test]
fn lexer() {
    for &(input, want) in cases::LEXER {
        let tokens = lex::tokenize(input);
        let got: Vec<String> = tokens.iter().map(Token::to_string).collect();
        assert_eq!(got.join(" "), want, "input: {input}");
        for t in tokens.iter().filter(|t| !matches!(t, Token::Error(_))) {
            let again = lex::tokenize(&t.to_string());
            assert_eq!(again.len(), 1, "{t}");
            match (t, &again[0]) {
                (Token::Integer(a), Token::Integer(b)) => {
                    assert_eq!((a.value, a.mask), (b.value, b.mask), "{t}");
                    assert!(a.format == b.format || a.value == 0, "{t}");
                }
                (a, b) => assert_eq!(a, b),
            }
        }
    }
}

/// "registers": `test-ovn dump-symtab | grep reg`.
#[test]
fn registers() {
    let want = "\
reg0 = xxreg0[96..127]
reg1 = xxreg0[64..95]
reg2 = xxreg0[32..63]
reg3 = xxreg0[0..31]
reg4 = xxreg1[96..127]
reg5 = xxreg1[64..95]
reg6 = xxreg1[32..63]
reg7 = xxreg1[0..31]
reg8 = xreg4[32..63]
reg9 = xreg4[0..31]
xreg0 = xxreg0[64..127]
xreg1 = xxreg0[0..63]
xreg2 = xxreg1[64..127]
xreg3 = xxreg1[0..63]
xreg4 = OXM_OF_PKT_REG4
xxreg0 = NXM_NX_XXREG0
xxreg1 = NXM_NX_XXREG1
";
    assert_eq!(dump_symtab(|l| l.contains("reg")), want);
}

/// "conntrack fields": `test-ovn dump-symtab | grep ^ct`.
#[test]
fn conntrack_fields() {
    let want = "\
ct.dnat = ct_state[7]
ct.est = ct_state[1]
ct.inv = ct_state[4]
ct.new = ct_state[0]
ct.rel = ct_state[2]
ct.rpl = ct_state[3]
ct.snat = ct_state[6]
ct.trk = ct_state[5]
ct_label = NXM_NX_CT_LABEL
ct_label.blocked = ct_label[0]
ct_label.ecmp_reply_eth = ct_label[32..79]
ct_label.ecmp_reply_port = ct_label[80..95]
ct_label.force_snat = ct_label[3]
ct_label.label = ct_label[96..127]
ct_label.natted = ct_label[1]
ct_label.skip_snat = ct_label[2]
ct_mark = NXM_NX_CT_MARK
ct_mark.blocked = ct_mark[0]
ct_mark.ecmp_reply_port = ct_mark[16..31]
ct_mark.force_snat = ct_mark[3]
ct_mark.natted = ct_mark[1]
ct_mark.skip_snat = ct_mark[2]
ct_state = NXM_NX_CT_STATE
";
    assert_eq!(dump_symtab(|l| l.starts_with("ct")), want);
}

fn dump_symtab(keep: impl Fn(&str) -> bool) -> String {
    let symtab = common::symtab();
    let mut lines: Vec<String> = symtab
        .symbols()
        .iter()
        .map(|s| s.to_string())
        .filter(|l| keep(l))
        .collect();
    lines.sort();
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// `ovstest test-ovn parse-expr`: expr.c expands `$set`/`@group` while
/// parsing; here that is `resolve_sets()` right after parsing.
#[test]
fn expression_parser() {
    let symtab = common::symtab();
    let ctx = common::context();
    let mut failures = Vec::new();
    for &(input, want) in cases::PARSE_EXPR {
        let got = Expr::parse_with_context(input, &symtab, &ctx)
            .and_then(|e| e.resolve_sets(&ctx))
            .map_or_else(|e| e.to_string(), |e| e.to_string());
        if got != want {
            failures.push(format!("input: {input}\n  want: {want}\n   got: {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Whatever parses prints to a string that parses to the same tree.
#[test]
fn expression_parser_round_trip() {
    let symtab = common::symtab();
    for &(input, _) in cases::PARSE_EXPR {
        let Ok(e) = Expr::parse(input, &symtab) else {
            continue;
        };
        let printed = e.to_string();
        let again = Expr::parse(&printed, &symtab)
            .unwrap_or_else(|err| panic!("{input} printed as {printed}, which fails: {err}"));
        assert_eq!(e, again, "{input} printed as {printed}");
    }
}

/// `ovstest test-ovn annotate-expr`.
#[test]
fn expression_annotation() {
    let symtab = common::symtab();
    let ctx = common::context();
    let mut failures = Vec::new();
    for &(input, want) in cases::ANNOTATE_EXPR {
        let got = Expr::parse(input, &symtab)
            .and_then(|e| e.annotate(&symtab, &ctx))
            .map_or_else(|e| e.to_string(), |e| e.to_string());
        if got != want {
            failures.push(format!("input: {input}\n  want: {want}\n   got: {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

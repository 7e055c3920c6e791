//! The lexer and the match-expression parser on untrusted text: must never
//! panic; every token but an error prints to text that lexes back to it;
//! whatever parses prints to text that parses to the same tree, and
//! annotates and compiles without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovn_lflow::lex::{self, Token};
use ovn_lflow::{CompiledExpr, Expr, Flow, MapContext, SymbolTable};
use std::sync::OnceLock;

fn symtab() -> &'static SymbolTable {
    static S: OnceLock<SymbolTable> = OnceLock::new();
    S.get_or_init(SymbolTable::ovn)
}

fn context() -> &'static MapContext {
    static C: OnceLock<MapContext> = OnceLock::new();
    C.get_or_init(|| {
        MapContext::new()
            .with_address_set("as1", &["10.0.0.1", "10.0.0.0/8", "::1", "00:00:00:00:00:01"])
            .with_address_set("empty", &[] as &[&str])
            .with_port_group("pg1", &["p1", "p2"])
            .with_port("p1", 1)
            .with_resident("p1")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for t in lex::tokenize(text) {
        if matches!(t, Token::Error(_)) {
            continue;
        }
        if let Token::Integer(i) = &t {
            if i.sig_bits > 128 {
                continue; // only the low 128 bits are kept
            }
        }
        let again = lex::tokenize(&t.to_string());
        assert_eq!(again.len(), 1, "{t}");
        match (&t, &again[0]) {
            (Token::Integer(a), Token::Integer(b)) => {
                assert_eq!((a.value, a.mask), (b.value, b.mask), "{t}")
            }
            (a, b) => assert_eq!(a, b),
        }
    }
    let Ok(e) = Expr::parse(text, symtab()) else { return };
    let printed = e.to_string();
    let again = Expr::parse(&printed, symtab()).expect("printed expression must parse");
    assert_eq!(e, again, "{text} printed as {printed}");
    if let Ok(a) = e.annotate(symtab(), context()) {
        let m = CompiledExpr::compile(&a, context()).expect("annotated expression compiles");
        let _ = m.matches(&Flow::new());
        let _ = m.conjuncts().count();
    }
});

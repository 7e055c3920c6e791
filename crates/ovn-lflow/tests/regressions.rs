//! Inputs that fuzzing found to break an invariant, kept as tests.

mod common;

use ovn_lflow::{actions, lex, Expr};

/// A NUL inside a quoted string: input ends there, as for OVN's C strings,
/// so the string is unterminated instead of holding a NUL that prints as
/// `\u0000` and lexes back as an error (fuzz/artifacts/expr/crash-42d06e4a).
#[test]
fn nul_ends_input() {
    let tokens = lex::tokenize("! != \"e0\0\0u0\"!");
    assert_eq!(
        tokens.last().unwrap().to_string(),
        "error(\"Input ends inside quoted string.\")"
    );
    let symtab = common::symtab();
    assert!(Expr::parse("eth.type == 0x800\0 garbage", &symtab).is_ok());
    let opts = common::opt_tables();
    let pp = common::action_params(&symtab, &opts);
    assert!(actions::parse(
        "reg1[0] = put_dhcpv6_opts(domain_search = \"ovn.o/\0rg\");",
        &pp
    )
    .is_err());
}

/// A masked test of a nominal field prints as `value/mask`, not as a
/// subfield, which a nominal field does not have (expr.c prints
/// `ip.proto[1..2] == 0x3`, which does not parse back).
#[test]
fn masked_nominal_field_prints_as_value_mask() {
    let symtab = common::symtab();
    for (input, printed) in [
        ("ip.proto == 6/6", "ip.proto == 0x6/0x6"),
        ("ip.proto == 0x2/0x2", "ip.proto == 0x2/0x2"),
        ("ip.proto == 0/0x2", "ip.proto == 0/0x2"),
        ("ip.proto == 6", "ip.proto == 0x6"),
    ] {
        let e = Expr::parse(input, &symtab).unwrap();
        assert_eq!(e.to_string(), printed);
        assert_eq!(Expr::parse(printed, &symtab).unwrap(), e);
    }
}

/// `fwd_group` without arguments prints as itself (actions.c prints
/// `fwd_group();`, which does not parse back).
#[test]
fn bare_fwd_group_round_trips() {
    let symtab = common::symtab();
    let opts = common::opt_tables();
    let pp = common::action_params(&symtab, &opts);
    let p = actions::parse("fwd_group;", &pp).unwrap();
    assert_eq!(p.actions.to_string(), "fwd_group;");
    assert_eq!(actions::parse("fwd_group;", &pp).unwrap(), p);
}

/// A hex zero in a set with a reference prints as `0`, which reads back as
/// decimal: constants are stored as they read back
/// (`eth.src == {$wet3,  0X00}`).
#[test]
fn set_constants_are_stored_as_they_print() {
    let symtab = common::symtab();
    let e = Expr::parse("eth.src == {$wet3,  0X00}", &symtab).unwrap();
    assert_eq!(e.to_string(), "eth.src == {$wet3, 0}");
    assert_eq!(Expr::parse(&e.to_string(), &symtab).unwrap(), e);
}

/// Strings in actions are JSON-escaped when printed
/// (`fwd_group(childports="et\u0001\"" "lsp1");`).
#[test]
fn action_strings_are_escaped() {
    let symtab = common::symtab();
    let opts = common::opt_tables();
    let pp = common::action_params(&symtab, &opts);
    for input in [
        r#"fwd_group(childports="et\u0001\"" "lsp1");"#,
        r#"bind_vport("a\"b", inport);"#,
        r#"log(name="n\"", verdict=drop, meter="m\\");"#,
        r#"ct_lb(backends=1.2.3.4; hash_fields="x\"y");"#,
    ] {
        let p = actions::parse(input, &pp).unwrap();
        let printed = p.actions.to_string();
        let again = actions::parse(&printed, &pp).unwrap();
        assert_eq!(again.actions, p.actions, "{printed}");
    }
}

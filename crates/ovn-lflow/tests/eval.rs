//! Evaluation: OVN 23.03 `tests/ovn.at` cases whose expected OpenFlow flows
//! ("simplification special cases", "is_chassis_resident simplification",
//! "converting expressions to flows -- string fields / address sets / port
//! groups / conjunction") are restated as which packets match, and a
//! brute-force model over small fields (the spirit of `test-ovn
//! exhaustive`).

mod common;

use ovn_lflow::{CompiledExpr, Expr, Field, Flow};
use proptest::prelude::*;

fn compile(s: &str) -> CompiledExpr {
    let symtab = common::symtab();
    let ctx = common::context();
    CompiledExpr::parse(s, &symtab, &ctx).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn ip4() -> Flow {
    Flow::new().with(Field::EthType, 0x0800)
}

fn ip6() -> Flow {
    Flow::new().with(Field::EthType, 0x86dd)
}

fn tcp4(dst: u16) -> Flow {
    ip4()
        .with(Field::IpProto, 6)
        .with(Field::TcpDst, dst.into())
}

fn ipv4(s: &str) -> u128 {
    u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()).into()
}

#[test]
fn simplification_special_cases() {
    assert!(compile("eth.dst == 0/0").matches(&Flow::new()));
    assert!(!compile("eth.dst != 0/0").matches(&Flow::new().with(Field::EthDst, 7)));
    for e in ["tcp.dst >= 0", "tcp.dst <= 65535"] {
        let m = compile(e);
        assert!(m.matches(&tcp4(0)) && m.matches(&tcp4(65535)), "{e}");
        assert!(!m.matches(&ip4().with(Field::IpProto, 17)), "{e}");
    }
    let gt0 = compile("tcp.dst > 0");
    assert!(!gt0.matches(&tcp4(0)) && gt0.matches(&tcp4(1)) && gt0.matches(&tcp4(65535)));
    let lt = compile("tcp.dst < 65535");
    assert!(lt.matches(&tcp4(0)) && !lt.matches(&tcp4(65535)));
}

#[test]
fn prerequisites_decided_by_the_match_are_dropped() {
    // `udp.src` and `udp.dst` each bring `ip.proto == 17 && (ip4 || ip6)`; beside `ip4`
    // the alternatives are decided: eth.type, ip.proto and the two ports remain.
    let m = compile("ip4 && udp.src == 68 && udp.dst == 67");
    assert_eq!(m.n_tests(), 4);
    let dhcp = ip4()
        .with(Field::IpProto, 17)
        .with(Field::UdpSrc, 68)
        .with(Field::UdpDst, 67);
    assert!(m.matches(&dhcp));
    assert!(!m.matches(&dhcp.clone().with(Field::EthType, 0x86dd)));
    assert!(!m.matches(&dhcp.with(Field::IpProto, 6)));
    // An alternative the match contradicts goes; one left becomes a conjunct.
    let v6 = compile("(eth.type == 0x800 || eth.type == 0x86dd) && ip6 && icmp6");
    assert_eq!(v6.exact(Field::EthType), Some(0x86dd));
    assert_eq!(compile("ip4 && ip6").as_const(), Some(false));
}

#[test]
fn is_chassis_resident_simplification() {
    assert_eq!(
        compile(r#"is_chassis_resident("eth1")"#).as_const(),
        Some(true)
    );
    assert_eq!(
        compile(r#"is_chassis_resident("eth2")"#).as_const(),
        Some(false)
    );
    assert_eq!(
        compile(r#"!is_chassis_resident("eth1")"#).as_const(),
        Some(false)
    );
    assert_eq!(
        compile(r#"!is_chassis_resident("eth2")"#).as_const(),
        Some(true)
    );
}

/// Which `inport` keys (0..8 and LOCAL's 0xfffe) match, for IPv4 and IPv6.
fn inports(m: &CompiledExpr, flow: Flow) -> Vec<u128> {
    [0u128, 5, 6, 7, 0x11, 0x12, 0x13, 0xfffe]
        .into_iter()
        .filter(|&k| m.matches(&flow.clone().with(Field::LogInport, k)))
        .collect()
}

#[test]
fn expressions_to_flows_string_fields() {
    assert_eq!(inports(&compile(r#"inport == "eth0""#), Flow::new()), [5]);
    assert_eq!(inports(&compile(r#"inport == "eth1""#), Flow::new()), [6]);
    assert_eq!(compile(r#"inport == "eth2""#).as_const(), Some(false));
    let m = compile(r#"inport == "eth0" && ip"#);
    assert_eq!(
        (
            inports(&m, ip4()),
            inports(&m, ip6()),
            inports(&m, Flow::new())
        ),
        (vec![5], vec![5], vec![])
    );
    assert_eq!(compile(r#"inport == "eth2" && ip"#).as_const(), Some(false));
    let m = compile(r#"inport == {"eth0", "eth1", "eth2", "LOCAL"}"#);
    assert_eq!(inports(&m, Flow::new()), [5, 6, 0xfffe]);
    let m = compile(r#"inport == {"eth0", "eth1", "eth2"} && ip"#);
    assert_eq!(inports(&m, ip6()), [5, 6]);
    assert_eq!(
        inports(&compile(r#"inport == "eth0" && inport == "eth1""#), ip4()),
        []
    );
}

/// Which of `candidates` match as `ip4.src` of an IPv4 packet.
fn ip4_srcs(e: &str, candidates: &[&str]) -> Vec<String> {
    let m = compile(e);
    candidates
        .iter()
        .filter(|a| m.matches(&ip4().with(Field::Ipv4Src, ipv4(a))))
        .map(|a| a.to_string())
        .collect()
}

#[test]
fn expressions_to_flows_address_sets() {
    let c = [
        "1.2.3.4",
        "10.0.0.1",
        "10.0.0.2",
        "10.0.0.3",
        "10.0.0.4",
        "1.2.15.255",
        "5.5.5.9",
    ];
    let set1 = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
    assert_eq!(
        ip4_srcs("ip4.src == {10.0.0.1, 10.0.0.2, 10.0.0.3}", &c),
        set1
    );
    assert_eq!(ip4_srcs("ip4.src == $set1", &c), set1);
    assert_eq!(
        ip4_srcs("ip4.src == {1.2.3.4, $set1}", &c),
        ["1.2.3.4", "10.0.0.1", "10.0.0.2", "10.0.0.3"]
    );
    assert_eq!(
        ip4_srcs("ip4.src == {1.2.0.0/20, 5.5.5.0/24, $set1}", &c),
        [
            "1.2.3.4",
            "10.0.0.1",
            "10.0.0.2",
            "10.0.0.3",
            "1.2.15.255",
            "5.5.5.9"
        ]
    );
    assert_eq!(compile("ip4.src == {$set4}").as_const(), Some(false));
    assert_eq!(ip4_srcs("ip4.src == {1.2.3.4, $set4}", &c), ["1.2.3.4"]);
    assert_eq!(
        ip4_srcs("ip4.src == 1.2.3.4 || ip4.src == {$set4}", &c),
        ["1.2.3.4"]
    );
    assert_eq!(ip4_srcs("ip4.src != {$set4}", &c), c);
    assert_eq!(
        ip4_srcs("ip4.src != {1.0.0.0/8, $set4}", &c),
        ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "5.5.5.9"]
    );
    let m = compile("ip4.dst == 172.27.0.65 && ip4.src == $set1 && ip4.dst != 10.128.0.0/14");
    let f = ip4().with(Field::Ipv4Dst, ipv4("172.27.0.65"));
    assert!(m.matches(&f.clone().with(Field::Ipv4Src, ipv4("10.0.0.2"))));
    assert!(!m.matches(&f.with(Field::Ipv4Src, ipv4("10.0.0.4"))));
    let m = compile("ip6.src == {::1, $set2, ::4}");
    for (v, want) in [(1, true), (2, true), (3, true), (4, true), (5, false)] {
        assert_eq!(m.matches(&ip6().with(Field::Ipv6Src, v)), want);
    }
    let m = compile("eth.src == {00:00:00:00:00:01, $set3, ba:be:be:ef:de:ad, $set3}");
    for (v, want) in [
        (1, true),
        (3, true),
        (0xba_be_be_ef_de_ad, true),
        (4, false),
    ] {
        assert_eq!(m.matches(&Flow::new().with(Field::EthSrc, v)), want);
    }
}

#[test]
fn expressions_to_flows_port_groups() {
    let outports = |e: &str| {
        let m = compile(e);
        (0u128..0x20)
            .filter(|&k| m.matches(&Flow::new().with(Field::LogOutport, k)))
            .collect::<Vec<_>>()
    };
    assert_eq!(outports("outport == @pg1"), [0x11, 0x12, 0x13]);
    assert_eq!(outports("outport == {@pg_empty}"), []);
    assert_eq!(outports(r#"outport == {"lsp1", @pg_empty}"#), [0x11]);
}

#[test]
fn expressions_to_flows_conjunction() {
    let m = compile("ip4.src == {10.0.0.1, 10.0.0.2, 10.0.0.3} && ip4.dst == {20.0.0.1, 20.0.0.2}");
    let f = |s, d| {
        ip4()
            .with(Field::Ipv4Src, ipv4(s))
            .with(Field::Ipv4Dst, ipv4(d))
    };
    assert!(m.matches(&f("10.0.0.3", "20.0.0.2")));
    assert!(!m.matches(&f("10.0.0.3", "20.0.0.3")));
    // ct_state bits: new 0, est 1, trk 5.
    let m = compile("ip && (!ct.est || (ct.est && ct_mark.blocked == 1))");
    let ct = |state: u128, mark: u128| ip6().with(Field::CtState, state).with(Field::CtMark, mark);
    assert!(m.matches(&ct(0x20, 0)));
    assert!(!m.matches(&ct(0x22, 0)));
    assert!(m.matches(&ct(0x22, 1)));
    assert!(!m.matches(&ct(0x00, 0)), "ct.est requires ct.trk");
    let m = compile(
        "ip4 && ip4.src == {10.0.0.1, 10.0.0.2, 10.0.0.3} && ip4.dst == {20.0.0.1, 20.0.0.2, \
         20.0.0.3} && tcp.dst >= 1000 && tcp.dst <= 1010",
    );
    let f = |port| {
        tcp4(port)
            .with(Field::Ipv4Src, ipv4("10.0.0.1"))
            .with(Field::Ipv4Dst, ipv4("20.0.0.3"))
    };
    assert_eq!((999..1012).filter(|&p| m.matches(&f(p))).count(), 11);
}

#[test]
fn conjuncts_index_exact_matches() {
    let m = compile(r#"inport == "eth0" && eth.dst == 00:00:00:00:00:07 && ip4"#);
    assert_eq!(m.exact(Field::LogInport), Some(5));
    assert_eq!(m.exact(Field::EthDst), Some(7));
    assert_eq!(m.exact(Field::EthType), Some(0x800));
    assert_eq!(m.exact(Field::Ipv4Src), None);
    assert_eq!(compile("ip").conjuncts().count(), 0);
}

/// A generated expression over two 3-bit variables, `reg0[0..2]` and
/// `reg1[5..7]`, with its own semantics as the model.
#[derive(Debug, Clone)]
enum T {
    Cmp(usize, &'static str, u8),
    Range(u8, &'static str, usize, &'static str, u8),
    Set(usize, bool, Vec<u8>),
    Not(Box<T>),
    And(Vec<T>),
    Or(Vec<T>),
}

const VARS: [&str; 2] = ["reg0[0..2]", "reg1[5..7]"];

fn relop(op: &str, a: u8, b: u8) -> bool {
    match op {
        "==" => a == b,
        "!=" => a != b,
        "<" => a < b,
        "<=" => a <= b,
        ">" => a > b,
        _ => a >= b,
    }
}

impl T {
    fn eval(&self, v: [u8; 2]) -> bool {
        match self {
            T::Cmp(i, op, c) => relop(op, v[*i], *c),
            T::Range(a, op1, i, op2, b) => relop(op1, *a, v[*i]) && relop(op2, v[*i], *b),
            T::Set(i, eq, cs) => cs.contains(&v[*i]) == *eq,
            T::Not(t) => !t.eval(v),
            T::And(ts) => ts.iter().all(|t| t.eval(v)),
            T::Or(ts) => ts.iter().any(|t| t.eval(v)),
        }
    }

    fn render(&self) -> String {
        let join = |ts: &[T], op: &str| {
            ts.iter()
                .map(|t| format!("({})", t.render()))
                .collect::<Vec<_>>()
                .join(op)
        };
        match self {
            T::Cmp(i, op, c) => format!("{} {op} {c}", VARS[*i]),
            T::Range(a, op1, i, op2, b) => format!("{a} {op1} {} {op2} {b}", VARS[*i]),
            T::Set(i, eq, cs) => {
                let list: Vec<String> = cs.iter().map(u8::to_string).collect();
                format!(
                    "{} {} {{{}}}",
                    VARS[*i],
                    if *eq { "==" } else { "!=" },
                    list.join(", ")
                )
            }
            T::Not(t) => format!("!({})", t.render()),
            T::And(ts) => join(ts, " && "),
            T::Or(ts) => join(ts, " || "),
        }
    }
}

fn term() -> impl Strategy<Value = T> {
    let op = prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">="]);
    let lt = prop::sample::select(vec!["<", "<="]);
    let lt2 = prop::sample::select(vec!["<", "<="]);
    prop_oneof![
        (0..2usize, op, 0..8u8).prop_map(|(i, op, c)| T::Cmp(i, op, c)),
        (0..8u8, lt, 0..2usize, lt2, 0..8u8)
            .prop_map(|(a, o1, i, o2, b)| T::Range(a, o1, i, o2, b)),
        (
            0..2usize,
            any::<bool>(),
            prop::collection::vec(0..8u8, 1..4)
        )
            .prop_map(|(i, eq, cs)| T::Set(i, eq, cs)),
    ]
}

fn tree() -> impl Strategy<Value = T> {
    term().prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| T::Not(Box::new(t))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(T::And),
            prop::collection::vec(inner, 2..4).prop_map(T::Or),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Compiled evaluation agrees with the model on every value of both
    /// variables, and the parsed expression prints to text that parses to
    /// the same tree.
    #[test]
    fn evaluation_matches_model(t in tree()) {
        let symtab = common::symtab();
        let ctx = common::context();
        let text = t.render();
        let e = Expr::parse(&text, &symtab).unwrap();
        prop_assert_eq!(&Expr::parse(&e.to_string(), &symtab).unwrap(), &e);
        let annotated = e.annotate(&symtab, &ctx).unwrap();
        let m = CompiledExpr::compile(&annotated, &ctx).unwrap();
        for a in 0..8u8 {
            for b in 0..8u8 {
                let flow = Flow::new()
                    .with(Field::Xxreg0, (u128::from(a) << 96) | (u128::from(b) << 69) | (0xff << 100));
                prop_assert_eq!(m.matches(&flow), t.eval([a, b]), "{} on {} {}", text, a, b);
            }
        }
    }
}

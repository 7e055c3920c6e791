//! Evaluating a typical ACL match on a flow (what a switch does on every
//! flow-cache miss, once per candidate logical flow), and parsing and
//! compiling a typical logical flow (what it does once per flow change).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ovn_lflow::actions::{self, ActionParams, Pipeline};
use ovn_lflow::dhcp::OptionTable;
use ovn_lflow::{CompiledExpr, Expr, Field, Flow, MapContext, SymbolTable};

const ACL: &str = "((ct.new && !ct.est) || (!ct.new && ct.est && !ct.rpl && ct_mark.blocked == 1)) \
                   && (outport == @pg_web && ip4 && ip4.src == $as_clients && tcp.dst == {80, 443})";
const ACTIONS: &str = "reg0[1] = 1; ct_commit { ct_mark.blocked = 0; ct_label.label = 5; }; next;";

fn context() -> MapContext {
    MapContext::new()
        .with_port("web1", 2)
        .with_port_group("pg_web", &["web1", "web2"])
        .with_address_set("as_clients", &["10.0.0.0/24", "192.168.1.7", "192.168.1.8"])
}

fn flow() -> Flow {
    Flow::new()
        .with(Field::LogOutport, 2)
        .with(Field::CtState, 0x21)
        .with(Field::EthType, 0x0800)
        .with(Field::Ipv4Src, 0xc0a8_0108)
        .with(Field::IpProto, 6)
        .with(Field::TcpDst, 443)
}

fn bench(c: &mut Criterion) {
    let symtab = SymbolTable::ovn();
    let ctx = context();
    let m = CompiledExpr::parse(ACL, &symtab, &ctx).unwrap();
    let (hit, miss) = (flow(), flow().with(Field::TcpDst, 22));
    assert!(m.matches(&hit) && !m.matches(&miss));

    let mut g = c.benchmark_group("eval");
    g.throughput(Throughput::Elements(1));
    g.bench_function("acl_match", |b| {
        b.iter(|| black_box(&m).matches(black_box(&hit)))
    });
    g.bench_function("acl_miss", |b| {
        b.iter(|| black_box(&m).matches(black_box(&miss)))
    });
    g.finish();

    let (dhcp, dhcpv6, nd_ra, events) = (
        OptionTable::dhcpv4(),
        OptionTable::dhcpv6(),
        OptionTable::nd_ra(),
        OptionTable::empty_lb_backends(),
    );
    let pp = ActionParams {
        symtab: &symtab,
        dhcp_opts: &dhcp,
        dhcpv6_opts: &dhcpv6,
        nd_ra_opts: &nd_ra,
        event_opts: &events,
        pipeline: Pipeline::Ingress,
        n_tables: 27,
        cur_ltable: 9,
    };
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    g.bench_function("acl_match", |b| {
        b.iter(|| Expr::parse(black_box(ACL), &symtab).unwrap())
    });
    g.bench_function("acl_match_annotate_compile", |b| {
        b.iter(|| CompiledExpr::parse(black_box(ACL), &symtab, &ctx).unwrap())
    });
    g.bench_function("actions", |b| {
        b.iter(|| actions::parse(black_box(ACTIONS), &pp).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

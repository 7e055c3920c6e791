//! OVN 23.03 `tests/ovn.at` "action parsing" (`ovstest test-ovn
//! parse-actions`), extracted verbatim: the input, then either its
//! formatted form and prerequisites or the error. The expected OpenFlow
//! encodings ("encodes as", "uses group", "uses meter") are left out: this
//! crate executes actions and does not compile them to OpenFlow.
#![allow(dead_code)]

/// What parsing an input must give.
pub enum Expect {
    /// Success: formatted form (the input if `None`), prerequisites.
    Ok(Option<&'static str>, Option<&'static str>),
    /// Failure with this message.
    Err(&'static str),
}

pub const ACTIONS: &[(&str, Expect)] = &[
    (r##"drop;"##, Expect::Ok(None, None)),
    (
        r##"drop; next;"##,
        Expect::Err(r##"Syntax error at `next' expecting end of input."##),
    ),
    (
        r##"next; drop;"##,
        Expect::Err(r##"Syntax error at `drop' expecting action."##),
    ),
    (r##"output;"##, Expect::Ok(None, None)),
    (r##"next;"##, Expect::Ok(None, None)),
    (r##"next(11);"##, Expect::Ok(Some(r##"next;"##), None)),
    (r##"next(0);"##, Expect::Ok(None, None)),
    (r##"next(23);"##, Expect::Ok(None, None)),
    (
        r##"next();"##,
        Expect::Err(r##"Syntax error at `)' expecting "pipeline" or "table"."##),
    ),
    (
        r##"next(10;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"next(24);"##,
        Expect::Err(r##""next" action cannot advance beyond table 23."##),
    ),
    (r##"next(table=11);"##, Expect::Ok(Some(r##"next;"##), None)),
    (
        r##"next(pipeline=ingress);"##,
        Expect::Ok(Some(r##"next;"##), None),
    ),
    (
        r##"next(table=11, pipeline=ingress);"##,
        Expect::Ok(Some(r##"next;"##), None),
    ),
    (
        r##"next(pipeline=ingress, table=11);"##,
        Expect::Ok(Some(r##"next;"##), None),
    ),
    (
        r##"next(pipeline=egress);"##,
        Expect::Ok(Some(r##"next(pipeline=egress, table=11);"##), None),
    ),
    (
        r##"next(pipeline=egress, table=5);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"next(table=10);"##,
        Expect::Ok(Some(r##"next(10);"##), None),
    ),
    (
        r##"tcp.dst=80;"##,
        Expect::Ok(
            Some(r##"tcp.dst = 80;"##),
            Some(r##"ip.proto == 0x6 && (eth.type == 0x800 || eth.type == 0x86dd)"##),
        ),
    ),
    (r##"eth.dst[40] = 1;"##, Expect::Ok(None, None)),
    (
        r##"vlan.pcp = 2;"##,
        Expect::Ok(None, Some(r##"vlan.tci[12]"##)),
    ),
    (r##"vlan.tci[13..15] = 2;"##, Expect::Ok(None, None)),
    (r##"inport = "";"##, Expect::Ok(None, None)),
    (
        r##"ip.ttl=4;"##,
        Expect::Ok(
            Some(r##"ip.ttl = 4;"##),
            Some(r##"eth.type == 0x800 || eth.type == 0x86dd"##),
        ),
    ),
    (
        r##"outport="eth0"; next; outport="LOCAL"; next;"##,
        Expect::Ok(
            Some(r##"outport = "eth0"; next; outport = "LOCAL"; next;"##),
            None,
        ),
    ),
    (
        r##"inport[1] = 1;"##,
        Expect::Err(r##"Cannot select subfield of string field inport."##),
    ),
    (
        r##"ip.proto[1] = 1;"##,
        Expect::Err(r##"Cannot select subfield of nominal field ip.proto."##),
    ),
    (
        r##"eth.dst[40] == 1;"##,
        Expect::Err(r##"Syntax error at `==' expecting `=' or `<->'."##),
    ),
    (
        r##"ip = 1;"##,
        Expect::Err(r##"Predicate symbol ip used where lvalue required."##),
    ),
    (
        r##"ip.proto = 6;"##,
        Expect::Err(r##"Field ip.proto is not modifiable."##),
    ),
    (
        r##"inport = {"a", "b"};"##,
        Expect::Err(r##"Syntax error at `{' expecting constant."##),
    ),
    (
        r##"inport = {};"##,
        Expect::Err(r##"Syntax error at `{' expecting constant."##),
    ),
    (
        r##"bad_prereq = 123;"##,
        Expect::Err(
            r##"Error parsing expression `xyzzy' encountered as prerequisite or predicate of initial expression: Syntax error at `xyzzy' expecting field name."##,
        ),
    ),
    (
        r##"self_recurse = 123;"##,
        Expect::Err(
            r##"Error parsing expression `self_recurse != 0' encountered as prerequisite or predicate of initial expression: Error parsing expression `self_recurse != 0' encountered as prerequisite or predicate of initial expression: Recursive expansion of symbol `self_recurse'."##,
        ),
    ),
    (
        r##"vlan.present = 0;"##,
        Expect::Err(r##"Predicate symbol vlan.present used where lvalue required."##),
    ),
    (
        r##"reg0=reg1;"##,
        Expect::Ok(Some(r##"reg0 = reg1;"##), None),
    ),
    (
        r##"vlan.pcp = reg0[0..2];"##,
        Expect::Ok(None, Some(r##"vlan.tci[12]"##)),
    ),
    (
        r##"reg0[10] = vlan.pcp[1];"##,
        Expect::Ok(None, Some(r##"vlan.tci[12]"##)),
    ),
    (r##"outport = inport;"##, Expect::Ok(None, None)),
    (
        r##"reg0[0] = vlan.present;"##,
        Expect::Err(r##"Predicate symbol vlan.present used where lvalue required."##),
    ),
    (
        r##"reg0 = reg1[0..10];"##,
        Expect::Err(r##"Can't assign 11-bit value to 32-bit destination."##),
    ),
    (
        r##"inport = reg0;"##,
        Expect::Err(r##"Can't assign integer field (reg0) to string field (inport)."##),
    ),
    (
        r##"inport = big_string;"##,
        Expect::Err(r##"String fields inport and big_string are incompatible for assignment."##),
    ),
    (
        r##"ip.proto = reg0[0..7];"##,
        Expect::Err(r##"Field ip.proto is not modifiable."##),
    ),
    (r##"reg0 <-> reg1;"##, Expect::Ok(None, None)),
    (
        r##"vlan.pcp <-> reg0[0..2];"##,
        Expect::Ok(None, Some(r##"vlan.tci[12]"##)),
    ),
    (
        r##"reg0[10] <-> vlan.pcp[1];"##,
        Expect::Ok(None, Some(r##"vlan.tci[12]"##)),
    ),
    (r##"outport <-> inport;"##, Expect::Ok(None, None)),
    (
        r##"reg0[0] <-> vlan.present;"##,
        Expect::Err(r##"Predicate symbol vlan.present used where lvalue required."##),
    ),
    (
        r##"reg0 <-> reg1[0..10];"##,
        Expect::Err(r##"Can't exchange 32-bit field with 11-bit field."##),
    ),
    (
        r##"inport <-> reg0;"##,
        Expect::Err(r##"Can't exchange string field (inport) with integer field (reg0)."##),
    ),
    (
        r##"inport <-> big_string;"##,
        Expect::Err(r##"String fields inport and big_string are incompatible for exchange."##),
    ),
    (
        r##"ip.proto <-> reg0[0..7];"##,
        Expect::Err(r##"Field ip.proto is not modifiable."##),
    ),
    (
        r##"reg0[0..7] <-> ip.proto;"##,
        Expect::Err(r##"Field ip.proto is not modifiable."##),
    ),
    (r##"ip.ttl--;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ip.ttl"##,
        Expect::Err(r##"Syntax error at end of input expecting `--'."##),
    ),
    (
        r##"pkt.mark=1;"##,
        Expect::Ok(Some(r##"pkt.mark = 1;"##), None),
    ),
    (r##"pkt.mark = 1000;"##, Expect::Ok(None, None)),
    (
        r##"pkt.mark;"##,
        Expect::Err(r##"Syntax error at `pkt.mark' expecting action."##),
    ),
    (
        r##"pkt.mark = foo;"##,
        Expect::Err(r##"Syntax error at `foo' expecting field name."##),
    ),
    (
        r##"pkt.mark = "foo";"##,
        Expect::Err(r##"Integer field pkt.mark is not compatible with string constant."##),
    ),
    (r##"ct_lb;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_lb();"##,
        Expect::Ok(Some(r##"ct_lb;"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(192.168.1.2:80, 192.168.1.3:80);"##,
        Expect::Err(r##"Syntax error at `192.168.1.2' expecting backends."##),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:80,192.168.1.3:80);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:80,192.168.1.3:80; skip_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:80,192.168.1.3:80; force_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=192.168.1.2, 192.168.1.3, );"##,
        Expect::Ok(
            Some(r##"ct_lb(backends=192.168.1.2,192.168.1.3);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_lb(backends=fd0f::2, fd0f::3, );"##,
        Expect::Ok(
            Some(r##"ct_lb(backends=fd0f::2,fd0f::3);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:);"##,
        Expect::Err(r##"Syntax error at `)' expecting port number."##),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:123456);"##,
        Expect::Err(r##"Syntax error at `123456' expecting port number."##),
    ),
    (
        r##"ct_lb(backends=foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IP address."##),
    ),
    (
        r##"ct_lb(backends=[192.168.1.2]);"##,
        Expect::Err(r##"Syntax error at `192.168.1.2' expecting IPv6 address."##),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:80,192.168.1.3:80; hash_fields=eth_src,eth_dst,ip_src);"##,
        Expect::Err(r##"Syntax error at `eth_src' invalid hash_fields."##),
    ),
    (
        r##"ct_lb(backends=192.168.1.2:80,192.168.1.3:80; hash_fields="eth_src,eth_dst,ip_src");"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=fd0f::2,fd0f::3; hash_fields="eth_src,eth_dst,ip_src,ip_dst,tp_src,tp_dst");"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=fd0f::2,fd0f::3; hash_fields="eth_src,eth_dst,ip_src,ip_dst,tcp_src,tcp_dst");"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=fd0f::2,fd0f::3; hash_fields="eth_src,eth_dst,ip_src,ip_dst,udp_src,udp_dst");"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=fd0f::2,fd0f::3; hash_fields="eth_src,eth_dst,ip_src,ip_dst,sctp_src,sctp_dst");"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=fd0f::2,fd0f::3; hash_fields="eth_src,eth_dst,ip_src,ip_dst,sctp_src,sctp_dst"; skip_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb(backends=fd0f::2,fd0f::3; hash_fields="eth_src,eth_dst,ip_src,ip_dst,sctp_src,sctp_dst"; force_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb_mark(backends=192.168.1.2:80,192.168.1.3:80);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb_mark(backends=192.168.1.2:80,192.168.1.3:80; skip_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb_mark(backends=192.168.1.2:80,192.168.1.3:80; force_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb_mark(backends=192.168.1.2:80,192.168.1.3:80; hash_fields="eth_src,eth_dst,ip_src,ip_dst,sctp_src,sctp_dst");"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb_mark(backends=192.168.1.2:80,192.168.1.3:80; hash_fields="eth_src,eth_dst,ip_src,ip_dst,sctp_src,sctp_dst"; skip_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_lb_mark(backends=192.168.1.2:80,192.168.1.3:80; hash_fields="eth_src,eth_dst,ip_src,ip_dst,sctp_src,sctp_dst"; force_snat);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (r##"ct_next;"##, Expect::Ok(None, Some(r##"ip"##))),
    (r##"ct_commit;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_commit { };"##,
        Expect::Ok(Some(r##"ct_commit;"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit { ct_mark=1; };"##,
        Expect::Ok(Some(r##"ct_commit { ct_mark = 1; };"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit { ct_mark=1/1; };"##,
        Expect::Ok(Some(r##"ct_commit { ct_mark = 1/1; };"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit { ct_label=1; };"##,
        Expect::Ok(Some(r##"ct_commit { ct_label = 1; };"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit { ct_label=1/1; };"##,
        Expect::Ok(Some(r##"ct_commit { ct_label = 1/1; };"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit { ct_mark=1; ct_label=2; };"##,
        Expect::Ok(
            Some(r##"ct_commit { ct_mark = 1; ct_label = 2; };"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit { ct_label=0x01020304050607080910111213141516; };"##,
        Expect::Ok(
            Some(r##"ct_commit { ct_label = 0x1020304050607080910111213141516; };"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit { ct_label=0x1000000000000000000000000000000/0x1000000000000000000000000000000; };"##,
        Expect::Ok(
            Some(
                r##"ct_commit { ct_label = 0x1000000000000000000000000000000/0x1000000000000000000000000000000; };"##,
            ),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit { ct_label=18446744073709551615; };"##,
        Expect::Ok(
            Some(r##"ct_commit { ct_label = 18446744073709551615; };"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit { ct_label[0..47] = 0x00000f040201; ct_label[48..63] = 0x0002; };"##,
        Expect::Ok(
            Some(r##"ct_commit { ct_label[0..47] = 0xf040201; ct_label[48..63] = 0x2; };"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit { ct_label=18446744073709551616; };"##,
        Expect::Err(r##"Decimal constants must be less than 2**64."##),
    ),
    (
        r##"ct_commit { ct_label=0x181716151413121110090807060504030201; };"##,
        Expect::Err(r##"141-bit constant is not compatible with 128-bit field ct_label."##),
    ),
    (
        r##"ct_commit { ip4.dst = 192.168.0.1; };"##,
        Expect::Err(r##"Field ip4.dst is not modifiable."##),
    ),
    (
        r##"ct_commit();"##,
        Expect::Ok(Some(r##"ct_commit;"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit(ct_mark=1);"##,
        Expect::Ok(Some(r##"ct_commit(ct_mark=0x1);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit(ct_mark=1/1);"##,
        Expect::Ok(Some(r##"ct_commit(ct_mark=0x1/0x1);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit(ct_label=1);"##,
        Expect::Ok(Some(r##"ct_commit(ct_label=0x1);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit(ct_label=1/1);"##,
        Expect::Ok(Some(r##"ct_commit(ct_label=0x1/0x1);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_commit(ct_mark=1, ct_label=2);"##,
        Expect::Ok(
            Some(r##"ct_commit(ct_mark=0x1, ct_label=0x2);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit(ct_label=0x01020304050607080910111213141516);"##,
        Expect::Ok(
            Some(r##"ct_commit(ct_label=0x1020304050607080910111213141516);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit(ct_label=0x181716151413121110090807060504030201);"##,
        Expect::Ok(
            Some(r##"ct_commit(ct_label=0x16151413121110090807060504030201);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit(ct_label=0x1000000000000000000000000000000/0x1000000000000000000000000000000);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_commit(ct_label=18446744073709551615);"##,
        Expect::Ok(
            Some(r##"ct_commit(ct_label=0xffffffffffffffff);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_commit(ct_label=18446744073709551616);"##,
        Expect::Err(r##"Decimal constants must be less than 2**64."##),
    ),
    (
        r##"ct_mark = 12345"##,
        Expect::Err(r##"Field ct_mark is not modifiable."##),
    ),
    (
        r##"ct_label = 0xcafe"##,
        Expect::Err(r##"Field ct_label is not modifiable."##),
    ),
    (
        r##"ct_label.blocked = 1/1"##,
        Expect::Err(r##"Field ct_label.blocked is not modifiable."##),
    ),
    (r##"ct_dnat;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_dnat(192.168.1.2);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (r##"ct_dnat(fd11::2);"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_dnat(192.168.1.2, 1-3000);"##,
        Expect::Ok(Some(r##"ct_dnat(192.168.1.2,1-3000);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_dnat(192.168.1.2, 192.168.1.3);"##,
        Expect::Err(r##"Syntax error at `192.168.1.3' expecting Integer for port range."##),
    ),
    (
        r##"ct_dnat(foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_dnat(foo, bar);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_dnat();"##,
        Expect::Err(r##"Syntax error at `)' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_dnat(192.168.1.2, foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_dnat(192.168.1.2, 1000-foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_dnat(192.168.1.2, 1000);"##,
        Expect::Ok(Some(r##"ct_dnat(192.168.1.2,1000);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_dnat(192.168.1.2, 1000-100);"##,
        Expect::Err(r##"Syntax error at `100' range high should be greater than range low."##),
    ),
    (r##"ct_dnat_in_czone;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_dnat_in_czone(192.168.1.2);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_dnat_in_czone(fd11::2);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_dnat_in_czone(192.168.1.2, 1-3000);"##,
        Expect::Ok(
            Some(r##"ct_dnat_in_czone(192.168.1.2,1-3000);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_dnat_in_czone(192.168.1.2, 192.168.1.3);"##,
        Expect::Err(r##"Syntax error at `192.168.1.3' expecting Integer for port range."##),
    ),
    (
        r##"ct_dnat_in_czone(foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_dnat_in_czone(foo, bar);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_dnat_in_czone();"##,
        Expect::Err(r##"Syntax error at `)' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_dnat_in_czone(192.168.1.2, foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_dnat_in_czone(192.168.1.2, 1000-foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_dnat_in_czone(192.168.1.2, 1000);"##,
        Expect::Ok(
            Some(r##"ct_dnat_in_czone(192.168.1.2,1000);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_dnat_in_czone(192.168.1.2, 1000-100);"##,
        Expect::Err(r##"Syntax error at `100' range high should be greater than range low."##),
    ),
    (r##"ct_snat;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_snat(192.168.1.2);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (r##"ct_snat(fd11::2);"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_snat(192.168.1.2, 1-3000);"##,
        Expect::Ok(Some(r##"ct_snat(192.168.1.2,1-3000);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_snat(192.168.1.2, 192.168.1.3);"##,
        Expect::Err(r##"Syntax error at `192.168.1.3' expecting Integer for port range."##),
    ),
    (
        r##"ct_snat(foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_snat(foo, bar);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_snat();"##,
        Expect::Err(r##"Syntax error at `)' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_snat(192.168.1.2, foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_snat(192.168.1.2, 1000-foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_snat(192.168.1.2, 1000);"##,
        Expect::Ok(Some(r##"ct_snat(192.168.1.2,1000);"##), Some(r##"ip"##)),
    ),
    (
        r##"ct_snat(192.168.1.2, 1000-100);"##,
        Expect::Err(r##"Syntax error at `100' range high should be greater than range low."##),
    ),
    (r##"ct_snat_in_czone;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"ct_snat_in_czone(192.168.1.2);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_snat_in_czone(fd11::2);"##,
        Expect::Ok(None, Some(r##"ip"##)),
    ),
    (
        r##"ct_snat_in_czone(192.168.1.2, 1-3000);"##,
        Expect::Ok(
            Some(r##"ct_snat_in_czone(192.168.1.2,1-3000);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_snat_in_czone(192.168.1.2, 192.168.1.3);"##,
        Expect::Err(r##"Syntax error at `192.168.1.3' expecting Integer for port range."##),
    ),
    (
        r##"ct_snat_in_czone(foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_snat_in_czone(foo, bar);"##,
        Expect::Err(r##"Syntax error at `foo' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_snat_in_czone();"##,
        Expect::Err(r##"Syntax error at `)' expecting IPv4 or IPv6 address."##),
    ),
    (
        r##"ct_snat_in_czone(192.168.1.2, foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_snat_in_czone(192.168.1.2, 1000-foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting Integer for port range."##),
    ),
    (
        r##"ct_snat_in_czone(192.168.1.2, 1000);"##,
        Expect::Ok(
            Some(r##"ct_snat_in_czone(192.168.1.2,1000);"##),
            Some(r##"ip"##),
        ),
    ),
    (
        r##"ct_snat_in_czone(192.168.1.2, 1000-100);"##,
        Expect::Err(r##"Syntax error at `100' range high should be greater than range low."##),
    ),
    (r##"ct_clear;"##, Expect::Ok(None, None)),
    (r##"ct_commit_nat;"##, Expect::Ok(None, Some(r##"ip"##))),
    (
        r##"clone { ip4.dst = 255.255.255.255; output; }; next;"##,
        Expect::Ok(None, Some(r##"eth.type == 0x800"##)),
    ),
    (
        r##"arp { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip4"##)),
    ),
    (
        r##"arp { };"##,
        Expect::Ok(Some(r##"arp { drop; };"##), Some(r##"ip4"##)),
    ),
    (
        r##"get_arp(outport, ip4.dst);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x800"##)),
    ),
    (r##"get_arp(inport, reg0);"##, Expect::Ok(None, None)),
    (
        r##"get_arp;"##,
        Expect::Err(r##"Syntax error at `;' expecting `('."##),
    ),
    (
        r##"get_arp();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"get_arp(inport);"##,
        Expect::Err(r##"Syntax error at `)' expecting `,'."##),
    ),
    (
        r##"get_arp(inport ip4.dst);"##,
        Expect::Err(r##"Syntax error at `ip4.dst' expecting `,'."##),
    ),
    (
        r##"get_arp(inport, ip4.dst;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"get_arp(inport, eth.dst);"##,
        Expect::Err(r##"Cannot use 48-bit field eth.dst[0..47] where 32-bit field is required."##),
    ),
    (
        r##"get_arp(inport, outport);"##,
        Expect::Err(r##"Cannot use string field outport where numeric field is required."##),
    ),
    (
        r##"get_arp(reg0, ip4.dst);"##,
        Expect::Err(r##"Cannot use numeric field reg0 where string field is required."##),
    ),
    (
        r##"put_arp(inport, arp.spa, arp.sha);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806 && eth.type == 0x806"##)),
    ),
    (
        r##"reg0[0] = lookup_arp(inport, ip4.dst, eth.src);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x800"##)),
    ),
    (
        r##"reg1[1] = lookup_arp(inport, arp.spa, arp.sha);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806 && eth.type == 0x806"##)),
    ),
    (
        r##"lookup_arp;"##,
        Expect::Err(r##"Syntax error at `lookup_arp' expecting action."##),
    ),
    (
        r##"reg0[0] = lookup_arp;"##,
        Expect::Err(r##"Syntax error at `lookup_arp' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_arp();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_arp(inport);"##,
        Expect::Err(r##"Syntax error at `)' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_arp(inport ip4.dst);"##,
        Expect::Err(r##"Syntax error at `ip4.dst' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_arp(inport, ip4.dst;"##,
        Expect::Err(r##"Syntax error at `;' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_arp(inport, ip4.dst, eth.src;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"reg0[0] = lookup_arp(inport, eth.dst);"##,
        Expect::Err(r##"Cannot use 48-bit field eth.dst[0..47] where 32-bit field is required."##),
    ),
    (
        r##"reg0[0] = lookup_arp(inport, ip4.src, ip4.dst);"##,
        Expect::Err(r##"Cannot use 32-bit field ip4.dst[0..31] where 48-bit field is required."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip(inport, ip4.dst);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x800"##)),
    ),
    (
        r##"reg1[1] = lookup_arp_ip(inport, arp.spa);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806"##)),
    ),
    (
        r##"lookup_arp_ip;"##,
        Expect::Err(r##"Syntax error at `lookup_arp_ip' expecting action."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip;"##,
        Expect::Err(r##"Syntax error at `lookup_arp_ip' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip(inport);"##,
        Expect::Err(r##"Syntax error at `)' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip(inport ip4.dst);"##,
        Expect::Err(r##"Syntax error at `ip4.dst' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip(inport, ip4.dst;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip(inport, ip4.dst, eth.src;"##,
        Expect::Err(r##"Syntax error at `,' expecting `)'."##),
    ),
    (
        r##"reg0[0] = lookup_arp_ip(inport, eth.dst);"##,
        Expect::Err(r##"Cannot use 48-bit field eth.dst[0..47] where 32-bit field is required."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(offerip = 1.2.3.4, router = 10.0.0.1);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",wpad="https://example.org",bootfile_name="https://127.0.0.1/boot.ipxe",path_prefix="/tftpboot", next_server=10.0.0.9);"##,
        Expect::Ok(
            Some(
                r##"reg2[5] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.254.0, mtu = 1400, domain_name = "ovn.org", wpad = "https://example.org", bootfile_name = "https://127.0.0.1/boot.ipxe", path_prefix = "/tftpboot", next_server = 10.0.0.9);"##,
            ),
            None,
        ),
    ),
    (
        r##"reg0[15] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.255.0,mtu=1400,ip_forward_enable=1,default_ttl=121,dns_server={8.8.8.8,7.7.7.7},classless_static_route={30.0.0.0/24,10.0.0.4,40.0.0.0/16,10.0.0.6,0.0.0.0/0,10.0.0.1},ethernet_encap=1,router_discovery=0,tftp_server_address={10.0.0.4,10.0.0.5},arp_cache_timeout=10,tcp_keepalive_interval=10);"##,
        Expect::Ok(
            Some(
                r##"reg0[15] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.255.0, mtu = 1400, ip_forward_enable = 1, default_ttl = 121, dns_server = {8.8.8.8, 7.7.7.7}, classless_static_route = {30.0.0.0/24, 10.0.0.4, 40.0.0.0/16, 10.0.0.6, 0.0.0.0/0, 10.0.0.1}, ethernet_encap = 1, router_discovery = 0, tftp_server_address = {10.0.0.4, 10.0.0.5}, arp_cache_timeout = 10, tcp_keepalive_interval = 10);"##,
            ),
            None,
        ),
    ),
    (
        r##"reg0[15] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.255.0,mtu=1400,ip_forward_enable=1,default_ttl=121,dns_server={8.8.8.8,7.7.7.7},classless_static_route={30.0.0.0/24,10.0.0.4,40.0.0.0/16,10.0.0.6,0.0.0.0/0,10.0.0.1},ethernet_encap=1,router_discovery=0,tftp_server=10.0.0.10,broadcast_address=255.255.255.255);"##,
        Expect::Ok(
            Some(
                r##"reg0[15] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.255.0, mtu = 1400, ip_forward_enable = 1, default_ttl = 121, dns_server = {8.8.8.8, 7.7.7.7}, classless_static_route = {30.0.0.0/24, 10.0.0.4, 40.0.0.0/16, 10.0.0.6, 0.0.0.0/0, 10.0.0.1}, ethernet_encap = 1, router_discovery = 0, tftp_server = 10.0.0.10, broadcast_address = 255.255.255.255);"##,
            ),
            None,
        ),
    ),
    (
        r##"reg0[15] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.255.0,mtu=1400,ip_forward_enable=1,default_ttl=121,dns_server={8.8.8.8,7.7.7.7},classless_static_route={30.0.0.0/24,10.0.0.4,40.0.0.0/16,10.0.0.6,0.0.0.0/0,10.0.0.1},ethernet_encap=1,router_discovery=0,tftp_server="tftp_server_test");"##,
        Expect::Ok(
            Some(
                r##"reg0[15] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.255.0, mtu = 1400, ip_forward_enable = 1, default_ttl = 121, dns_server = {8.8.8.8, 7.7.7.7}, classless_static_route = {30.0.0.0/24, 10.0.0.4, 40.0.0.0/16, 10.0.0.6, 0.0.0.0/0, 10.0.0.1}, ethernet_encap = 1, router_discovery = 0, tftp_server = "tftp_server_test");"##,
            ),
            None,
        ),
    ),
    (
        r##"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",wpad="https://example.org",bootfile_name="https://127.0.0.1/boot.ipxe",path_prefix="/tftpboot",domain_search_list="ovn.org,abc.ovn.org",netbios_name_server={10.0.0.7,10.0.0.8},netbios_node_type=2);"##,
        Expect::Ok(
            Some(
                r##"reg2[5] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.254.0, mtu = 1400, domain_name = "ovn.org", wpad = "https://example.org", bootfile_name = "https://127.0.0.1/boot.ipxe", path_prefix = "/tftpboot", domain_search_list = "ovn.org,abc.ovn.org", netbios_name_server = {10.0.0.7, 10.0.0.8}, netbios_node_type = 2);"##,
            ),
            None,
        ),
    ),
    (
        r##"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",wpad="https://example.org",bootfile_name="https://127.0.0.1/boot.ipxe",path_prefix="/tftpboot",domain_search_list="ovn.org,abc.ovn.org,def.ovn.org,ovn.test,def.ovn.test,test.org,abc.com");"##,
        Expect::Ok(
            Some(
                r##"reg2[5] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.254.0, mtu = 1400, domain_name = "ovn.org", wpad = "https://example.org", bootfile_name = "https://127.0.0.1/boot.ipxe", path_prefix = "/tftpboot", domain_search_list = "ovn.org,abc.ovn.org,def.ovn.org,ovn.test,def.ovn.test,test.org,abc.com");"##,
            ),
            None,
        ),
    ),
    (
        r##"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",hostname="ip-10-0-0-4");"##,
        Expect::Ok(
            Some(
                r##"reg2[5] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, netmask = 255.255.254.0, mtu = 1400, domain_name = "ovn.org", hostname = "ip-10-0-0-4");"##,
            ),
            None,
        ),
    ),
    (
        r##"reg1[0..1] = put_dhcp_opts(offerip = 1.2.3.4, router = 10.0.0.1);"##,
        Expect::Err(r##"Cannot use 2-bit field reg1[0..1] where 1-bit field is required."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts();"##,
        Expect::Err(r##"put_dhcp_opts requires offerip to be specified."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(x = 1.2.3.4, router = 10.0.0.1);"##,
        Expect::Err(r##"Syntax error at `x' expecting DHCPv4 option name."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(router = 10.0.0.1);"##,
        Expect::Err(r##"put_dhcp_opts requires offerip to be specified."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(offerip=1.2.3.4, "hi");"##,
        Expect::Err(r##"Syntax error at `"hi"'."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(offerip=1.2.3.4, xyzzy);"##,
        Expect::Err(r##"Syntax error at `xyzzy' expecting DHCPv4 option name."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(offerip="xyzzy");"##,
        Expect::Err(r##"DHCPv4 option offerip requires numeric value."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(offerip=1.2.3.4, domain_name=1.2.3.4);"##,
        Expect::Err(r##"DHCPv4 option domain_name requires string value."##),
    ),
    (
        r##"reg1[0] = put_dhcp_opts(offerip=1.2.3.4, domain_search_list=1.2.3.4);"##,
        Expect::Err(r##"DHCPv4 option domain_search_list requires string value."##),
    ),
    (
        r##"nd_ns { nd.target = xxreg0; output; };"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"nd_ns { };"##,
        Expect::Ok(Some(r##"nd_ns { drop; };"##), Some(r##"ip6"##)),
    ),
    (
        r##"nd_na { eth.src = 12:34:56:78:9a:bc; nd.tll = 12:34:56:78:9a:bc; outport = inport; inport = ""; /* Allow sending out inport. */ output; };"##,
        Expect::Ok(
            Some(
                r##"nd_na { eth.src = 12:34:56:78:9a:bc; nd.tll = 12:34:56:78:9a:bc; outport = inport; inport = ""; output; };"##,
            ),
            Some(r##"nd_ns"##),
        ),
    ),
    (
        r##"nd_na_router { eth.src = 12:34:56:78:9a:bc; nd.tll = 12:34:56:78:9a:bc; outport = inport; inport = ""; /* Allow sending out inport. */ output; };"##,
        Expect::Ok(
            Some(
                r##"nd_na_router { eth.src = 12:34:56:78:9a:bc; nd.tll = 12:34:56:78:9a:bc; outport = inport; inport = ""; output; };"##,
            ),
            Some(r##"nd_ns"##),
        ),
    ),
    (
        r##"get_nd(outport, ip6.dst);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x86dd"##)),
    ),
    (r##"get_nd(inport, xxreg0);"##, Expect::Ok(None, None)),
    (
        r##"get_nd;"##,
        Expect::Err(r##"Syntax error at `;' expecting `('."##),
    ),
    (
        r##"get_nd();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"get_nd(inport);"##,
        Expect::Err(r##"Syntax error at `)' expecting `,'."##),
    ),
    (
        r##"get_nd(inport ip6.dst);"##,
        Expect::Err(r##"Syntax error at `ip6.dst' expecting `,'."##),
    ),
    (
        r##"get_nd(inport, ip6.dst;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"get_nd(inport, eth.dst);"##,
        Expect::Err(r##"Cannot use 48-bit field eth.dst[0..47] where 128-bit field is required."##),
    ),
    (
        r##"get_nd(inport, outport);"##,
        Expect::Err(r##"Cannot use string field outport where numeric field is required."##),
    ),
    (
        r##"get_nd(xxreg0, ip6.dst);"##,
        Expect::Err(r##"Cannot use numeric field xxreg0 where string field is required."##),
    ),
    (
        r##"put_nd(inport, nd.target, nd.sll);"##,
        Expect::Ok(
            None,
            Some(
                r##"(icmp6.type == 0x87 || icmp6.type == 0x88) && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.code == 0 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && ip.ttl == 0xff && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.type == 0x87 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.code == 0 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && ip.ttl == 0xff && (eth.type == 0x800 || eth.type == 0x86dd)"##,
            ),
        ),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(ia_addr = ae70::4, server_id = 00:00:00:00:10:02);"##,
        Expect::Ok(None, None),
    ),
    (r##"reg1[0] = put_dhcpv6_opts();"##, Expect::Ok(None, None)),
    (
        r##"reg1[0] = put_dhcpv6_opts(dns_server={ae70::1,ae70::2});"##,
        Expect::Ok(
            Some(r##"reg1[0] = put_dhcpv6_opts(dns_server = {ae70::1, ae70::2});"##),
            None,
        ),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(server_id=12:34:56:78:9a:bc, dns_server={ae70::1,ae89::2});"##,
        Expect::Ok(
            Some(
                r##"reg1[0] = put_dhcpv6_opts(server_id = 12:34:56:78:9a:bc, dns_server = {ae70::1, ae89::2});"##,
            ),
            None,
        ),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(domain_search = "ovn.org");"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(x = 1.2.3.4);"##,
        Expect::Err(r##"Syntax error at `x' expecting DHCPv6 option name."##),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(ia_addr=ae70::4, "hi");"##,
        Expect::Err(r##"Syntax error at `"hi"'."##),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(ia_addr=ae70::4, xyzzy);"##,
        Expect::Err(r##"Syntax error at `xyzzy' expecting DHCPv6 option name."##),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(ia_addr="ae70::4");"##,
        Expect::Err(r##"DHCPv6 option ia_addr requires numeric value."##),
    ),
    (
        r##"reg1[0] = put_dhcpv6_opts(ia_addr=ae70::4, domain_search=ae70::1);"##,
        Expect::Err(r##"DHCPv6 option domain_search requires string value."##),
    ),
    (
        r##"reg2[0] = lookup_nd(inport, ip6.dst, eth.src);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x86dd"##)),
    ),
    (
        r##"reg3[0] = lookup_nd(inport, nd.target, nd.tll);"##,
        Expect::Ok(
            None,
            Some(
                r##"(icmp6.type == 0x87 || icmp6.type == 0x88) && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.code == 0 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && ip.ttl == 0xff && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.type == 0x88 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.code == 0 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && ip.ttl == 0xff && (eth.type == 0x800 || eth.type == 0x86dd)"##,
            ),
        ),
    ),
    (
        r##"lookup_nd;"##,
        Expect::Err(r##"Syntax error at `lookup_nd' expecting action."##),
    ),
    (
        r##"reg0[0] = lookup_nd;"##,
        Expect::Err(r##"Syntax error at `lookup_nd' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_nd();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport);"##,
        Expect::Err(r##"Syntax error at `)' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport ip6.dst);"##,
        Expect::Err(r##"Syntax error at `ip6.dst' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport, ip6.dst;"##,
        Expect::Err(r##"Syntax error at `;' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport, ip6.dst, eth.src;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport, eth.dst);"##,
        Expect::Err(r##"Cannot use 48-bit field eth.dst[0..47] where 128-bit field is required."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport, ip4.src, ip4.dst);"##,
        Expect::Err(r##"Cannot use 32-bit field ip4.src[0..31] where 128-bit field is required."##),
    ),
    (
        r##"reg0[0] = lookup_nd(inport, ip6.src, ip6.dst);"##,
        Expect::Err(
            r##"Cannot use 128-bit field ip6.dst[0..127] where 48-bit field is required."##,
        ),
    ),
    (
        r##"reg2[0] = lookup_nd_ip(inport, ip6.dst);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x86dd"##)),
    ),
    (
        r##"reg3[0] = lookup_nd_ip(inport, nd.target);"##,
        Expect::Ok(
            None,
            Some(
                r##"(icmp6.type == 0x87 || icmp6.type == 0x88) && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && icmp6.code == 0 && eth.type == 0x86dd && ip.proto == 0x3a && (eth.type == 0x800 || eth.type == 0x86dd) && ip.ttl == 0xff && (eth.type == 0x800 || eth.type == 0x86dd)"##,
            ),
        ),
    ),
    (
        r##"lookup_nd_ip;"##,
        Expect::Err(r##"Syntax error at `lookup_nd_ip' expecting action."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip;"##,
        Expect::Err(r##"Syntax error at `lookup_nd_ip' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip(inport);"##,
        Expect::Err(r##"Syntax error at `)' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip(inport ip6.dst);"##,
        Expect::Err(r##"Syntax error at `ip6.dst' expecting `,'."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip(inport, ip6.dst;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip(inport, eth.dst);"##,
        Expect::Err(r##"Cannot use 48-bit field eth.dst[0..47] where 128-bit field is required."##),
    ),
    (
        r##"reg0[0] = lookup_nd_ip(inport, ip4.src);"##,
        Expect::Err(r##"Cannot use 32-bit field ip4.src[0..31] where 128-bit field is required."##),
    ),
    (r##"set_queue(0);"##, Expect::Ok(None, None)),
    (r##"set_queue(61440);"##, Expect::Ok(None, None)),
    (
        r##"set_queue(65535);"##,
        Expect::Err(r##"Queue ID 65535 for set_queue is not in valid range 0 to 61440."##),
    ),
    (
        r##"reg1[0] = dns_lookup();"##,
        Expect::Ok(None, Some(r##"udp"##)),
    ),
    (
        r##"reg1[0] = dns_lookup("foo");"##,
        Expect::Err(r##"dns_lookup doesn't take any parameters"##),
    ),
    (
        r##"set_meter(0);"##,
        Expect::Err(r##"Rate 0 for set_meter is not in valid."##),
    ),
    (r##"set_meter(1);"##, Expect::Ok(None, None)),
    (r##"set_meter(100, 1000);"##, Expect::Ok(None, None)),
    (
        r##"set_meter(100, 1000, );"##,
        Expect::Err(r##"Syntax error at `,' expecting `)'."##),
    ),
    (
        r##"set_meter(4294967295, 4294967295);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"log(verdict=allow, severity=warning);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"log(name="test1", verdict=drop, severity=info);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"log(verdict=drop, severity=info, meter="meter1");"##,
        Expect::Ok(None, None),
    ),
    (
        r##"log(name="test1", verdict=drop, severity=info, meter="meter1");"##,
        Expect::Ok(None, None),
    ),
    (
        r##"log(verdict=drop);"##,
        Expect::Ok(Some(r##"log(verdict=drop, severity=info);"##), None),
    ),
    (
        r##"log(verdict=bad_verdict, severity=info);"##,
        Expect::Err(r##"Syntax error at `bad_verdict' unknown verdict."##),
    ),
    (
        r##"log(verdict=drop, severity=bad_severity);"##,
        Expect::Err(r##"Syntax error at `bad_severity' unknown severity."##),
    ),
    (
        r##"log(severity=notice);"##,
        Expect::Err(r##"Syntax error at `;' expecting verdict."##),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "slaac", mtu = 1500, router_preference = "HIGH", prefix = aef0::/64, slla = ae:01:02:03:04:05);"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "dhcpv6_stateful", router_preference = "MEDIUM", slla = ae:01:02:03:04:10, mtu = 1450);"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "dhcpv6_stateless", router_preference = "LOW", slla = ae:01:02:03:04:06, prefix = aef0::/64);"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "slaac", mtu = 1500, prefix = aef0::/64);"##,
        Expect::Err(r##"slla option not present"##),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "dhcpv6_stateful", mtu = 1450, prefix = aef0::/64, prefix = bef0::/64, slla = ae:01:02:03:04:10);"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "dhcpv6_stateful", mtu = 1450, prefix = aef0::/64, prefix = bef0::/64, slla = ae:01:02:03:04:10);"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "slaac", slla = ae:01:02:03:04:10);"##,
        Expect::Err(
            r##"prefix option needs to be set when address mode is slaac/dhcpv6_stateless."##,
        ),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "dhcpv6_stateless", slla = ae:01:02:03:04:10);"##,
        Expect::Err(
            r##"prefix option needs to be set when address mode is slaac/dhcpv6_stateless."##,
        ),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = dhcpv6_stateless, prefix = aef0::/64, slla = ae:01:02:03:04:10);"##,
        Expect::Err(r##"Syntax error at `dhcpv6_stateless' expecting constant."##),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "slaac", mtu = 1500, prefix = aef0::, slla = ae:01:02:03:04:10);"##,
        Expect::Err(r##"Invalid value for "prefix" option"##),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "foo", mtu = 1500, slla = ae:01:02:03:04:10);"##,
        Expect::Err(r##"Invalid value for "addr_mode" option"##),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "slaac", mtu = "1500", slla = ae:01:02:03:04:10);"##,
        Expect::Err(r##"IPv6 ND RA option mtu requires numeric value."##),
    ),
    (
        r##"reg1[0] = put_nd_ra_opts(addr_mode = "slaac", mtu = 10.0.0.4, slla = ae:01:02:03:04:10);"##,
        Expect::Err(r##"Invalid value for "mtu" option"##),
    ),
    (
        r##"icmp4 { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip4"##)),
    ),
    (
        r##"icmp4 { };"##,
        Expect::Ok(Some(r##"icmp4 { drop; };"##), Some(r##"ip4"##)),
    ),
    (
        r##"icmp4 { eth.dst = ff:ff:ff:ff:ff:ff; icmp4.frag_mtu = 1500; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip4"##)),
    ),
    (
        r##"icmp4_error { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip4"##)),
    ),
    (
        r##"icmp4_error { };"##,
        Expect::Ok(Some(r##"icmp4_error { drop; };"##), Some(r##"ip4"##)),
    ),
    (
        r##"icmp4_error { eth.dst = ff:ff:ff:ff:ff:ff; icmp4.frag_mtu = 1500; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip4"##)),
    ),
    (r##"icmp4.frag_mtu = 1500;"##, Expect::Ok(None, None)),
    (
        r##"icmp6 { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"icmp6 { };"##,
        Expect::Ok(Some(r##"icmp6 { drop; };"##), Some(r##"ip6"##)),
    ),
    (
        r##"icmp6_error { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (
        r##"icmp6_error { };"##,
        Expect::Ok(Some(r##"icmp6_error { drop; };"##), Some(r##"ip6"##)),
    ),
    (
        r##"icmp6_error { eth.dst = ff:ff:ff:ff:ff:ff; icmp6.frag_mtu = 1500; output; }; output;"##,
        Expect::Ok(None, Some(r##"ip6"##)),
    ),
    (r##"icmp6.frag_mtu = 1500;"##, Expect::Ok(None, None)),
    (
        r##"tcp_reset { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, Some(r##"tcp"##)),
    ),
    (
        r##"tcp_reset { };"##,
        Expect::Ok(Some(r##"tcp_reset { drop; };"##), Some(r##"tcp"##)),
    ),
    (
        r##"sctp_abort {eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(
            Some(r##"sctp_abort { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##),
            Some(r##"sctp"##),
        ),
    ),
    (
        r##"sctp_abort { };"##,
        Expect::Ok(Some(r##"sctp_abort { drop; };"##), Some(r##"sctp"##)),
    ),
    (
        r##"reject { eth.dst = ff:ff:ff:ff:ff:ff; output; }; output;"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reject { };"##,
        Expect::Ok(Some(r##"reject { drop; };"##), None),
    ),
    (
        r##"trigger_event(event = "empty_lb_backends", vip = "10.0.0.1:80", protocol = "tcp", load_balancer = "12345678-abcd-9876-fedc-11119f8e7d6c");"##,
        Expect::Ok(None, None),
    ),
    (
        r##"trigger_event(event = "empty_lb_backends", vip = "10.0.0.1:80", protocol = "aarp", load_balancer = "12345678-abcd-9876-fedc-11119f8e7d6c");"##,
        Expect::Err(r##"Load balancer protocol 'aarp' is not 'tcp', 'udp', or 'sctp'"##),
    ),
    (
        r##"trigger_event(event = "empty_lb_backends", vip = "10.0.0.1:80", protocol = "tcp", load_balancer = "bacon");"##,
        Expect::Err(r##"Load balancer 'bacon' is not a UUID"##),
    ),
    (r##"igmp;"##, Expect::Ok(None, None)),
    (
        r##"ip4.src = ip6.src[0..31];"##,
        Expect::Ok(None, Some(r##"eth.type == 0x800 && eth.type == 0x86dd"##)),
    ),
    (
        r##"ip4.src <-> ip6.src[0..31];"##,
        Expect::Ok(None, Some(r##"eth.type == 0x800 && eth.type == 0x86dd"##)),
    ),
    (
        r##"reg0[0] = check_pkt_larger(1500);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg0 = check_pkt_larger(1500);"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"reg0 = check_pkt_larger(foo);"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"reg0[0] = check_pkt_larger(foo);"##,
        Expect::Err(r##"Syntax error at `foo' expecting `;'."##),
    ),
    (r##"bind_vport("lsp1", inport);"##, Expect::Ok(None, None)),
    (r##"bind_vport("lsp2", inport);"##, Expect::Ok(None, None)),
    (
        r##"bind_vport;"##,
        Expect::Err(r##"Syntax error at `;' expecting `('."##),
    ),
    (
        r##"bind_vport(;"##,
        Expect::Err(r##"Syntax error at `;' expecting port name string."##),
    ),
    (
        r##"bind_vport("xyzzy";"##,
        Expect::Err(r##"Syntax error at `;' expecting `,'."##),
    ),
    (
        r##"bind_vport("xyzzy",;"##,
        Expect::Err(r##"Syntax error at `;' expecting field name."##),
    ),
    (
        r##"bind_vport("xyzzy", inport;"##,
        Expect::Err(r##"Syntax error at `;' expecting `)'."##),
    ),
    (r##"handle_svc_check(inport);"##, Expect::Ok(None, None)),
    (r##"handle_svc_check(outport);"##, Expect::Ok(None, None)),
    (
        r##"handle_svc_check();"##,
        Expect::Err(r##"Syntax error at `)' expecting field name."##),
    ),
    (
        r##"handle_svc_check(reg0);"##,
        Expect::Err(r##"Cannot use numeric field reg0 where string field is required."##),
    ),
    (
        r##"reg9[16..31] = select(1=50, 2=100, 3, );"##,
        Expect::Ok(
            Some(r##"reg9[16..31] = select(1=50, 2=100, 3=100);"##),
            None,
        ),
    ),
    (
        r##"reg0 = select(1, 2);"##,
        Expect::Ok(Some(r##"reg0 = select(1=100, 2=100);"##), None),
    ),
    (
        r##"reg0 = select(1=, 2);"##,
        Expect::Err(r##"Syntax error at `,' expecting weight."##),
    ),
    (
        r##"reg0 = select(1=0, 2);"##,
        Expect::Err(r##"Syntax error at `,' weight can't be 0."##),
    ),
    (
        r##"reg0 = select(1=123456, 2);"##,
        Expect::Err(r##"Syntax error at `123456' expecting weight."##),
    ),
    (
        r##"reg0 = select(123);"##,
        Expect::Err(r##"Syntax error at `;' expecting at least 2 group members."##),
    ),
    (
        r##"ip.proto = select(1, 2, 3);"##,
        Expect::Err(r##"Field ip.proto is not modifiable."##),
    ),
    (
        r##"reg0[0..14] = select(1, 2, 3);"##,
        Expect::Err(
            r##"cannot use 15-bit field reg0[0..14] for "select", which requires at least 16 bits."##,
        ),
    ),
    (
        r##"fwd_group(liveness=true, childports="eth0", "lsp1");"##,
        Expect::Ok(
            Some(r##"fwd_group(liveness="true", childports="eth0", "lsp1");"##),
            None,
        ),
    ),
    (
        r##"fwd_group(childports="eth0", "lsp1");"##,
        Expect::Ok(None, None),
    ),
    (
        r##"fwd_group(childports=eth0);"##,
        Expect::Err(r##"Syntax error at `eth0' expecting logical switch port."##),
    ),
    (
        r##"fwd_group();"##,
        Expect::Err(r##"Syntax error at `)' expecting `;'."##),
    ),
    (
        r##"fwd_group(childports="eth0", "lsp1");"##,
        Expect::Ok(None, None),
    ),
    (
        r##"fwd_group(liveness=xyzzy, childports="eth0", "lsp1");"##,
        Expect::Err(r##"Syntax error at `xyzzy' expecting true or false."##),
    ),
    (
        r##"fwd_group(liveness=false childports="eth0", "lsp1");"##,
        Expect::Err(r##"Syntax error at `childports' expecting `,'."##),
    ),
    (r##"handle_dhcpv6_reply;"##, Expect::Ok(None, None)),
    (r##"reg0[0] = chk_lb_hairpin();"##, Expect::Ok(None, None)),
    (r##"reg2[2] = chk_lb_hairpin();"##, Expect::Ok(None, None)),
    (
        r##"reg0 = chk_lb_hairpin();"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"reg0[0] = chk_lb_hairpin(foo);"##,
        Expect::Err(r##"chk_lb_hairpin doesn't take any parameters"##),
    ),
    (
        r##"chk_lb_hairpin;"##,
        Expect::Err(r##"Syntax error at `chk_lb_hairpin' expecting action."##),
    ),
    (
        r##"reg0[0] = chk_lb_hairpin_reply();"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg2[2..3] = chk_lb_hairpin_reply();"##,
        Expect::Err(r##"Cannot use 2-bit field reg2[2..3] where 1-bit field is required."##),
    ),
    (
        r##"reg0 = chk_lb_hairpin_reply();"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"reg0[0] = chk_lb_hairpin_reply(foo);"##,
        Expect::Err(r##"chk_lb_hairpin_reply doesn't take any parameters"##),
    ),
    (
        r##"chk_lb_hairpin_reply;"##,
        Expect::Err(r##"Syntax error at `chk_lb_hairpin_reply' expecting action."##),
    ),
    (r##"ct_snat_to_vip;"##, Expect::Ok(None, None)),
    (
        r##"ct_snat_to_vip(foo);"##,
        Expect::Err(r##"Syntax error at `(' expecting `;'."##),
    ),
    (r##"handle_bfd_msg();"##, Expect::Ok(None, None)),
    (
        r##"put_fdb(inport, arp.sha);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806"##)),
    ),
    (r##"put_fdb(inport, eth.src);"##, Expect::Ok(None, None)),
    (
        r##"put_fdb(inport, ip4.src);"##,
        Expect::Err(r##"Cannot use 32-bit field ip4.src[0..31] where 48-bit field is required."##),
    ),
    (r##"outport = get_fdb(eth.dst);"##, Expect::Ok(None, None)),
    (r##"outport = get_fdb(eth.src);"##, Expect::Ok(None, None)),
    (
        r##"inport = get_fdb(arp.sha);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806"##)),
    ),
    (
        r##"reg0 = get_fdb(arp.tha);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806"##)),
    ),
    (
        r##"reg0[1..3] = get_fdb(eth.src);"##,
        Expect::Err(r##"Cannot use 3-bit field reg0[1..3] where 32-bit field is required."##),
    ),
    (
        r##"reg15 = get_fdb(eth.dst);"##,
        Expect::Err(r##"Syntax error at `reg15' expecting field name."##),
    ),
    (
        r##"outport = get_fdb(ip4.dst);"##,
        Expect::Err(r##"Cannot use 32-bit field ip4.dst[0..31] where 48-bit field is required."##),
    ),
    (
        r##"reg0[0] = lookup_fdb(inport, eth.src);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg1[4] = lookup_fdb(outport, eth.dst);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg0[0] = lookup_fdb(outport, arp.sha);"##,
        Expect::Ok(None, Some(r##"eth.type == 0x806"##)),
    ),
    (
        r##"reg0 = lookup_fdb(outport, arp.sha);"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"outport = lookup_fdb(outport, arp.sha);"##,
        Expect::Err(r##"Cannot use string field outport where numeric field is required."##),
    ),
    (
        r##"reg1[1] = lookup_fdb(outport, ip4.src);"##,
        Expect::Err(r##"Cannot use 32-bit field ip4.src[0..31] where 48-bit field is required."##),
    ),
    (
        r##"reg1[1] = lookup_fdb(ip4.src, eth.src);"##,
        Expect::Err(r##"Cannot use numeric field ip4.src where string field is required."##),
    ),
    (
        r##"reg0[0] = check_in_port_sec();"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg2[2] = check_in_port_sec();"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg0 = check_in_port_sec();"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"reg0[0] = check_in_port_sec(foo);"##,
        Expect::Err(r##"check_in_port_sec doesn't take any parameters"##),
    ),
    (
        r##"check_in_port_sec;"##,
        Expect::Err(r##"Syntax error at `check_in_port_sec' expecting action."##),
    ),
    (
        r##"reg0[0] = check_out_port_sec();"##,
        Expect::Ok(None, None),
    ),
    (
        r##"reg2[2..3] = check_out_port_sec();"##,
        Expect::Err(r##"Cannot use 2-bit field reg2[2..3] where 1-bit field is required."##),
    ),
    (
        r##"reg0 = check_out_port_sec();"##,
        Expect::Err(r##"Cannot use 32-bit field reg0[0..31] where 1-bit field is required."##),
    ),
    (
        r##"reg0[0] = check_out_port_sec(foo);"##,
        Expect::Err(r##"check_out_port_sec doesn't take any parameters"##),
    ),
    (
        r##"check_out_port_sec;"##,
        Expect::Err(r##"Syntax error at `check_out_port_sec' expecting action."##),
    ),
    (
        r##"commit_ecmp_nh(ipv6 = "false", proto = tcp);"##,
        Expect::Ok(
            Some(r##"commit_ecmp_nh(ipv6 = false, proto = tcp);"##),
            None,
        ),
    ),
    (
        r##"commit_ecmp_nh(ipv6 = "true", proto = udp);"##,
        Expect::Ok(Some(r##"commit_ecmp_nh(ipv6 = true, proto = udp);"##), None),
    ),
    (
        r##"commit_ecmp_nh(proto = sctp);"##,
        Expect::Err(r##"Syntax error at `proto' invalid parameter."##),
    ),
    (r##"reg9[5] = chk_ecmp_nh_mac();"##, Expect::Ok(None, None)),
    (r##"reg9[5] = chk_ecmp_nh();"##, Expect::Ok(None, None)),
    (
        r##"commit_lb_aff(vip = "172.16.0.123:8080", backend = "10.0.0.3:8080", proto = tcp, timeout = 30);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"commit_lb_aff(vip = "172.16.0.123", backend = "10.0.0.3", timeout = 30);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"commit_lb_aff(vip = "[::1]:8080", backend = "[::2]:8080", proto = tcp, timeout = 30);"##,
        Expect::Ok(None, None),
    ),
    (r##"reg9[6] = chk_lb_aff();"##, Expect::Ok(None, None)),
    (
        r##"push(xxreg0);push(xxreg1[10..20]);push(eth.src);pop(xxreg0[0..47]);pop(xxreg0[48..57]);pop(xxreg1);"##,
        Expect::Ok(
            Some(
                r##"push(xxreg0); push(xxreg1[10..20]); push(eth.src); pop(xxreg0[0..47]); pop(xxreg0[48..57]); pop(xxreg1);"##,
            ),
            None,
        ),
    ),
    (
        r##"pop(eth.type);"##,
        Expect::Err(r##"Field eth.type is not modifiable."##),
    ),
    (
        r##"push(abc);"##,
        Expect::Err(r##"Syntax error at `abc' expecting field name."##),
    ),
    (
        r##"sample(probability=100,collector_set=200,obs_domain=0,obs_point=1000);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"sample(probability=100,collector_set=200,obs_domain=10,obs_point=$cookie);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"sample(probability=10);"##,
        Expect::Ok(
            Some(r##"sample(probability=10,collector_set=0,obs_domain=0,obs_point=0);"##),
            None,
        ),
    ),
    (
        r##"sample(probability=10);"##,
        Expect::Ok(
            Some(r##"sample(probability=10,collector_set=0,obs_domain=0,obs_point=0);"##),
            None,
        ),
    ),
    (
        r##"sample(probability=100,collector_set=999,obs_domain=0,obs_point=1000);"##,
        Expect::Ok(None, None),
    ),
    (
        r##"sample(probability=0,collector_set=200,obs_domain=0,obs_point=1000);"##,
        Expect::Err(r##"probability must be greater than zero"##),
    ),
    (
        r##"sample(probability=0,collector_set=200,obs_domain=0,obs_point=foo);"##,
        Expect::Err(r##"Syntax error at `foo' malformed sample observation_point_id."##),
    ),
    (
        r##"sample(probability=0,collector_set=200,obs_domain=300,obs_point=foo);"##,
        Expect::Err(r##"Syntax error at `300' obs_domain must be 8-bit long."##),
    ),
    (
        r##"sample(probability=10,foo=bar,obs_domain=0,obs_point=1000);"##,
        Expect::Err(r##"Syntax error at `foo' unknown argument."##),
    ),
    (r##";"##, Expect::Err(r##"Syntax error at `;'."##)),
    (
        r##"xyzzy;"##,
        Expect::Err(r##"Syntax error at `xyzzy' expecting action."##),
    ),
    (
        r##"next; 123;"##,
        Expect::Err(r##"Syntax error at `123'."##),
    ),
    (
        r##"next; xyzzy;"##,
        Expect::Err(r##"Syntax error at `xyzzy' expecting action."##),
    ),
    (
        r##"next"##,
        Expect::Err(r##"Syntax error at end of input expecting `;'."##),
    ),
];

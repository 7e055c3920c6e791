//! Test cases of OVN 23.03's own test suite (`tests/ovn.at`), extracted
//! verbatim (m4 quoting undone): input and expected output, which is the
//! input itself where ovn.at gives no `=>`.
#![allow(dead_code)]

/// "lexer": `ovstest test-ovn lex`.
pub const LEXER: &[(&str, &str)] = &[
    (
        r##"foo bar baz quuxquuxquux _abcd_ a.b.c.d a123_.456"##,
        r##"foo bar baz quuxquuxquux _abcd_ a.b.c.d a123_.456"##,
    ),
    (r##""abc\u0020def""##, r##""abc def""##),
    (r##"""##, r##"error("Input ends inside quoted string.")"##),
    (
        r##"$foo $bar $baz $quuxquuxquux $_abcd_ $a.b.c.d $a123_.456"##,
        r##"$foo $bar $baz $quuxquuxquux $_abcd_ $a.b.c.d $a123_.456"##,
    ),
    (
        r##"$1"##,
        r##"error("`$' must be followed by a valid identifier.") 1"##,
    ),
    (r##"a/*b*/c"##, r##"a c"##),
    (r##"a//b c"##, r##"a"##),
    (r##"a/**/b"##, r##"a b"##),
    (r##"a/*/b"##, r##"a error("`/*' without matching `*/'.")"##),
    (r##"a/*/**/b"##, r##"a b"##),
    (
        r##"a/b"##,
        r##"a error("`/' is only valid as part of `//' or `/*'.") b"##,
    ),
    (
        r##"0 1 12345 18446744073709551615"##,
        r##"0 1 12345 18446744073709551615"##,
    ),
    (
        r##"18446744073709551616"##,
        r##"error("Decimal constants must be less than 2**64.")"##,
    ),
    (
        r##"9999999999999999999999"##,
        r##"error("Decimal constants must be less than 2**64.")"##,
    ),
    (
        r##"01"##,
        r##"error("Decimal constants must not have leading zeros.")"##,
    ),
    (r##"0/0"##, r##"0/0"##),
    (r##"0/1"##, r##"0/1"##),
    (r##"1/0"##, r##"0/0"##),
    (r##"1/1"##, r##"1/1"##),
    (r##"128/384"##, r##"128/384"##),
    (r##"1/3"##, r##"1/3"##),
    (r##"1/"##, r##"error("Integer constant expected.")"##),
    (
        r##"1/0x123"##,
        r##"error("Value and mask have incompatible formats.")"##,
    ),
    (r##"0x1234"##, r##"0x1234"##),
    (r##"0x01234"##, r##"0x1234"##),
    (r##"0x0"##, r##"0"##),
    (r##"0x000"##, r##"0"##),
    (r##"0xfedcba9876543210"##, r##"0xfedcba9876543210"##),
    (r##"0XFEDCBA9876543210"##, r##"0xfedcba9876543210"##),
    (
        r##"0xfedcba9876543210fedcba9876543210"##,
        r##"0xfedcba9876543210fedcba9876543210"##,
    ),
    (
        r##"0x0000fedcba9876543210fedcba9876543210"##,
        r##"0xfedcba9876543210fedcba9876543210"##,
    ),
    (r##"0x"##, r##"error("Hex digits expected following 0x.")"##),
    (r##"0X"##, r##"error("Hex digits expected following 0X.")"##),
    (r##"0x0/0x0"##, r##"0/0"##),
    (r##"0x0/0x1"##, r##"0/0x1"##),
    (r##"0x1/0x0"##, r##"0/0"##),
    (r##"0xffff/0x1ffff"##, r##"0xffff/0x1ffff"##),
    (
        r##"0x."##,
        r##"error("Invalid syntax in hexadecimal constant.")"##,
    ),
    (
        r##"192.168.128.1 1.2.3.4 255.255.255.255 0.0.0.0"##,
        r##"192.168.128.1 1.2.3.4 255.255.255.255 0.0.0.0"##,
    ),
    (r##"256.1.2.3"##, r##"error("Invalid numeric constant.")"##),
    (r##"192.168.0.0/16"##, r##"192.168.0.0/16"##),
    (r##"192.168.0.0/255.255.0.0"##, r##"192.168.0.0/16"##),
    (r##"192.168.0.0/255.255.255.0"##, r##"192.168.0.0/24"##),
    (
        r##"192.168.0.0/255.255.0.255"##,
        r##"192.168.0.0/255.255.0.255"##,
    ),
    (r##"192.168.0.0/255.0.0.0"##, r##"192.0.0.0/8"##),
    (r##"192.168.0.0/32"##, r##"192.168.0.0/32"##),
    (r##"192.168.0.0/255.255.255.255"##, r##"192.168.0.0/32"##),
    (r##"192.168.0.2/32"##, r##"192.168.0.2/32"##),
    (r##"192.168.0.2/30"##, r##"192.168.0.0/30"##),
    (r##"192.168.0.2/24"##, r##"192.168.0.0/24"##),
    (r##"1.2.3.4:5"##, r##"1.2.3.4 : 5"##),
    (r##"::"##, r##"::"##),
    (r##"::1"##, r##"::1"##),
    (r##"ff00::1234"##, r##"ff00::1234"##),
    (
        r##"2001:db8:85a3::8a2e:370:7334"##,
        r##"2001:db8:85a3::8a2e:370:7334"##,
    ),
    (
        r##"2001:db8:85a3:0:0:8a2e:370:7334"##,
        r##"2001:db8:85a3::8a2e:370:7334"##,
    ),
    (
        r##"2001:0db8:85a3:0000:0000:8a2e:0370:7334"##,
        r##"2001:db8:85a3::8a2e:370:7334"##,
    ),
    (r##"::ffff:192.0.2.128"##, r##"::ffff:192.0.2.128"##),
    (r##"::ffff:c000:0280"##, r##"::ffff:192.0.2.128"##),
    (r##"::1/::1"##, r##"::1/::1"##),
    (
        r##"::1/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"##,
        r##"::1/128"##,
    ),
    (r##"::1/128"##, r##"::1/128"##),
    (r##"ff00::/8"##, r##"ff00::/8"##),
    (r##"ff00::/ff00::"##, r##"ff00::/8"##),
    (r##"01:23:45:67:ab:cd"##, r##"01:23:45:67:ab:cd"##),
    (r##"01:23:45:67:AB:CD"##, r##"01:23:45:67:ab:cd"##),
    (r##"fe:dc:ba:98:76:54"##, r##"fe:dc:ba:98:76:54"##),
    (r##"FE:DC:ba:98:76:54"##, r##"fe:dc:ba:98:76:54"##),
    (
        r##"01:00:00:00:00:00/01:00:00:00:00:00"##,
        r##"01:00:00:00:00:00/01:00:00:00:00:00"##,
    ),
    (
        r##"ff:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff"##,
        r##"ff:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff"##,
    ),
    (
        r##"fe:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff"##,
        r##"fe:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff"##,
    ),
    (
        r##"ff:ff:ff:ff:ff:ff/fe:ff:ff:ff:ff:ff"##,
        r##"fe:ff:ff:ff:ff:ff/fe:ff:ff:ff:ff:ff"##,
    ),
    (r##"fe:x"##, r##"error("Invalid numeric constant.")"##),
    (
        r##"00:01:02:03:04:x"##,
        r##"error("Invalid numeric constant.")"##,
    ),
    (
        r##"(){}[]==!=<<=>>=!&&||..,;=<->--:"##,
        r##"( ) { } [ ] == != < <= > >= ! && || .. , ; = <-> -- :"##,
    ),
    (r##"&"##, r##"error("`&' is only valid as part of `&&'.")"##),
    (r##"|"##, r##"error("`|' is only valid as part of `||'.")"##),
    (
        r##"^"##,
        r##"error("`^' must be followed by a valid identifier.")"##,
    ),
];

/// "expression parser": `ovstest test-ovn parse-expr`.
pub const PARSE_EXPR: &[(&str, &str)] = &[
    (r##"eth.type == 0x800"##, r##"eth.type == 0x800"##),
    (r##"eth.type==0x800"##, r##"eth.type == 0x800"##),
    (r##"eth.type[0..15] == 0x800"##, r##"eth.type == 0x800"##),
    (r##"vlan.present"##, r##"vlan.present"##),
    (r##"vlan.present == 1"##, r##"vlan.present"##),
    (r##"!(vlan.present == 0)"##, r##"vlan.present"##),
    (r##"!(vlan.present != 1)"##, r##"vlan.present"##),
    (r##"!vlan.present"##, r##"!vlan.present"##),
    (r##"vlan.present == 0"##, r##"!vlan.present"##),
    (r##"vlan.present != 1"##, r##"!vlan.present"##),
    (r##"!(vlan.present == 1)"##, r##"!vlan.present"##),
    (r##"!(vlan.present != 0)"##, r##"!vlan.present"##),
    (r##"eth.dst[0]"##, r##"eth.dst[0]"##),
    (r##"eth.dst[0] == 1"##, r##"eth.dst[0]"##),
    (r##"eth.dst[0] != 0"##, r##"eth.dst[0]"##),
    (r##"!(eth.dst[0] == 0)"##, r##"eth.dst[0]"##),
    (r##"!(eth.dst[0] != 1)"##, r##"eth.dst[0]"##),
    (r##"!eth.dst[0]"##, r##"!eth.dst[0]"##),
    (r##"eth.dst[0] == 0"##, r##"!eth.dst[0]"##),
    (r##"eth.dst[0] != 1"##, r##"!eth.dst[0]"##),
    (r##"!(eth.dst[0] == 1)"##, r##"!eth.dst[0]"##),
    (r##"!(eth.dst[0] != 0)"##, r##"!eth.dst[0]"##),
    (
        r##"vlan.tci[12..15] == 0x3"##,
        r##"vlan.tci[12..15] == 0x3"##,
    ),
    (
        r##"vlan.tci == 0x3000/0xf000"##,
        r##"vlan.tci[12..15] == 0x3"##,
    ),
    (
        r##"vlan.tci[12..15] != 0x3"##,
        r##"vlan.tci[12..15] != 0x3"##,
    ),
    (
        r##"vlan.tci != 0x3000/0xf000"##,
        r##"vlan.tci[12..15] != 0x3"##,
    ),
    (r##"!vlan.pcp"##, r##"vlan.pcp == 0"##),
    (r##"!(vlan.pcp)"##, r##"vlan.pcp == 0"##),
    (r##"vlan.pcp == 0x4"##, r##"vlan.pcp == 0x4"##),
    (r##"vlan.pcp != 0x4"##, r##"vlan.pcp != 0x4"##),
    (r##"vlan.pcp > 0x4"##, r##"vlan.pcp > 0x4"##),
    (r##"vlan.pcp >= 0x4"##, r##"vlan.pcp >= 0x4"##),
    (r##"vlan.pcp < 0x4"##, r##"vlan.pcp < 0x4"##),
    (r##"vlan.pcp <= 0x4"##, r##"vlan.pcp <= 0x4"##),
    (r##"!(vlan.pcp != 0x4)"##, r##"vlan.pcp == 0x4"##),
    (r##"!(vlan.pcp == 0x4)"##, r##"vlan.pcp != 0x4"##),
    (r##"!(vlan.pcp <= 0x4)"##, r##"vlan.pcp > 0x4"##),
    (r##"!(vlan.pcp < 0x4)"##, r##"vlan.pcp >= 0x4"##),
    (r##"!(vlan.pcp >= 0x4)"##, r##"vlan.pcp < 0x4"##),
    (r##"!(vlan.pcp > 0x4)"##, r##"vlan.pcp <= 0x4"##),
    (r##"0x4 == vlan.pcp"##, r##"vlan.pcp == 0x4"##),
    (r##"0x4 != vlan.pcp"##, r##"vlan.pcp != 0x4"##),
    (r##"0x4 < vlan.pcp"##, r##"vlan.pcp > 0x4"##),
    (r##"0x4 <= vlan.pcp"##, r##"vlan.pcp >= 0x4"##),
    (r##"0x4 > vlan.pcp"##, r##"vlan.pcp < 0x4"##),
    (r##"0x4 >= vlan.pcp"##, r##"vlan.pcp <= 0x4"##),
    (r##"!(0x4 != vlan.pcp)"##, r##"vlan.pcp == 0x4"##),
    (r##"!(0x4 == vlan.pcp)"##, r##"vlan.pcp != 0x4"##),
    (r##"!(0x4 >= vlan.pcp)"##, r##"vlan.pcp > 0x4"##),
    (r##"!(0x4 > vlan.pcp)"##, r##"vlan.pcp >= 0x4"##),
    (r##"!(0x4 <= vlan.pcp)"##, r##"vlan.pcp < 0x4"##),
    (r##"!(0x4 < vlan.pcp)"##, r##"vlan.pcp <= 0x4"##),
    (
        r##"1 < vlan.pcp < 4"##,
        r##"vlan.pcp > 0x1 && vlan.pcp < 0x4"##,
    ),
    (
        r##"1 <= vlan.pcp <= 4"##,
        r##"vlan.pcp >= 0x1 && vlan.pcp <= 0x4"##,
    ),
    (
        r##"1 < vlan.pcp <= 4"##,
        r##"vlan.pcp > 0x1 && vlan.pcp <= 0x4"##,
    ),
    (
        r##"1 <= vlan.pcp < 4"##,
        r##"vlan.pcp >= 0x1 && vlan.pcp < 0x4"##,
    ),
    (
        r##"1 <= vlan.pcp <= 4"##,
        r##"vlan.pcp >= 0x1 && vlan.pcp <= 0x4"##,
    ),
    (
        r##"4 > vlan.pcp > 1"##,
        r##"vlan.pcp < 0x4 && vlan.pcp > 0x1"##,
    ),
    (
        r##"4 >= vlan.pcp > 1"##,
        r##"vlan.pcp <= 0x4 && vlan.pcp > 0x1"##,
    ),
    (
        r##"4 > vlan.pcp >= 1"##,
        r##"vlan.pcp < 0x4 && vlan.pcp >= 0x1"##,
    ),
    (
        r##"4 >= vlan.pcp >= 1"##,
        r##"vlan.pcp <= 0x4 && vlan.pcp >= 0x1"##,
    ),
    (
        r##"!(1 < vlan.pcp < 4)"##,
        r##"vlan.pcp <= 0x1 || vlan.pcp >= 0x4"##,
    ),
    (
        r##"!(1 <= vlan.pcp <= 4)"##,
        r##"vlan.pcp < 0x1 || vlan.pcp > 0x4"##,
    ),
    (
        r##"!(1 < vlan.pcp <= 4)"##,
        r##"vlan.pcp <= 0x1 || vlan.pcp > 0x4"##,
    ),
    (
        r##"!(1 <= vlan.pcp < 4)"##,
        r##"vlan.pcp < 0x1 || vlan.pcp >= 0x4"##,
    ),
    (
        r##"!(1 <= vlan.pcp <= 4)"##,
        r##"vlan.pcp < 0x1 || vlan.pcp > 0x4"##,
    ),
    (
        r##"!(4 > vlan.pcp > 1)"##,
        r##"vlan.pcp >= 0x4 || vlan.pcp <= 0x1"##,
    ),
    (
        r##"!(4 >= vlan.pcp > 1)"##,
        r##"vlan.pcp > 0x4 || vlan.pcp <= 0x1"##,
    ),
    (
        r##"!(4 > vlan.pcp >= 1)"##,
        r##"vlan.pcp >= 0x4 || vlan.pcp < 0x1"##,
    ),
    (
        r##"!(4 >= vlan.pcp >= 1)"##,
        r##"vlan.pcp > 0x4 || vlan.pcp < 0x1"##,
    ),
    (
        r##"vlan.pcp == {1, 2, 3, 4}"##,
        r##"vlan.pcp == 0x1 || vlan.pcp == 0x2 || vlan.pcp == 0x3 || vlan.pcp == 0x4"##,
    ),
    (
        r##"vlan.pcp == 1 || ((vlan.pcp == 2 || vlan.pcp == 3) || vlan.pcp == 4)"##,
        r##"vlan.pcp == 0x1 || vlan.pcp == 0x2 || vlan.pcp == 0x3 || vlan.pcp == 0x4"##,
    ),
    (
        r##"vlan.pcp != {1, 2, 3, 4}"##,
        r##"vlan.pcp != 0x1 && vlan.pcp != 0x2 && vlan.pcp != 0x3 && vlan.pcp != 0x4"##,
    ),
    (
        r##"vlan.pcp == 1 && ((vlan.pcp == 2 && vlan.pcp == 3) && vlan.pcp == 4)"##,
        r##"vlan.pcp == 0x1 && vlan.pcp == 0x2 && vlan.pcp == 0x3 && vlan.pcp == 0x4"##,
    ),
    (
        r##"vlan.pcp == 1 && !((vlan.pcp == 2 && vlan.pcp == 3) && vlan.pcp == 4)"##,
        r##"vlan.pcp == 0x1 && (vlan.pcp != 0x2 || vlan.pcp != 0x3 || vlan.pcp != 0x4)"##,
    ),
    (
        r##"vlan.pcp == 1 && (!(vlan.pcp == 2 && vlan.pcp == 3) && vlan.pcp == 4)"##,
        r##"vlan.pcp == 0x1 && (vlan.pcp != 0x2 || vlan.pcp != 0x3) && vlan.pcp == 0x4"##,
    ),
    (
        r##"vlan.pcp == 1 && !(!(vlan.pcp == 2 && vlan.pcp == 3) && vlan.pcp == 4)"##,
        r##"vlan.pcp == 0x1 && ((vlan.pcp == 0x2 && vlan.pcp == 0x3) || vlan.pcp != 0x4)"##,
    ),
    (
        r##"ip4.src == {10.0.0.0/8, 192.168.0.0/16, 172.16.20.0/24, 8.8.8.8}"##,
        r##"ip4.src[24..31] == 0xa || ip4.src[16..31] == 0xc0a8 || ip4.src[8..31] == 0xac1014 || ip4.src == 0x8080808"##,
    ),
    (r##"ip6.src == ::1"##, r##"ip6.src == 0x1"##),
    (r##"ip4.src == 1.2.3.4"##, r##"ip4.src == 0x1020304"##),
    (
        r##"ip4.src == ::1.2.3.4/::ffff:ffff"##,
        r##"ip4.src == 0x1020304"##,
    ),
    (r##"ip6.src == ::1"##, r##"ip6.src == 0x1"##),
    (r##"1"##, r##"1"##),
    (r##"0"##, r##"0"##),
    (r##"!1"##, r##"0"##),
    (r##"!0"##, r##"1"##),
    (r##"inport == "eth0""##, r##"inport == "eth0""##),
    (r##"!(inport != "eth0")"##, r##"inport == "eth0""##),
    (
        r##"(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((0)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))"##,
        r##"0"##,
    ),
    (
        r##"ip4.src == "eth0""##,
        r##"Integer field ip4.src is not compatible with string constant."##,
    ),
    (
        r##"inport == 1"##,
        r##"String field inport is not compatible with integer constant."##,
    ),
    (
        r##"ip4.src = 1.2.3.4"##,
        r##"Syntax error at `=' expecting relational operator."##,
    ),
    (
        r##"ip4.src > {1, 2, 3}"##,
        r##"Only == and != operators may be used with value sets."##,
    ),
    (
        r##"eth.type > 0x800"##,
        r##"Only == and != operators may be used with nominal field eth.type."##,
    ),
    (
        r##"vlan.present > 0"##,
        r##"Only == and != operators may be used with Boolean field vlan.present."##,
    ),
    (
        r##"inport != "eth0""##,
        r##"Nominal field inport may only be tested for equality (taking enclosing `!' operators into account)."##,
    ),
    (
        r##"!(inport == "eth0")"##,
        r##"Nominal field inport may only be tested for equality (taking enclosing `!' operators into account)."##,
    ),
    (
        r##"eth.type != 0x800"##,
        r##"Nominal field eth.type may only be tested for equality (taking enclosing `!' operators into account)."##,
    ),
    (
        r##"!(eth.type == 0x800)"##,
        r##"Nominal field eth.type may only be tested for equality (taking enclosing `!' operators into account)."##,
    ),
    (
        r##"inport = "eth0""##,
        r##"Syntax error at `=' expecting relational operator."##,
    ),
    (
        r##"123 == 123"##,
        r##"Syntax error at `123' expecting field name."##,
    ),
    (
        r##"$name"##,
        r##"Syntax error at `$name' expecting address set name."##,
    ),
    (
        r##"@name"##,
        r##"Syntax error at `@name' expecting port group name."##,
    ),
    (
        r##"123 == xyzzy"##,
        r##"Syntax error at `xyzzy' expecting field name."##,
    ),
    (
        r##"xyzzy == 1"##,
        r##"Syntax error at `xyzzy' expecting field name."##,
    ),
    (
        r##"inport[1] == 1"##,
        r##"Cannot select subfield of string field inport."##,
    ),
    (
        r##"eth.type[] == 1"##,
        r##"Syntax error at `]' expecting small integer."##,
    ),
    (
        r##"eth.type[::1] == 1"##,
        r##"Syntax error at `::1' expecting small integer."##,
    ),
    (
        r##"eth.type[18446744073709551615] == 1"##,
        r##"Syntax error at `18446744073709551615' expecting small integer."##,
    ),
    (
        r##"eth.type[5!]"##,
        r##"Syntax error at `!' expecting `]'."##,
    ),
    (r##"eth.type[5..1]"##, r##"Invalid bit range 5 to 1."##),
    (
        r##"eth.type[12..16]"##,
        r##"Cannot select bits 12 to 16 of 16-bit field eth.type."##,
    ),
    (
        r##"eth.type[10] == 1"##,
        r##"Cannot select subfield of nominal field eth.type."##,
    ),
    (
        r##"eth.type"##,
        r##"Explicit `!= 0' is required for inequality test of multibit field against 0."##,
    ),
    (
        r##"!(!(vlan.pcp))"##,
        r##"Explicit `!= 0' is required for inequality test of multibit field against 0."##,
    ),
    (
        r##"123"##,
        r##"Syntax error at end of input expecting relational operator."##,
    ),
    (
        r##"123 x"##,
        r##"Syntax error at `x' expecting relational operator."##,
    ),
    (
        r##"{1, "eth0"}"##,
        r##"Syntax error at `"eth0"' expecting integer."##,
    ),
    (
        r##"eth.type == xyzzy"##,
        r##"Syntax error at `xyzzy' expecting constant."##,
    ),
    (r##"(1 x)"##, r##"Syntax error at `x' expecting `)'."##),
    (
        r##"!0x800 != eth.type"##,
        r##"Missing parentheses around operand of !."##,
    ),
    (
        r##"eth.type == 0x800 || eth.type == 0x86dd && ip.proto == 17"##,
        r##"&& and || must be parenthesized when used together."##,
    ),
    (
        r##"eth.dst == {}"##,
        r##"Syntax error at `}' expecting constant."##,
    ),
    (
        r##"eth.src > 00:00:00:00:11:11/00:00:00:00:ff:ff"##,
        r##"Only == and != operators may be used with masked constants.  Consider using subfields instead (e.g. eth.src[0..15] > 0x1111 in place of eth.src > 00:00:00:00:11:11/00:00:00:00:ff:ff)."##,
    ),
    (
        r##"ip4.src == ::1"##,
        r##"128-bit constant is not compatible with 32-bit field ip4.src."##,
    ),
    (
        r##"1 == eth.type == 2"##,
        r##"Range expressions must have the form `x < field < y' or `x > field > y', with each `<' optionally replaced by `<=' or `>' by `>=')."##,
    ),
    (
        r##"eth.dst[40] x"##,
        r##"Syntax error at `x' expecting end of input."##,
    ),
    (
        r##"ip4.src == {1.2.3.4, $set1, $unknownset}"##,
        r##"Syntax error at `$unknownset' expecting address set name."##,
    ),
    (
        r##"eth.src == {$set3, badmac, 00:00:00:00:00:01}"##,
        r##"Syntax error at `badmac' expecting constant."##,
    ),
    (
        r##"((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((()))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))"##,
        r##"Parentheses nested too deeply."##,
    ),
    (
        r##"ct_label > $set4"##,
        r##"Only == and != operators may be used to compare a field against an empty value set."##,
    ),
];

/// "expression annotation": `ovstest test-ovn annotate-expr`.
pub const ANNOTATE_EXPR: &[(&str, &str)] = &[
    (
        r##"ip4.src == 1.2.3.4"##,
        r##"ip4.src == 0x1020304 && eth.type == 0x800"##,
    ),
    (
        r##"ip4.src != 1.2.3.4"##,
        r##"ip4.src != 0x1020304 && eth.type == 0x800"##,
    ),
    (
        r##"ip.proto == 123"##,
        r##"ip.proto == 0x7b && (eth.type == 0x800 || eth.type == 0x86dd)"##,
    ),
    (
        r##"ip.proto == {123, 234}"##,
        r##"(ip.proto == 0x7b || ip.proto == 0xea) && (eth.type == 0x800 || eth.type == 0x86dd)"##,
    ),
    (
        r##"ip4.src == 1.2.3.4 && ip4.dst == 5.6.7.8"##,
        r##"ip4.src == 0x1020304 && eth.type == 0x800 && ip4.dst == 0x5060708 && eth.type == 0x800"##,
    ),
    (
        r##"tcp.dst == 1 || (tcp.dst >= 2 && tcp.dst <= 3)"##,
        r##"(tcp.dst == 0x1 || (tcp.dst >= 0x2 && tcp.dst <= 0x3)) && ip.proto == 0x6 && (eth.type == 0x800 || eth.type == 0x86dd)"##,
    ),
    (r##"ip"##, r##"eth.type == 0x800 || eth.type == 0x86dd"##),
    (
        r##"ip == 1"##,
        r##"eth.type == 0x800 || eth.type == 0x86dd"##,
    ),
    (
        r##"ip[0] == 1"##,
        r##"eth.type == 0x800 || eth.type == 0x86dd"##,
    ),
    (
        r##"ip > 0"##,
        r##"Only == and != operators may be used with nominal field ip."##,
    ),
    (
        r##"!ip"##,
        r##"Nominal predicate ip may only be tested positively, e.g. `ip' or `ip == 1' but not `!ip' or `ip == 0'."##,
    ),
    (
        r##"ip == 0"##,
        r##"Nominal predicate ip may only be tested positively, e.g. `ip' or `ip == 1' but not `!ip' or `ip == 0'."##,
    ),
    (r##"vlan.present"##, r##"vlan.tci[12]"##),
    (r##"!vlan.present"##, r##"!vlan.tci[12]"##),
    (
        r##"!vlan.pcp"##,
        r##"vlan.tci[13..15] == 0 && vlan.tci[12]"##,
    ),
    (
        r##"vlan.pcp == 1 && vlan.vid == 2"##,
        r##"vlan.tci[13..15] == 0x1 && vlan.tci[12] && vlan.tci[0..11] == 0x2 && vlan.tci[12]"##,
    ),
    (
        r##"!reg0 && !reg1 && !reg2 && !reg3"##,
        r##"xxreg0[96..127] == 0 && xxreg0[64..95] == 0 && xxreg0[32..63] == 0 && xxreg0[0..31] == 0"##,
    ),
    (
        r##"ip.first_frag"##,
        r##"ip.frag[0] && (eth.type == 0x800 || eth.type == 0x86dd) && (!ip.frag[1] || (eth.type != 0x800 && eth.type != 0x86dd))"##,
    ),
    (
        r##"!ip.first_frag"##,
        r##"!ip.frag[0] || (eth.type != 0x800 && eth.type != 0x86dd) || (ip.frag[1] && (eth.type == 0x800 || eth.type == 0x86dd))"##,
    ),
    (
        r##"ip.later_frag"##,
        r##"ip.frag[1] && (eth.type == 0x800 || eth.type == 0x86dd)"##,
    ),
    (
        r##"bad_prereq != 0"##,
        r##"Error parsing expression `xyzzy' encountered as prerequisite or predicate of initial expression: Syntax error at `xyzzy' expecting field name."##,
    ),
    (
        r##"self_recurse != 0"##,
        r##"Error parsing expression `self_recurse != 0' encountered as prerequisite or predicate of initial expression: Recursive expansion of symbol `self_recurse'."##,
    ),
    (
        r##"mutual_recurse_1 != 0"##,
        r##"Error parsing expression `mutual_recurse_2 != 0' encountered as prerequisite or predicate of initial expression: Error parsing expression `mutual_recurse_1 != 0' encountered as prerequisite or predicate of initial expression: Recursive expansion of symbol `mutual_recurse_1'."##,
    ),
    (
        r##"mutual_recurse_2 != 0"##,
        r##"Error parsing expression `mutual_recurse_1 != 0' encountered as prerequisite or predicate of initial expression: Error parsing expression `mutual_recurse_2 != 0' encountered as prerequisite or predicate of initial expression: Recursive expansion of symbol `mutual_recurse_2'."##,
    ),
];

//! OVN's symbol table: the names a match or action may use, each a base
//! field, a subfield of another symbol, a string field or a predicate
//! (OVN 23.03 `include/ovn/expr.h` `struct expr_symbol`,
//! `lib/expr.c` `expr_symtab_add_*()`).
//!
//! [`SymbolTable::ovn`] builds the table `ovn_init_symtab()` of
//! `lib/logical-fields.c` builds, from one table of data, [`OVN_SYMBOLS`].

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::expr::{self, Expr};
use crate::field::Field;

/// "Level of measurement" of a symbol (expr.h `enum expr_level`): which
/// relational operators may be used with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Compared for equality only (Ethertypes, IP protocols, strings).
    Nominal,
    /// A predicate over ordinal fields only: `==` and `!=`.
    Boolean,
    /// Bitwise-maskable: every relational operator and subfields.
    Ordinal,
}

impl Level {
    /// expr.c `expr_level_to_string()`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Nominal => "nominal",
            Level::Boolean => "Boolean",
            Level::Ordinal => "ordinal",
        }
    }
}

/// Where a symbol may be written (expr.h `enum expr_write_scope`), a bit
/// set.
pub type WriteScope = u8;
/// Writable at the top level of an actions string (`WR_DEFAULT`).
pub const WR_DEFAULT: WriteScope = 1;
/// Writable inside `ct_commit { ... }` (`WR_CT_COMMIT`).
pub const WR_CT_COMMIT: WriteScope = 2;
/// Writable everywhere (OVN fields use `UINT32_MAX`).
pub const WR_ALL: WriteScope = 0xff;

/// What a symbol stands for.
#[derive(Debug, Clone)]
pub enum SymbolKind {
    /// A whole base field.
    Field(Field),
    /// Bits `ofs..ofs + width` of another symbol.
    Subfield {
        /// The symbol it is part of.
        parent: SymbolRef,
        /// Offset of its least significant bit in `parent`.
        ofs: u16,
    },
    /// A string field compared by name, held in `Field` as a port key
    /// (`inport`, `outport`).
    String(Field),
    /// A Boolean expression used like a 1-bit field (`ip4`).
    Predicate(String),
    /// An OVN-only field written by actions (`icmp4.frag_mtu`).
    OvnField(Field),
}

/// One symbol (expr.h `struct expr_symbol`).
#[derive(Debug, Clone)]
pub struct Symbol {
    /// Its name, e.g. `ip4.src`.
    pub name: String,
    /// Width in bits; 0 for string fields, 1 for predicates.
    pub width: u16,
    /// What it stands for.
    pub kind: SymbolKind,
    /// Which relational operators it allows.
    pub level: Level,
    /// An expression that must hold wherever the symbol is used, e.g.
    /// `ip4` for `ip4.src`.
    pub prereqs: Option<String>,
    /// Never used as a conjunctive-match dimension when compiling to
    /// OpenFlow (kept for fidelity; evaluation does not need it).
    pub must_crossproduct: bool,
    /// Where actions may write it.
    pub rw: WriteScope,
}

/// Symbols are shared by the expressions and actions that use them.
pub type SymbolRef = Arc<Symbol>;

impl PartialEq for Symbol {
    /// Symbols are identified by name.
    fn eq(&self, other: &Symbol) -> bool {
        self.name == other.name
    }
}
impl Eq for Symbol {}
impl Hash for Symbol {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl Symbol {
    /// The predicate's expansion, if this is a predicate.
    pub fn predicate(&self) -> Option<&str> {
        match &self.kind {
            SymbolKind::Predicate(p) => Some(p),
            _ => None,
        }
    }

    /// Whether this is a string field.
    pub fn is_string(&self) -> bool {
        self.width == 0
    }

    /// The base field and offset this symbol's bit 0 lives at, following
    /// subfields to their root (expr.c `expr_resolve_field()`). `None` for
    /// predicates.
    pub fn base(&self) -> Option<(Field, u16)> {
        match &self.kind {
            SymbolKind::Field(f) | SymbolKind::String(f) | SymbolKind::OvnField(f) => Some((*f, 0)),
            SymbolKind::Subfield { parent, ofs } => parent.base().map(|(f, o)| (f, o + ofs)),
            SymbolKind::Predicate(_) => None,
        }
    }
}

impl fmt::Display for Symbol {
    /// expr.c `expr_symbol_format()`, as `test-ovn dump-symtab` prints:
    /// `reg0 = xxreg0[96..127]`, `ip4 = eth.type == 0x800`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = ", self.name)?;
        match &self.kind {
            SymbolKind::Subfield { parent, ofs } => {
                let r = FieldRef {
                    symbol: parent.clone(),
                    ofs: *ofs,
                    n_bits: self.width,
                };
                write!(f, "{r}")
            }
            SymbolKind::Predicate(p) => f.write_str(p),
            SymbolKind::OvnField(_) => f.write_str(&self.name),
            SymbolKind::Field(b) | SymbolKind::String(b) => f.write_str(b.info().nxm),
        }
    }
}

/// A reference to a symbol or some of its bits (expr.h `struct expr_field`),
/// e.g. `reg0[3..5]`. For string fields `ofs` and `n_bits` are 0.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRef {
    /// The symbol.
    pub symbol: SymbolRef,
    /// First bit.
    pub ofs: u16,
    /// Number of bits.
    pub n_bits: u16,
}

impl FieldRef {
    /// The whole of `symbol`.
    pub fn whole(symbol: SymbolRef) -> FieldRef {
        let n_bits = symbol.width;
        FieldRef {
            symbol,
            ofs: 0,
            n_bits,
        }
    }

    /// The base field bits it names (expr.c `expr_resolve_field()`); `None`
    /// for predicates. A string field resolves to its whole base field.
    pub fn resolve(&self) -> Option<Subfield> {
        let (field, base_ofs) = self.symbol.base()?;
        let n_bits = if self.symbol.is_string() {
            field.n_bits()
        } else {
            self.n_bits.into()
        };
        Some(Subfield {
            field,
            ofs: (base_ofs + self.ofs).into(),
            n_bits,
        })
    }
}

impl fmt::Display for FieldRef {
    /// expr.c `expr_field_format()`: `name`, `name[3]` or `name[3..5]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.symbol.name)?;
        if self.ofs != 0 || self.n_bits != self.symbol.width {
            if self.n_bits != 1 {
                write!(f, "[{}..{}]", self.ofs, self.ofs + self.n_bits - 1)?;
            } else {
                write!(f, "[{}]", self.ofs)?;
            }
        }
        Ok(())
    }
}

/// Bits `ofs..ofs + n_bits` of a base field (OVS `struct mf_subfield`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subfield {
    /// The base field.
    pub field: Field,
    /// First bit.
    pub ofs: u32,
    /// Number of bits (1..=128).
    pub n_bits: u32,
}

impl Subfield {
    /// The whole of `field`.
    pub fn whole(field: Field) -> Subfield {
        Subfield {
            field,
            ofs: 0,
            n_bits: field.n_bits(),
        }
    }
}

/// One row of a symbol table definition, in the form of the
/// `expr_symtab_add_*()` call that defines it.
#[derive(Debug, Clone, Copy)]
pub enum SymbolDef {
    /// `expr_symtab_add_field_scoped(name, field, prereqs, must_crossproduct, scope)`.
    Field(&'static str, Field, Option<&'static str>, bool, WriteScope),
    /// `expr_symtab_add_subfield_scoped(name, prereqs, "parent[lo..hi]", scope)`.
    Subfield(&'static str, Option<&'static str>, &'static str, WriteScope),
    /// `expr_symtab_add_string(name, field, prereqs)`.
    String(&'static str, Field, Option<&'static str>),
    /// `expr_symtab_add_predicate(name, expansion)`.
    Predicate(&'static str, &'static str),
    /// `expr_symtab_add_ovn_field(name, field)`.
    OvnField(&'static str, Field),
}

use SymbolDef::{OvnField as O, Predicate as P, String as S, Subfield as Sub};

/// A field with the default write scope.
const fn fld(name: &'static str, f: Field, pre: Option<&'static str>, cross: bool) -> SymbolDef {
    SymbolDef::Field(name, f, pre, cross, WR_DEFAULT)
}

/// A subfield with the default write scope.
const fn sub(name: &'static str, pre: Option<&'static str>, of: &'static str) -> SymbolDef {
    Sub(name, pre, of, WR_DEFAULT)
}

/// A subfield writable only inside `ct_commit { }`.
const fn ct_sub(name: &'static str, of: &'static str) -> SymbolDef {
    Sub(name, None, of, WR_CT_COMMIT)
}

/// OVN 23.03 `ovn_init_symtab()`, row by row, in its order.
pub const OVN_SYMBOLS: &[SymbolDef] = &[
    S("inport", Field::LogInport, None),
    S("outport", Field::LogOutport, None),
    // Logical registers: 128-bit xxregs, 64-bit xregs, 32-bit regs, the
    // smaller ones defined as subfields of the larger.
    fld("xxreg0", Field::Xxreg0, None, false),
    fld("xxreg1", Field::Xxreg1, None, false),
    sub("xreg0", None, "xxreg0[64..127]"),
    sub("xreg1", None, "xxreg0[0..63]"),
    sub("xreg2", None, "xxreg1[64..127]"),
    sub("xreg3", None, "xxreg1[0..63]"),
    fld("xreg4", Field::Xreg4, None, false),
    sub("reg0", None, "xxreg0[96..127]"),
    sub("reg1", None, "xxreg0[64..95]"),
    sub("reg2", None, "xxreg0[32..63]"),
    sub("reg3", None, "xxreg0[0..31]"),
    sub("reg4", None, "xxreg1[96..127]"),
    sub("reg5", None, "xxreg1[64..95]"),
    sub("reg6", None, "xxreg1[32..63]"),
    sub("reg7", None, "xxreg1[0..31]"),
    sub("reg8", None, "xreg4[32..63]"),
    sub("reg9", None, "xreg4[0..31]"),
    // Flags used in logical to physical transformation (MLF_*_BIT).
    fld("flags", Field::LogFlags, None, false),
    sub("flags.loopback", None, "flags[0]"),
    sub("flags.force_snat_for_dnat", None, "flags[2]"),
    sub("flags.force_snat_for_lb", None, "flags[3]"),
    sub("flags.skip_snat_for_lb", None, "flags[9]"),
    sub("flags.use_snat_zone", None, "flags[11]"),
    // Connection tracking state (OVN_CT_*_BIT).
    SymbolDef::Field("ct_mark", Field::CtMark, None, false, WR_CT_COMMIT),
    ct_sub("ct_mark.blocked", "ct_mark[0]"),
    ct_sub("ct_mark.natted", "ct_mark[1]"),
    ct_sub("ct_mark.ecmp_reply_port", "ct_mark[16..31]"),
    ct_sub("ct_mark.skip_snat", "ct_mark[2]"),
    ct_sub("ct_mark.force_snat", "ct_mark[3]"),
    SymbolDef::Field("ct_label", Field::CtLabel, None, false, WR_CT_COMMIT),
    ct_sub("ct_label.blocked", "ct_label[0]"),
    ct_sub("ct_label.natted", "ct_label[1]"),
    ct_sub("ct_label.ecmp_reply_eth", "ct_label[32..79]"),
    ct_sub("ct_label.ecmp_reply_port", "ct_label[80..95]"),
    ct_sub("ct_label.label", "ct_label[96..127]"),
    ct_sub("ct_label.skip_snat", "ct_label[2]"),
    ct_sub("ct_label.force_snat", "ct_label[3]"),
    fld("ct_state", Field::CtState, None, false),
    // CS_STATES (OVS lib/packets.h): every bit but trk requires ct.trk.
    sub("ct.new", Some("ct.trk"), "ct_state[0]"),
    sub("ct.est", Some("ct.trk"), "ct_state[1]"),
    sub("ct.rel", Some("ct.trk"), "ct_state[2]"),
    sub("ct.rpl", Some("ct.trk"), "ct_state[3]"),
    sub("ct.inv", Some("ct.trk"), "ct_state[4]"),
    sub("ct.trk", None, "ct_state[5]"),
    sub("ct.snat", Some("ct.trk"), "ct_state[6]"),
    sub("ct.dnat", Some("ct.trk"), "ct_state[7]"),
    // Data fields.
    fld("eth.src", Field::EthSrc, None, false),
    fld("eth.dst", Field::EthDst, None, false),
    fld("eth.type", Field::EthType, None, true),
    P("eth.bcast", "eth.dst == ff:ff:ff:ff:ff:ff"),
    sub("eth.mcast", None, "eth.dst[40]"),
    P("eth.mcastv6", "eth.dst[32..47] == 0x3333"),
    fld("vlan.tci", Field::VlanTci, None, false),
    P("vlan.present", "vlan.tci[12]"),
    sub("vlan.pcp", Some("vlan.present"), "vlan.tci[13..15]"),
    sub("vlan.vid", Some("vlan.present"), "vlan.tci[0..11]"),
    P("ip4", "eth.type == 0x800"),
    P("ip6", "eth.type == 0x86dd"),
    P("ip", "ip4 || ip6"),
    fld("ip.proto", Field::IpProto, Some("ip"), true),
    fld("ip.dscp", Field::IpDscp, Some("ip"), false),
    fld("ip.ecn", Field::IpEcn, Some("ip"), false),
    fld("ip.ttl", Field::IpTtl, Some("ip"), false),
    fld("ip4.src", Field::Ipv4Src, Some("ip4"), false),
    fld("ip4.dst", Field::Ipv4Dst, Some("ip4"), false),
    P("ip4.src_mcast", "ip4.src[28..31] == 0xe"),
    P("ip4.mcast", "eth.mcast && ip4.dst[28..31] == 0xe"),
    P("icmp4", "ip4 && ip.proto == 1"),
    fld("icmp4.type", Field::Icmpv4Type, Some("icmp4"), false),
    fld("icmp4.code", Field::Icmpv4Code, Some("icmp4"), false),
    P("igmp", "ip4 && ip.proto == 2"),
    fld("ip6.src", Field::Ipv6Src, Some("ip6"), false),
    fld("ip6.dst", Field::Ipv6Dst, Some("ip6"), false),
    fld("ip6.label", Field::Ipv6Label, Some("ip6"), false),
    // Predefined IPv6 multicast groups (RFC 4291, 2.7.1).
    P(
        "ip6.mcast_rsvd",
        "ip6.dst[116..127] == 0xff0 && ip6.dst[0..111] == 0x0",
    ),
    P(
        "ip6.mcast_all_nodes",
        "ip6.dst == ff01::1 || ip6.dst == ff02::1",
    ),
    P(
        "ip6.mcast_all_rtrs",
        "ip6.dst == ff01::2 || ip6.dst == ff02::2 || ip6.dst == ff05::2",
    ),
    P("ip6.mcast_sol_node", "ip6.dst == ff02::1:ff00:0000/104"),
    P(
        "ip6.mcast_flood",
        "eth.mcastv6 && (ip6.mcast_rsvd || ip6.mcast_all_nodes || ip6.mcast_all_rtrs \
         || ip6.mcast_sol_node)",
    ),
    P("ip6.mcast", "eth.mcastv6 && ip6.dst[120..127] == 0xff"),
    P("icmp6", "ip6 && ip.proto == 58"),
    fld("icmp6.type", Field::Icmpv6Type, Some("icmp6"), true),
    fld("icmp6.code", Field::Icmpv6Code, Some("icmp6"), true),
    P("icmp", "icmp4 || icmp6"),
    fld("ip.frag", Field::IpFrag, Some("ip"), false),
    P("ip.is_frag", "ip.frag[0]"),
    P("ip.later_frag", "ip.frag[1]"),
    P("ip.first_frag", "ip.is_frag && !ip.later_frag"),
    P("arp", "eth.type == 0x806"),
    fld("arp.op", Field::ArpOp, Some("arp"), false),
    fld("arp.spa", Field::ArpSpa, Some("arp"), false),
    fld("arp.sha", Field::ArpSha, Some("arp"), false),
    fld("arp.tpa", Field::ArpTpa, Some("arp"), false),
    fld("arp.tha", Field::ArpTha, Some("arp"), false),
    // RARP has ARP's layout, so the same fields.
    P("rarp", "eth.type == 0x8035"),
    fld("rarp.op", Field::ArpOp, Some("rarp"), false),
    fld("rarp.spa", Field::ArpSpa, Some("rarp"), false),
    fld("rarp.sha", Field::ArpSha, Some("rarp"), false),
    fld("rarp.tpa", Field::ArpTpa, Some("rarp"), false),
    fld("rarp.tha", Field::ArpTha, Some("rarp"), false),
    P(
        "nd",
        "icmp6.type == {135, 136} && icmp6.code == 0 && ip.ttl == 255",
    ),
    P(
        "nd_ns",
        "icmp6.type == 135 && icmp6.code == 0 && ip.ttl == 255",
    ),
    P(
        "nd_na",
        "icmp6.type == 136 && icmp6.code == 0 && ip.ttl == 255",
    ),
    P(
        "nd_rs",
        "icmp6.type == 133 && icmp6.code == 0 && ip.ttl == 255",
    ),
    P(
        "nd_ra",
        "icmp6.type == 134 && icmp6.code == 0 && ip.ttl == 255",
    ),
    fld("nd.target", Field::NdTarget, Some("nd"), false),
    fld("nd.sll", Field::NdSll, Some("nd_ns"), false),
    fld("nd.tll", Field::NdTll, Some("nd_na"), false),
    // MLDv1 uses link-local sources (RFC 2710, 3810); MLDv2 reports go to
    // ff02::16 (RFC 3810 5.2.14).
    P(
        "mldv1",
        "ip6.src == fe80::/10 && icmp6.type == {130, 131, 132}",
    ),
    P("mldv2", "ip6.dst == ff02::16 && icmp6.type == 143"),
    P("tcp", "ip.proto == 6"),
    fld("tcp.src", Field::TcpSrc, Some("tcp"), false),
    fld("tcp.dst", Field::TcpDst, Some("tcp"), false),
    fld("tcp.flags", Field::TcpFlags, Some("tcp"), false),
    P("udp", "ip.proto == 17"),
    fld("udp.src", Field::UdpSrc, Some("udp"), false),
    fld("udp.dst", Field::UdpDst, Some("udp"), false),
    P("sctp", "ip.proto == 132"),
    fld("sctp.src", Field::SctpSrc, Some("sctp"), false),
    fld("sctp.dst", Field::SctpDst, Some("sctp"), false),
    fld("pkt.mark", Field::PktMark, None, false),
    O("icmp4.frag_mtu", Field::Icmp4FragMtu),
    O("icmp6.frag_mtu", Field::Icmp6FragMtu),
];

/// A symbol table (a `struct shash` of `struct expr_symbol` in OVN).
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    by_name: HashMap<String, SymbolRef>,
}

impl SymbolTable {
    /// An empty table.
    pub fn new() -> SymbolTable {
        SymbolTable::default()
    }

    /// OVN 23.03's table ([`OVN_SYMBOLS`]).
    pub fn ovn() -> SymbolTable {
        let mut t = SymbolTable::new();
        for def in OVN_SYMBOLS {
            // The table is constant and tested, so a failure is a bug here.
            if let Err(e) = t.define(def) {
                panic!("OVN_SYMBOLS row {def:?}: {e}");
            }
        }
        t
    }

    /// Adds one row.
    pub fn define(&mut self, def: &SymbolDef) -> Result<SymbolRef> {
        match *def {
            SymbolDef::Field(n, f, pre, cross, scope) => self.add_field(n, f, pre, cross, scope),
            SymbolDef::Subfield(n, pre, of, scope) => self.add_subfield(n, pre, of, scope),
            SymbolDef::String(n, f, pre) => self.add_string(n, f, pre),
            SymbolDef::Predicate(n, e) => self.add_predicate(n, e),
            SymbolDef::OvnField(n, f) => self.add_ovn_field(n, f),
        }
    }

    /// Looks a symbol up by name.
    pub fn get(&self, name: &str) -> Option<&SymbolRef> {
        self.by_name.get(name)
    }

    /// Every symbol, sorted by name (as `test-ovn dump-symtab` lists them).
    pub fn symbols(&self) -> Vec<&SymbolRef> {
        let mut v: Vec<_> = self.by_name.values().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    fn insert(&mut self, symbol: Symbol) -> Result<SymbolRef> {
        if self.by_name.contains_key(&symbol.name) {
            return Err(Error::Symbol(format!("duplicate symbol {}", symbol.name)));
        }
        let symbol = Arc::new(symbol);
        self.by_name.insert(symbol.name.clone(), symbol.clone());
        Ok(symbol)
    }

    /// `expr_symtab_add_field_scoped()`: a whole base field, ordinal if OVS
    /// can mask it, writable in `scope` if OVS can write it.
    pub fn add_field(
        &mut self,
        name: &str,
        field: Field,
        prereqs: Option<&str>,
        must_crossproduct: bool,
        scope: WriteScope,
    ) -> Result<SymbolRef> {
        let info = field.info();
        self.insert(Symbol {
            name: name.to_string(),
            width: info.n_bits.into(),
            kind: SymbolKind::Field(field),
            level: if info.maskable {
                Level::Ordinal
            } else {
                Level::Nominal
            },
            prereqs: prereqs.filter(|p| !p.is_empty()).map(str::to_string),
            must_crossproduct,
            rw: if info.writable { scope } else { 0 },
        })
    }

    /// `expr_symtab_add_subfield_scoped()`: `subfield` names the bits, e.g.
    /// `vlan.tci[0..11]`.
    pub fn add_subfield(
        &mut self,
        name: &str,
        prereqs: Option<&str>,
        subfield: &str,
        scope: WriteScope,
    ) -> Result<SymbolRef> {
        let f = expr::parse_field(subfield, self).map_err(|e| {
            Error::Symbol(format!("{subfield}: error parsing {name} subfield ({e})"))
        })?;
        self.insert(Symbol {
            name: name.to_string(),
            width: f.n_bits,
            level: f.symbol.level,
            prereqs: prereqs.filter(|p| !p.is_empty()).map(str::to_string),
            must_crossproduct: false,
            rw: if f.symbol.rw != 0 { scope } else { 0 },
            kind: SymbolKind::Subfield {
                parent: f.symbol,
                ofs: f.ofs,
            },
        })
    }

    /// `expr_symtab_add_string()`: a string field stored as a port key in
    /// `field`.
    pub fn add_string(
        &mut self,
        name: &str,
        field: Field,
        prereqs: Option<&str>,
    ) -> Result<SymbolRef> {
        self.insert(Symbol {
            name: name.to_string(),
            width: 0,
            kind: SymbolKind::String(field),
            level: Level::Nominal,
            prereqs: prereqs.filter(|p| !p.is_empty()).map(str::to_string),
            must_crossproduct: false,
            rw: if field.info().writable { WR_DEFAULT } else { 0 },
        })
    }

    /// `expr_symtab_add_predicate()`: nominal if the expansion tests a
    /// nominal field, otherwise Boolean.
    pub fn add_predicate(&mut self, name: &str, expansion: &str) -> Result<SymbolRef> {
        let e = Expr::parse(expansion, self).map_err(|e| {
            Error::Symbol(format!("{expansion}: error parsing {name} expansion ({e})"))
        })?;
        self.insert(Symbol {
            name: name.to_string(),
            width: 1,
            kind: SymbolKind::Predicate(expansion.to_string()),
            level: e.level(),
            prereqs: None,
            must_crossproduct: false,
            rw: 0,
        })
    }

    /// `expr_symtab_add_ovn_field()`.
    pub fn add_ovn_field(&mut self, name: &str, field: Field) -> Result<SymbolRef> {
        self.insert(Symbol {
            name: name.to_string(),
            width: field.info().n_bits.into(),
            kind: SymbolKind::OvnField(field),
            level: Level::Nominal,
            prereqs: None,
            must_crossproduct: false,
            rw: WR_ALL,
        })
    }

    /// Parses a field reference such as `reg0`, `reg0[3]` or `ip4.src[0..7]`
    /// and resolves it to base field bits. Fails for unknown names, bad
    /// ranges and predicates.
    pub fn subfield(&self, text: &str) -> Result<Subfield> {
        let f = expr::parse_field(text, self)?;
        f.resolve().ok_or_else(|| {
            Error::Symbol(format!(
                "Predicate symbol {} used where lvalue required.",
                f.symbol.name
            ))
        })
    }
}

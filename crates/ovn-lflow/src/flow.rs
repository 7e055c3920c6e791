//! A packet's logical flow: the value of every base field, as OVS's
//! `struct flow` holds what a logical pipeline can match and set.

use crate::error::{Error, Result};
use crate::field::{low_bits, Field};
use crate::symtab::{FieldRef, Subfield, SymbolTable};

/// The value of every [`Field`], each in the low bits of a `u128`
/// (registers, flags, `ct_state`/`ct_mark`/`ct_label`, L2-L4 headers with
/// ARP and ND fields, the logical inport/outport keys). Values are always
/// truncated to their field's width.
///
/// A flow also records which fields were read ([`Flow::reads`]), in a set its
/// clones share: what a run of a pipeline over the flow and its copies looked
/// at, the fields its decision rests on (as Open vSwitch's classifier
/// un-wildcards the fields a lookup consulted to build a megaflow). Equality
/// and hashing see the values only.
#[derive(Debug, Clone)]
pub struct Flow {
    values: [u128; Field::COUNT],
    reads: Reads,
}

/// The set of fields read, shared by a flow and its clones, and for each IP address
/// field the bits read (what a megaflow's prefix keeps).
#[derive(Debug, Clone, Default)]
struct Reads(std::sync::Arc<ReadSet>);

#[derive(Debug, Default)]
struct ReadSet {
    fields: core::sync::atomic::AtomicU64,
    /// The bits read of [`ADDRESSES`], each as two words (high, low).
    bits: [[core::sync::atomic::AtomicU64; 2]; 4],
}

/// The fields whose bits read are kept apart ([`Flow::read_bits`]).
const ADDRESSES: [Field; 4] = [
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
];

impl Reads {
    #[inline]
    fn note(&self, field: Field) {
        self.note_bits(field, field.full_mask());
    }

    /// Notes `bits` of `field` as read.
    #[inline]
    fn note_bits(&self, field: Field, bits: u128) {
        use core::sync::atomic::Ordering::Relaxed;
        // One thread runs a pipeline over a flow and its copies: a plain read then
        // write, no read-modify-write.
        let bit = 1u64 << field.index();
        let set = self.0.fields.load(Relaxed);
        if set & bit == 0 {
            self.0.fields.store(set | bit, Relaxed);
        }
        if let Some(a) = ADDRESSES.iter().position(|&f| f == field) {
            let [hi, lo] = &self.0.bits[a];
            let (h, l) = ((bits >> 64) as u64, bits as u64);
            if hi.load(Relaxed) & h != h || lo.load(Relaxed) & l != l {
                hi.store(hi.load(Relaxed) | h, Relaxed);
                lo.store(lo.load(Relaxed) | l, Relaxed);
            }
        }
    }

    fn bits(&self, field: Field) -> u128 {
        use core::sync::atomic::Ordering::Relaxed;
        match ADDRESSES.iter().position(|&f| f == field) {
            Some(a) => {
                let [hi, lo] = &self.0.bits[a];
                u128::from(hi.load(Relaxed)) << 64 | u128::from(lo.load(Relaxed))
            }
            None if self.0.fields.load(Relaxed) & (1 << field.index()) != 0 => field.full_mask(),
            None => 0,
        }
    }

    fn clear(&self) {
        use core::sync::atomic::Ordering::Relaxed;
        self.0.fields.store(0, Relaxed);
        for w in self.0.bits.iter().flatten() {
            w.store(0, Relaxed);
        }
    }
}

impl PartialEq for Flow {
    fn eq(&self, other: &Flow) -> bool {
        self.values == other.values
    }
}

impl Eq for Flow {}

impl core::hash::Hash for Flow {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.values.hash(state);
    }
}

const _: () = assert!(Field::COUNT <= 64, "Flow::reads is a u64 bit set");

impl Default for Flow {
    fn default() -> Flow {
        Flow::new()
    }
}

impl Flow {
    /// A flow with every field zero.
    pub fn new() -> Flow {
        Flow {
            values: [0; Field::COUNT],
            reads: Reads::default(),
        }
    }

    /// The value of `field`, noted as read ([`Flow::reads`]).
    #[inline]
    pub fn get(&self, field: Field) -> u128 {
        self.reads.note(field);
        self.values[field.index()]
    }

    /// The value of `field`, not noted as read: for code that handles a flow without
    /// deciding on it (copying, comparing a copy with its original).
    #[inline]
    pub fn peek(&self, field: Field) -> u128 {
        self.values[field.index()]
    }

    /// Notes `field` as read without reading it: for a decision on a value derived
    /// from the field outside the flow.
    #[inline]
    pub fn note_read(&self, field: Field) {
        self.reads.note(field);
    }

    /// Notes only `bits` of `field` as read: for a decision that any value equal to
    /// this flow's in those bits would take alike (a masked test, see
    /// [`crate::Test::eval`]). The field counts as read ([`Flow::reads`]); for an IP
    /// address field the bits are kept apart ([`Flow::read_bits`]).
    #[inline]
    pub fn note_bits(&self, field: Field, bits: u128) {
        self.reads.note_bits(field, bits);
    }

    /// The fields read through [`Flow::get`] (and the reads built on it) on this flow
    /// and on every flow cloned from it or that it was cloned from, since the set was
    /// last cleared: bit `i` is the field of [`Field::index`] `i`.
    pub fn reads(&self) -> u64 {
        self.reads
            .0
            .fields
            .load(core::sync::atomic::Ordering::Relaxed)
    }

    /// The bits of `field` read as [`Flow::reads`] counts them: for the IP address
    /// fields (`ip4.src`, `ip4.dst`, `ip6.src`, `ip6.dst`) those the decisions rested
    /// on (Open vSwitch's prefix tracking: a route or a CIDR test reads a prefix, a
    /// failed equality test the bits down to the first that differs); for any other
    /// field all of its bits once read, else none.
    pub fn read_bits(&self, field: Field) -> u128 {
        self.reads.bits(field)
    }

    /// Empties the set of fields read (shared with its clones).
    pub fn clear_reads(&self) {
        self.reads.clear();
    }

    /// A copy with a set of fields read of its own (empty).
    pub fn detached(&self) -> Flow {
        Flow {
            values: self.values,
            reads: Reads::default(),
        }
    }

    /// Sets `field`, truncating `value` to the field's width.
    #[inline]
    pub fn set(&mut self, field: Field, value: u128) {
        self.values[field.index()] = value & field.full_mask();
    }

    /// Builder form of [`Flow::set`].
    pub fn with(mut self, field: Field, value: u128) -> Flow {
        self.set(field, value);
        self
    }

    /// Bits `sf.ofs..sf.ofs + sf.n_bits` of `sf.field`, shifted down.
    #[inline]
    pub fn get_subfield(&self, sf: Subfield) -> u128 {
        (self.get(sf.field) >> sf.ofs) & low_bits(sf.n_bits)
    }

    /// Replaces bits `sf.ofs..sf.ofs + sf.n_bits` of `sf.field` by the low
    /// bits of `value`.
    #[inline]
    pub fn set_subfield(&mut self, sf: Subfield, value: u128) {
        let m = low_bits(sf.n_bits) << sf.ofs;
        let old = self.peek(sf.field);
        self.set(sf.field, (old & !m) | ((value << sf.ofs) & m));
    }

    /// The value of a field reference such as `reg0[3..5]`; `None` for a
    /// predicate. A string field reads as its port key.
    pub fn read(&self, r: &FieldRef) -> Option<u128> {
        r.resolve().map(|sf| self.get_subfield(sf))
    }

    /// Writes a field reference; returns false (and writes nothing) for a
    /// predicate. A string field takes a port key.
    pub fn write(&mut self, r: &FieldRef, value: u128) -> bool {
        match r.resolve() {
            Some(sf) => {
                self.set_subfield(sf, value);
                true
            }
            None => false,
        }
    }

    /// Reads a symbol by name, with optional bit range (`ct.est`,
    /// `reg0[3..5]`, `inport`).
    pub fn get_symbol(&self, symtab: &SymbolTable, name: &str) -> Result<u128> {
        Ok(self.get_subfield(symtab.subfield(name)?))
    }

    /// Writes a symbol by name, with optional bit range.
    pub fn set_symbol(&mut self, symtab: &SymbolTable, name: &str, value: u128) -> Result<()> {
        let sf = symtab.subfield(name)?;
        if u32::from(crate::lex::bit_len(value)) > sf.n_bits {
            return Err(Error::Symbol(format!("{value:#x} does not fit in {name}")));
        }
        self.set_subfield(sf, value);
        Ok(())
    }

    /// Every value, indexed by [`Field::index`].
    pub fn values(&self) -> &[u128; Field::COUNT] {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subfields_of_registers_alias() {
        let symtab = SymbolTable::ovn();
        let mut flow = Flow::new();
        flow.set_symbol(&symtab, "reg0", 0xdead_beef).unwrap();
        flow.set_symbol(&symtab, "reg3[0..7]", 0x12).unwrap();
        assert_eq!(flow.get(Field::Xxreg0), 0xdead_beef << 96 | 0x12);
        assert_eq!(
            flow.get_symbol(&symtab, "xreg0").unwrap(),
            0xdead_beef << 32
        );
        assert_eq!(flow.get_symbol(&symtab, "reg0[28..31]").unwrap(), 0xd);
        flow.set_symbol(&symtab, "reg9", 7).unwrap();
        assert_eq!(flow.get_symbol(&symtab, "xreg4").unwrap(), 7);
        assert!(flow.set_symbol(&symtab, "ct.est", 2).is_err());
        assert!(flow.get_symbol(&symtab, "ip4").is_err());
        flow.set(Field::EthType, 0x1_0800);
        assert_eq!(flow.get(Field::EthType), 0x0800);
    }

    #[test]
    fn an_address_s_bits_read_are_kept_apart() {
        let flow = Flow::new().with(Field::Ipv6Dst, 1 << 100);
        let copy = flow.clone();
        copy.note_bits(Field::Ipv6Dst, u128::MAX << 64);
        flow.note_bits(Field::Ipv6Dst, 0xff << 56);
        flow.note_bits(Field::TcpDst, 1);
        assert_eq!(flow.read_bits(Field::Ipv6Dst), u128::MAX << 56);
        assert_eq!(
            flow.read_bits(Field::TcpDst),
            0xffff,
            "other fields: all bits"
        );
        assert_eq!(flow.read_bits(Field::Ipv4Dst), 0);
        assert_eq!(
            flow.reads(),
            1 << Field::Ipv6Dst.index() | 1 << Field::TcpDst.index()
        );
        flow.get(Field::Ipv4Src);
        assert_eq!(copy.read_bits(Field::Ipv4Src), 0xffff_ffff);
        flow.clear_reads();
        assert_eq!((copy.reads(), copy.read_bits(Field::Ipv6Dst)), (0, 0));
    }

    #[test]
    fn reads_are_noted_in_a_set_clones_share() {
        let symtab = SymbolTable::ovn();
        let mut flow = Flow::new().with(Field::TcpSrc, 1024);
        flow.set_symbol(&symtab, "reg0[0..7]", 3).unwrap();
        assert_eq!(flow.reads(), 0, "writes, a subfield's too, read nothing");
        let copy = flow.clone();
        assert_eq!(copy.get_symbol(&symtab, "tcp.dst").unwrap(), 0);
        assert_eq!(flow.peek(Field::TcpSrc), 1024);
        assert_eq!(flow.reads(), 1 << Field::TcpDst.index());
        flow.detached().get(Field::EthSrc);
        assert_eq!(flow.reads(), 1 << Field::TcpDst.index());
        flow.clear_reads();
        assert_eq!(copy.reads(), 0);
        assert_eq!(copy, flow.detached(), "equality sees the values only");
    }
}

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

/// The set of fields read, shared by a flow and its clones.
#[derive(Debug, Clone, Default)]
struct Reads(std::sync::Arc<core::sync::atomic::AtomicU64>);

impl Reads {
    #[inline]
    fn note(&self, field: Field) {
        use core::sync::atomic::Ordering::Relaxed;
        // One thread runs a pipeline over a flow and its copies: a plain read then
        // write, no read-modify-write.
        let bit = 1u64 << field.index();
        let set = self.0.load(Relaxed);
        if set & bit == 0 {
            self.0.store(set | bit, Relaxed);
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

    /// The fields read through [`Flow::get`] (and the reads built on it) on this flow
    /// and on every flow cloned from it or that it was cloned from, since the set was
    /// last cleared: bit `i` is the field of [`Field::index`] `i`.
    pub fn reads(&self) -> u64 {
        self.reads.0.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// Empties the set of fields read (shared with its clones).
    pub fn clear_reads(&self) {
        self.reads.0.store(0, core::sync::atomic::Ordering::Relaxed);
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

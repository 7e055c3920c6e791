//! The Geneve header and its options (RFC 8926 §3.4, §3.5), as typed views
//! over bytes in the style of smoltcp's `wire` module.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Ver|  Opt Len  |O|C|    Rsvd.  |          Protocol Type        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        Virtual Network Identifier (VNI)       |    Reserved   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Variable-Length Options                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! [`Packet::new_checked`] checks that the buffer holds the 8-byte base
//! header and the `Opt Len` words of options; after it succeeds no accessor
//! of [`Packet`] panics. [`GeneveOption::new_checked`] does the same for one
//! option. Setters may panic on a buffer too short for what they write, as
//! smoltcp's do; [`Repr::emit`] never writes past [`Repr::buffer_len`].

use crate::Error;

/// Geneve protocol type for an Ethernet payload ("Transparent Ethernet
/// Bridging", RFC 8926 §3.4).
pub const ETHERTYPE_TEB: u16 = 0x6558;
/// IANA-assigned UDP destination port for Geneve (RFC 8926 §3.3).
pub const UDP_PORT: u16 = 6081;
/// Length of the fixed Geneve header in bytes (RFC 8926 §3.4).
pub const HEADER_LEN: usize = 8;
/// Largest options area in bytes: 6-bit `Opt Len` × 4 (RFC 8926 §3.4).
pub const MAX_OPTIONS_LEN: usize = 63 * 4;
/// Largest data of one option in bytes: 5-bit `Length` × 4 (RFC 8926 §3.5).
pub const MAX_OPTION_DATA_LEN: usize = 31 * 4;
/// Length of an option's own header in bytes (RFC 8926 §3.5).
pub const OPTION_HEADER_LEN: usize = 4;
/// Largest VNI: 24 bits (RFC 8926 §3.4).
pub const MAX_VNI: u32 = 0x00ff_ffff;

/// Byte ranges of the header fields (RFC 8926 §3.4).
pub mod field {
    /// A range of bytes within the header.
    pub type Field = core::ops::Range<usize>;
    /// Version (2 bits, high) and Opt Len (6 bits, in 4-byte words).
    pub const VER_OPT_LEN: usize = 0;
    /// O (control, bit 7), C (critical, bit 6), 6 reserved bits.
    pub const FLAGS: usize = 1;
    /// Protocol type of the payload (an EtherType).
    pub const PROTOCOL: Field = 2..4;
    /// 24-bit Virtual Network Identifier.
    pub const VNI: Field = 4..7;
    /// Reserved byte after the VNI.
    pub const RESERVED: usize = 7;
    /// Start of the options.
    pub const OPTIONS: usize = 8;

    /// Option class (within an option, RFC 8926 §3.5).
    pub const OPT_CLASS: Field = 0..2;
    /// Option type; its high bit is the critical bit.
    pub const OPT_TYPE: usize = 2;
    /// Three reserved bits and the 5-bit length in 4-byte words.
    pub const OPT_LEN: usize = 3;
    /// Start of the option data.
    pub const OPT_DATA: usize = 4;
}

const FLAG_CONTROL: u8 = 0x80;
const FLAG_CRITICAL: u8 = 0x40;
/// Critical bit of an option type (RFC 8926 §3.5).
pub const OPTION_TYPE_CRITICAL: u8 = 0x80;

/// A read/write view of a Geneve header, its options and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length. Accessors may panic
    /// until [`Packet::check_len`] has succeeded.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a buffer and checks it with [`Packet::check_len`].
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than the base header
    /// plus the options that `Opt Len` announces.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the 8-byte header and `Opt Len` × 4
    /// bytes of options.
    ///
    /// # Errors
    /// [`Error::Truncated`] otherwise.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN || b.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (2 bits); RFC 8926 defines only 0.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_OPT_LEN] >> 6
    }

    /// `Opt Len`: length of the options in 4-byte words (0..=63).
    pub fn opt_len(&self) -> u8 {
        self.buffer.as_ref()[field::VER_OPT_LEN] & 0x3f
    }

    /// Length of the options in bytes (`Opt Len` × 4, 0..=252).
    pub fn options_len(&self) -> usize {
        usize::from(self.opt_len()) * 4
    }

    /// Length of the header including options, in bytes (8..=260).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    /// O bit: a control (OAM) packet, not to be forwarded as data
    /// (RFC 8926 §3.4).
    pub fn control(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_CONTROL != 0
    }

    /// C bit: one or more options have the critical bit set (RFC 8926 §3.4).
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_CRITICAL != 0
    }

    /// The 6 reserved flag bits (senders set 0, receivers ignore).
    pub fn reserved_flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x3f
    }

    /// Protocol type of the payload, an EtherType ([`ETHERTYPE_TEB`] for
    /// Ethernet).
    pub fn protocol_type(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::PROTOCOL.start], b[field::PROTOCOL.start + 1]])
    }

    /// The 24-bit Virtual Network Identifier.
    pub fn vni(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VNI];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    /// The reserved byte after the VNI.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// The options area (`Opt Len` × 4 bytes).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Iterator over the options, in order (RFC 8926 §3.5).
    pub fn options_iter(&self) -> OptionIter<'_> {
        OptionIter::new(self.options())
    }

    /// The encapsulated payload (after the options).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version (2 bits).
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_OPT_LEN];
        *b = (*b & 0x3f) | ((v & 0x3) << 6);
    }

    /// Sets `Opt Len` in 4-byte words (6 bits).
    pub fn set_opt_len(&mut self, words: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_OPT_LEN];
        *b = (*b & 0xc0) | (words & 0x3f);
    }

    /// Sets the O (control) bit.
    pub fn set_control(&mut self, on: bool) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = if on {
            *b | FLAG_CONTROL
        } else {
            *b & !FLAG_CONTROL
        };
    }

    /// Sets the C (critical options present) bit.
    pub fn set_critical(&mut self, on: bool) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = if on {
            *b | FLAG_CRITICAL
        } else {
            *b & !FLAG_CRITICAL
        };
    }

    /// Sets the 6 reserved flag bits.
    pub fn set_reserved_flags(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & 0xc0) | (v & 0x3f);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, t: u16) {
        self.buffer.as_mut()[field::PROTOCOL].copy_from_slice(&t.to_be_bytes());
    }

    /// Sets the VNI; bits above 24 are ignored.
    pub fn set_vni(&mut self, vni: u32) {
        self.buffer.as_mut()[field::VNI].copy_from_slice(&vni.to_be_bytes()[1..]);
    }

    /// Sets the reserved byte after the VNI.
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }

    /// The options area, mutable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// A read/write view of one Geneve option (RFC 8926 §3.5).
///
/// ```text
/// |          Option Class         |      Type     |R|R|R| Length  |
/// ~                  Variable-Length Option Data                  ~
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GeneveOption<T> {
    /// Wraps a buffer that starts with an option, without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        GeneveOption { buffer }
    }

    /// Wraps a buffer that starts with an option and checks that the option
    /// header and its `Length` × 4 bytes of data fit.
    ///
    /// # Errors
    /// [`Error::BadOption`] if they do not.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let o = Self::new_unchecked(buffer);
        let b = o.buffer.as_ref();
        if b.len() < OPTION_HEADER_LEN || b.len() < o.total_len() {
            return Err(Error::BadOption);
        }
        Ok(o)
    }

    /// Option class: the namespace of the type (IANA registry, RFC 8926 §7).
    pub fn class(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Option type, 8 bits, including the critical bit.
    pub fn option_type(&self) -> u8 {
        self.buffer.as_ref()[field::OPT_TYPE]
    }

    /// Critical bit (high bit of the type): a receiver that does not know
    /// this option must drop the packet (RFC 8926 §3.5).
    pub fn critical(&self) -> bool {
        self.option_type() & OPTION_TYPE_CRITICAL != 0
    }

    /// The three reserved bits before `Length`.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::OPT_LEN] >> 5
    }

    /// Length of the option data in bytes (`Length` × 4, 0..=124), not
    /// counting the 4-byte option header.
    pub fn data_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OPT_LEN] & 0x1f) * 4
    }

    /// Length of the whole option, header included, in bytes.
    pub fn total_len(&self) -> usize {
        OPTION_HEADER_LEN + self.data_len()
    }

    /// The option data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPT_DATA..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GeneveOption<T> {
    /// Sets the class.
    pub fn set_class(&mut self, c: u16) {
        self.buffer.as_mut()[field::OPT_CLASS].copy_from_slice(&c.to_be_bytes());
    }
    /// Sets the 8-bit type (critical bit included).
    pub fn set_option_type(&mut self, t: u8) {
        self.buffer.as_mut()[field::OPT_TYPE] = t;
    }
    /// Sets the data length in bytes; must be a multiple of 4, ≤ 124.
    pub fn set_data_len(&mut self, len: usize) {
        debug_assert!(len % 4 == 0 && len <= MAX_OPTION_DATA_LEN);
        self.buffer.as_mut()[field::OPT_LEN] = ((len / 4) as u8) & 0x1f;
    }
    /// The option data, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        &mut self.buffer.as_mut()[field::OPT_DATA..end]
    }
}

/// Iterator over the options of an options area. Yields
/// `Err(Error::BadOption)` once, then stops, if an option's length runs past
/// the end of the area (RFC 8926 §3.5).
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> OptionIter<'a> {
    /// Iterates over `options`, an options area as [`Packet::options`] gives.
    pub fn new(options: &'a [u8]) -> Self {
        OptionIter { rest: options }
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = Result<GeneveOption<&'a [u8]>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match GeneveOption::new_checked(self.rest) {
            Ok(o) => {
                let (this, rest) = self.rest.split_at(o.total_len());
                self.rest = rest;
                Some(Ok(GeneveOption::new_unchecked(this)))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// Checks that an options area is a well-formed sequence of options and
/// says whether any has the critical bit set.
///
/// # Errors
/// [`Error::BadOption`] if an option overruns the area;
/// [`Error::OptionsTooLong`] if the area exceeds 252 bytes or is not a
/// multiple of 4 bytes (RFC 8926 §3.4).
pub fn check_options(options: &[u8]) -> Result<bool, Error> {
    if options.len() > MAX_OPTIONS_LEN || options.len() % 4 != 0 {
        return Err(Error::OptionsTooLong);
    }
    let mut critical = false;
    for o in OptionIter::new(options) {
        critical |= o?.critical();
    }
    Ok(critical)
}

/// A Geneve header in high-level form (RFC 8926 §3.4).
///
/// `options` is the raw options area, checked by [`Repr::parse`] and
/// [`Repr::emit`] to be a well-formed option sequence; build one with
/// [`OptionList`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// O bit: control (OAM) packet.
    pub control: bool,
    /// C bit: critical options present.
    pub critical: bool,
    /// Protocol type of the payload (an EtherType).
    pub protocol_type: u16,
    /// 24-bit VNI.
    pub vni: u32,
    /// Options area; length a multiple of 4, at most 252 bytes.
    pub options: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses and validates a header: version 0, options well formed.
    /// Reserved bits are ignored, as RFC 8926 §3.4 requires of receivers.
    /// The C bit is reported as sent; [`check_options`] tells whether an
    /// option really is critical.
    ///
    /// # Errors
    /// [`Error::Truncated`], [`Error::BadVersion`], [`Error::BadOption`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Self, Error> {
        packet.check_len()?;
        if packet.version() != 0 {
            return Err(Error::BadVersion);
        }
        let bytes: &'a [u8] = packet.buffer.as_ref();
        let options = &bytes[field::OPTIONS..packet.header_len()];
        check_options(options)?;
        Ok(Repr {
            control: packet.control(),
            critical: packet.critical(),
            protocol_type: packet.protocol_type(),
            vni: packet.vni(),
            options,
        })
    }

    /// Length of the emitted header in bytes: 8 + options.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Writes the header and options into the start of `packet`'s buffer,
    /// with version 0 and reserved fields zero. Does not touch the payload.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than
    /// [`Repr::buffer_len`]; [`Error::OptionsTooLong`] or
    /// [`Error::BadOption`] for a malformed options area; [`Error::BadVni`]
    /// for a VNI above 24 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<(), Error> {
        check_options(self.options)?;
        if self.vni > MAX_VNI {
            return Err(Error::BadVni);
        }
        let buf = packet.buffer.as_mut();
        if buf.len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        buf[field::VER_OPT_LEN] = (self.options.len() / 4) as u8;
        buf[field::FLAGS] = (if self.control { FLAG_CONTROL } else { 0 })
            | (if self.critical { FLAG_CRITICAL } else { 0 });
        buf[field::PROTOCOL].copy_from_slice(&self.protocol_type.to_be_bytes());
        buf[field::VNI].copy_from_slice(&self.vni.to_be_bytes()[1..]);
        buf[field::RESERVED] = 0;
        buf[field::OPTIONS..self.buffer_len()].copy_from_slice(self.options);
        Ok(())
    }
}

/// One option in high-level form (RFC 8926 §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionRepr<'a> {
    /// Option class.
    pub class: u16,
    /// 8-bit type; the high bit ([`OPTION_TYPE_CRITICAL`]) marks it critical.
    pub option_type: u8,
    /// Data; length a multiple of 4, at most 124 bytes.
    pub data: &'a [u8],
}

impl<'a> OptionRepr<'a> {
    /// Parses a checked option view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(opt: &GeneveOption<&'a T>) -> Self {
        let bytes: &'a [u8] = opt.buffer.as_ref();
        OptionRepr {
            class: opt.class(),
            option_type: opt.option_type(),
            data: &bytes[field::OPT_DATA..opt.total_len()],
        }
    }

    /// Whether the critical bit is set.
    pub const fn critical(&self) -> bool {
        self.option_type & OPTION_TYPE_CRITICAL != 0
    }

    /// Emitted length in bytes: 4 + data.
    pub const fn buffer_len(&self) -> usize {
        OPTION_HEADER_LEN + self.data.len()
    }

    /// Writes the option at the start of `buf` with reserved bits zero.
    ///
    /// # Errors
    /// [`Error::BadOption`] if the data length is not a multiple of 4 or
    /// exceeds 124 bytes; [`Error::Truncated`] if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), Error> {
        if self.data.len() % 4 != 0 || self.data.len() > MAX_OPTION_DATA_LEN {
            return Err(Error::BadOption);
        }
        if buf.len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        let mut o = GeneveOption::new_unchecked(&mut buf[..self.buffer_len()]);
        o.set_class(self.class);
        o.set_option_type(self.option_type);
        o.set_data_len(self.data.len());
        o.data_mut().copy_from_slice(self.data);
        Ok(())
    }
}

/// A fixed-capacity builder for an options area (at most 252 bytes, on the
/// stack, no allocation).
///
/// ```
/// use geneve::wire::OptionList;
/// let mut opts = OptionList::new();
/// opts.push(0x0102, 0x80 | 0x03, &[0xde, 0xad, 0xbe, 0xef]).unwrap();
/// assert_eq!(opts.as_bytes().len(), 8);
/// assert!(opts.critical());
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OptionList {
    buf: [u8; MAX_OPTIONS_LEN],
    len: usize,
    critical: bool,
}

impl Default for OptionList {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for OptionList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list()
            .entries(
                OptionIter::new(self.as_bytes())
                    .flatten()
                    .map(|o| OptionRepr::parse(&o)),
            )
            .finish()
    }
}

impl OptionList {
    /// An empty list.
    pub const fn new() -> Self {
        OptionList {
            buf: [0; MAX_OPTIONS_LEN],
            len: 0,
            critical: false,
        }
    }

    /// Builds a list from an already encoded options area.
    ///
    /// # Errors
    /// As [`check_options`].
    pub fn from_bytes(options: &[u8]) -> Result<Self, Error> {
        let critical = check_options(options)?;
        let mut l = Self::new();
        l.buf[..options.len()].copy_from_slice(options);
        l.len = options.len();
        l.critical = critical;
        Ok(l)
    }

    /// Appends an option.
    ///
    /// # Errors
    /// [`Error::BadOption`] if `data` is not a multiple of 4 bytes or longer
    /// than 124; [`Error::OptionsTooLong`] if the area would exceed 252
    /// bytes. The list is unchanged on error.
    pub fn push(&mut self, class: u16, option_type: u8, data: &[u8]) -> Result<&mut Self, Error> {
        let r = OptionRepr {
            class,
            option_type,
            data,
        };
        if data.len() % 4 != 0 || data.len() > MAX_OPTION_DATA_LEN {
            return Err(Error::BadOption);
        }
        if self.len + r.buffer_len() > MAX_OPTIONS_LEN {
            return Err(Error::OptionsTooLong);
        }
        r.emit(&mut self.buf[self.len..])?;
        self.len += r.buffer_len();
        self.critical |= r.critical();
        Ok(self)
    }

    /// The encoded options area.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Whether any option has the critical bit (the header's C bit).
    pub const fn critical(&self) -> bool {
        self.critical
    }

    /// Length of the area in bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Version 0, Opt Len 3 (12 bytes), C set, protocol 0x6558, VNI 0x123456,
    // then option class 0x0102 type 0x83 (critical) length 2 words of data.
    static PACKET_BYTES: [u8; 24] = [
        0x03, 0x40, 0x65, 0x58, 0x12, 0x34, 0x56, 0x00, //
        0x01, 0x02, 0x83, 0x02, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, //
        0xaa, 0xbb, 0xcc, 0xdd,
    ];
    static OPTIONS_BYTES: [u8; 12] = [
        0x01, 0x02, 0x83, 0x02, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04,
    ];
    static PAYLOAD_BYTES: [u8; 4] = [0xaa, 0xbb, 0xcc, 0xdd];

    fn packet_repr() -> Repr<'static> {
        Repr {
            control: false,
            critical: true,
            protocol_type: ETHERTYPE_TEB,
            vni: 0x12_3456,
            options: &OPTIONS_BYTES,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.opt_len(), 3);
        assert_eq!(p.options_len(), 12);
        assert_eq!(p.header_len(), 20);
        assert!(!p.control());
        assert!(p.critical());
        assert_eq!(p.reserved_flags(), 0);
        assert_eq!(p.protocol_type(), 0x6558);
        assert_eq!(p.vni(), 0x12_3456);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.options(), &OPTIONS_BYTES[..]);
        assert_eq!(p.payload(), &PAYLOAD_BYTES[..]);
        let opts: Vec<_> = p.options_iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(opts.len(), 1);
        assert_eq!(opts[0].class(), 0x0102);
        assert_eq!(opts[0].option_type(), 0x83);
        assert!(opts[0].critical());
        assert_eq!(opts[0].reserved(), 0);
        assert_eq!(opts[0].data_len(), 8);
        assert_eq!(opts[0].data(), &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]);
    }

    #[test]
    fn test_construct() {
        let mut bytes = vec![0xa5; 24];
        let mut p = Packet::new_unchecked(&mut bytes);
        p.set_version(0);
        p.set_opt_len(3);
        p.set_control(false);
        p.set_critical(true);
        p.set_reserved_flags(0);
        p.set_protocol_type(0x6558);
        p.set_vni(0x12_3456);
        p.set_reserved(0);
        {
            let opts = p.options_mut();
            let mut o = GeneveOption::new_unchecked(&mut opts[..]);
            o.set_class(0x0102);
            o.set_option_type(0x83);
            o.set_data_len(8);
            o.data_mut()
                .copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]);
        }
        p.payload_mut().copy_from_slice(&PAYLOAD_BYTES);
        assert_eq!(&bytes[..], &PACKET_BYTES[..]);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), packet_repr());
    }

    #[test]
    fn test_emit() {
        let r = packet_repr();
        let mut bytes = vec![0xa5; r.buffer_len() + PAYLOAD_BYTES.len()];
        let mut p = Packet::new_unchecked(&mut bytes);
        r.emit(&mut p).unwrap();
        p.payload_mut().copy_from_slice(&PAYLOAD_BYTES);
        assert_eq!(&bytes[..], &PACKET_BYTES[..]);
    }

    #[test]
    fn option_list_builds_fixture_options() {
        let mut l = OptionList::new();
        l.push(0x0102, 0x83, &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4])
            .unwrap();
        assert_eq!(l.as_bytes(), &OPTIONS_BYTES[..]);
        assert!(l.critical());
        assert_eq!(OptionList::from_bytes(&OPTIONS_BYTES).unwrap(), l);
    }

    #[test]
    fn truncated_and_bad_version() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..7]).unwrap_err(),
            Error::Truncated
        );
        // Opt Len says 12 bytes but only 11 present.
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut b = PACKET_BYTES;
        b[0] |= 0x40;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadVersion);
    }

    #[test]
    fn option_overrun_is_bad_option() {
        let mut b = PACKET_BYTES;
        b[11] = 0x03; // option claims 12 bytes of data, area holds 8
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadOption);
        let items: Vec<_> = p.options_iter().collect();
        assert_eq!(items, vec![Err(Error::BadOption)]);
    }

    #[test]
    fn option_limits() {
        let mut l = OptionList::new();
        assert_eq!(l.push(1, 1, &[0; 3]).unwrap_err(), Error::BadOption);
        assert_eq!(l.push(1, 1, &[0; 128]).unwrap_err(), Error::BadOption);
        l.push(1, 1, &[0; 124]).unwrap();
        l.push(1, 2, &[0; 120]).unwrap();
        assert_eq!(l.len(), 252);
        assert_eq!(l.push(1, 3, &[]).unwrap_err(), Error::OptionsTooLong);
        assert_eq!(l.len(), 252);
        let r = Repr {
            control: false,
            critical: false,
            protocol_type: 0,
            vni: MAX_VNI + 1,
            options: &[],
        };
        let mut buf = [0u8; 8];
        assert_eq!(
            r.emit(&mut Packet::new_unchecked(&mut buf[..]))
                .unwrap_err(),
            Error::BadVni
        );
    }
}

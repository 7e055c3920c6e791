//! The lexical syntax shared by OVN's match and action languages
//! (OVN 23.03 `lib/lex.c`, `include/ovn/lex.h`).
//!
//! Tokens are identifiers (which may contain dots: `ip4.src`), quoted
//! strings with JSON escapes, integers in decimal, hexadecimal, IPv4, IPv6
//! or Ethernet form with an optional `/mask` or `/prefix`, `$address_set`,
//! `@port_group`, `^template` and the operators
//! `( ) { } [ ] == != < <= > >= ! && || .. , ; = <-> -- : -`.
//! Comments are `/* ... */` (on one line) and `// ...`.
//!
//! A token that fails to lex becomes [`Token::Error`] carrying lex.c's
//! message; the parsers report that message in place of their own.
//!
//! Integers keep their low 128 bits (the widest OVN field is 128 bits) and
//! the count of their significant bits, up to lex.c's limit of 1024, so that
//! a wider constant is still rejected with expr.c's
//! "N-bit constant is not compatible with M-bit field" message.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::Error;

/// How an integer constant was written, which is how it prints back
/// (lex.h `enum lex_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntFormat {
    /// `12345`
    Decimal,
    /// `0x1234`
    Hexadecimal,
    /// `1.2.3.4`
    Ipv4,
    /// `::1`
    Ipv6,
    /// `01:23:45:67:89:ab`
    Ethernet,
}

impl IntFormat {
    /// Bits of the value a constant of this format can print in its own
    /// form (lex.c `lex_token_n_zeros()`); wider values print in hex.
    fn capacity(self) -> u32 {
        match self {
            IntFormat::Decimal => 64,
            IntFormat::Hexadecimal => 1024,
            IntFormat::Ipv4 => 32,
            IntFormat::Ipv6 => 128,
            IntFormat::Ethernet => 48,
        }
    }
}

/// An integer constant, possibly masked (lex.h `LEX_T_INTEGER` and
/// `LEX_T_MASKED_INTEGER`; expr.h `union expr_constant`).
///
/// Invariant: every 1-bit of `value` is also set in `mask`, if masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Int {
    /// The low 128 bits of the value.
    pub value: u128,
    /// The low 128 bits of the mask, if the constant was written `x/y`.
    pub mask: Option<u128>,
    /// How it was written.
    pub format: IntFormat,
    /// Significant bits of the mask if masked, else of the value, counted
    /// over the full constant (up to 1024 bits, so it may exceed 128).
    pub sig_bits: u16,
}

impl Int {
    /// An unmasked constant.
    pub fn new(value: u128, format: IntFormat) -> Int {
        Int {
            value,
            mask: None,
            format,
            sig_bits: bit_len(value),
        }
    }

    /// The constant as it lexes back from its printed form: the same value
    /// and mask, with the format it prints in (a hex `0x0` prints, and so
    /// reads back, as decimal `0`). Parsers store constants this way so
    /// that printing and parsing again gives an equal tree.
    pub fn normalized(&self) -> Int {
        match tokenize(&self.to_string()).as_slice() {
            [Token::Integer(j)] if j.value == self.value && j.mask == self.mask => Int {
                format: j.format,
                ..*self
            },
            _ => *self,
        }
    }

    /// The minimum width of a field that can hold this constant
    /// (expr.c `expr_constant_width()`).
    pub fn width(&self) -> u32 {
        if self.mask.is_some() {
            return self.sig_bits.into();
        }
        match self.format {
            IntFormat::Decimal | IntFormat::Hexadecimal => self.sig_bits.into(),
            IntFormat::Ipv4 => 32,
            IntFormat::Ipv6 => 128,
            IntFormat::Ethernet => 48,
        }
    }

    /// The format it prints in: its own, unless the value does not fit
    /// (lex.c `lex_token_get_format()`).
    fn print_format(&self) -> IntFormat {
        let cap = self.format.capacity();
        let fits = match self.mask {
            Some(_) => u32::from(bit_len(self.value)) <= cap && u32::from(self.sig_bits) <= cap,
            None => u32::from(self.sig_bits) <= cap,
        };
        if fits {
            self.format
        } else {
            IntFormat::Hexadecimal
        }
    }
}

impl fmt::Display for Int {
    /// Prints as lex.c `lex_token_format()` does, in a form that lexes back
    /// to the same constant (for constants of at most 128 bits).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let format = self.print_format();
        write_value(f, self.value, format)?;
        let Some(mask) = self.mask else { return Ok(()) };
        f.write_str("/")?;
        if format == IntFormat::Ipv4 && cidr_len(mask, 32).is_some() {
            write!(f, "{}", cidr_len(mask, 32).unwrap_or(0))
        } else if self.format == IntFormat::Ipv6 && cidr_len(mask, 128).is_some() {
            write!(f, "{}", cidr_len(mask, 128).unwrap_or(0))
        } else {
            write_value(f, mask, format)
        }
    }
}

fn write_value(f: &mut fmt::Formatter<'_>, v: u128, format: IntFormat) -> fmt::Result {
    match format {
        IntFormat::Decimal => write!(f, "{}", v as u64),
        IntFormat::Hexadecimal => f.write_str(&format_hex(v)),
        IntFormat::Ipv4 => write!(f, "{}", Ipv4Addr::from(v as u32)),
        IntFormat::Ipv6 => f.write_str(&format_ipv6(v)),
        IntFormat::Ethernet => f.write_str(&format_mac(v as u64)),
    }
}

/// If `mask` is a CIDR mask of a `width`-bit field (ones from the top,
/// then zeros), its prefix length (OVS `ip_is_cidr()`, `ipv6_is_cidr()`).
fn cidr_len(mask: u128, width: u32) -> Option<u32> {
    let full = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let inv = !mask & full;
    // `inv` must be of the form 0..01..1 within `width` bits.
    (mask & !full == 0 && inv & inv.wrapping_add(1) == 0).then(|| width - bit_len(inv) as u32)
}

/// Number of significant bits of `v` (0 for 0).
pub(crate) fn bit_len(v: u128) -> u16 {
    (128 - v.leading_zeros()) as u16
}

/// OVS `mf_format_subvalue()`: `0`, or hex with no leading zero byte.
pub(crate) fn format_hex(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// `01:23:45:67:89:ab`, from the low 48 bits.
pub(crate) fn format_mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// IPv6 text as glibc's `inet_ntop()` writes it, which is what OVN prints:
/// the leftmost longest run of two or more zero groups becomes `::`, and an
/// address whose first 96 bits are zero (other than `::` and `::1`), or
/// that is IPv4-mapped, ends in dotted quad.
pub(crate) fn format_ipv6(v: u128) -> String {
    let w: [u16; 8] = std::array::from_fn(|i| (v >> (112 - 16 * i)) as u16);
    let (mut best, mut cur) = ((0usize, 0usize), (0usize, 0usize));
    for (i, &x) in w.iter().enumerate() {
        if x == 0 {
            cur = if cur.1 == 0 {
                (i, 1)
            } else {
                (cur.0, cur.1 + 1)
            };
            if cur.1 > best.1 {
                best = cur;
            }
        } else {
            cur = (0, 0);
        }
    }
    let run = (best.1 >= 2).then_some(best);
    let mut s = String::new();
    let mut i = 0;
    while i < 8 {
        if let Some((base, len)) = run {
            if i == base {
                s.push(':');
                i += len;
                if i == 8 {
                    s.push(':');
                }
                continue;
            }
        }
        if i != 0 {
            s.push(':');
        }
        let tail = run.is_some_and(|(b, l)| b == 0 && (l == 6 || (l == 5 && w[5] == 0xffff)));
        if i == 6 && tail {
            s.push_str(&Ipv4Addr::from(v as u32).to_string());
            break;
        }
        s.push_str(&format!("{:x}", w[i]));
        i += 1;
    }
    s
}

/// Writes `s` as a JSON string, as OVS `json_string_escape()` does.
pub(crate) fn write_json_string(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\u{8}' => f.write_str("\\b")?,
            '\t' => f.write_str("\\t")?,
            '\n' => f.write_str("\\n")?,
            '\u{c}' => f.write_str("\\f")?,
            '\r' => f.write_str("\\r")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

/// One token (lex.h `struct lex_token`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// End of input.
    End,
    /// `foo`, `ip4.src`.
    Id(String),
    /// `"foo"`, unescaped.
    String(String),
    /// `12345`, `1.2.3.4/24`, `::1`, `00:11:22:33:44:55`.
    Integer(Int),
    /// `$name` (without the `$`): an address set.
    Macro(String),
    /// `@name` (without the `@`): a port group.
    PortGroup(String),
    /// `^name` (without the `^`): a template variable.
    Template(String),
    /// Invalid input, with lex.c's message.
    Error(String),
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `{`
    LCurly,
    /// `}`
    RCurly,
    /// `[`
    LSquare,
    /// `]`
    RSquare,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `!`
    LogNot,
    /// `&&`
    LogAnd,
    /// `||`
    LogOr,
    /// `..`
    Ellipsis,
    /// `,`
    Comma,
    /// `;`
    Semicolon,
    /// `=`
    Equals,
    /// `<->`
    Exchange,
    /// `--`
    Decrement,
    /// `:`
    Colon,
    /// `-`
    Hyphen,
}

impl fmt::Display for Token {
    /// lex.c `lex_token_format()`: every token but `End` and `Error` prints
    /// in a form that lexes back to the same token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bare = match self {
            Token::End => "$",
            Token::Id(s) => s,
            Token::String(s) => return write_json_string(f, s),
            Token::Integer(i) => return write!(f, "{i}"),
            Token::Macro(s) => return write!(f, "${s}"),
            Token::PortGroup(s) => return write!(f, "@{s}"),
            Token::Template(s) => return write!(f, "^{s}"),
            Token::Error(s) => {
                f.write_str("error(")?;
                write_json_string(f, s)?;
                return f.write_str(")");
            }
            Token::LParen => "(",
            Token::RParen => ")",
            Token::LCurly => "{",
            Token::RCurly => "}",
            Token::LSquare => "[",
            Token::RSquare => "]",
            Token::Eq => "==",
            Token::Ne => "!=",
            Token::Lt => "<",
            Token::Le => "<=",
            Token::Gt => ">",
            Token::Ge => ">=",
            Token::LogNot => "!",
            Token::LogAnd => "&&",
            Token::LogOr => "||",
            Token::Ellipsis => "..",
            Token::Comma => ",",
            Token::Semicolon => ";",
            Token::Equals => "=",
            Token::Exchange => "<->",
            Token::Decrement => "--",
            Token::Colon => ":",
            Token::Hyphen => "-",
        };
        f.write_str(bare)
    }
}

/// Lexes every token of `input` (until `End`), for tests and tools.
pub fn tokenize(input: &str) -> Vec<Token> {
    let mut lexer = Lexer::new(input);
    let mut out = Vec::new();
    while lexer.token != Token::End {
        out.push(lexer.token.clone());
        lexer.get();
    }
    out
}

mod scan;

/// A lexer with one token of lookahead and the error helpers lex.c gives
/// its parsers (`lexer_match()`, `lexer_force_match()`,
/// `lexer_syntax_error()`, ...).
#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a> {
    input: &'a str,
    /// Where the next token starts being scanned.
    next: usize,
    /// Start of the current token (after white space and comments).
    start: usize,
    /// The current token.
    pub token: Token,
}

impl<'a> Lexer<'a> {
    /// A lexer positioned on the first token of `input`. As in C, the
    /// input ends at a NUL character, if any.
    pub fn new(input: &'a str) -> Lexer<'a> {
        let input = input.find('\0').map_or(input, |n| &input[..n]);
        let mut lexer = Lexer {
            input,
            next: 0,
            start: 0,
            token: Token::End,
        };
        lexer.get();
        lexer
    }

    /// Advances to the next token.
    pub fn get(&mut self) {
        let (token, start, end) = scan::scan(self.input, self.next);
        self.token = token;
        self.start = start;
        self.next = end;
    }

    /// The token after the current one.
    pub fn lookahead(&self) -> Token {
        scan::scan(self.input, self.next).0
    }

    /// If the current token is `t`, advances and returns true.
    pub fn matches(&mut self, t: &Token) -> bool {
        let hit = self.token == *t;
        if hit {
            self.get();
        }
        hit
    }

    /// If the current token is identifier `id`, advances and returns true.
    pub fn match_id(&mut self, id: &str) -> bool {
        let hit = matches!(&self.token, Token::Id(s) if s == id);
        if hit {
            self.get();
        }
        hit
    }

    /// If the current token is the string `s`, advances and returns true.
    pub fn match_string(&mut self, s: &str) -> bool {
        let hit = matches!(&self.token, Token::String(x) if x == s);
        if hit {
            self.get();
        }
        hit
    }

    fn int_value(&self) -> Option<i32> {
        match &self.token {
            Token::Integer(i) if i.mask.is_none() && i.format == IntFormat::Decimal => {
                i32::try_from(i.value).ok()
            }
            _ => None,
        }
    }

    /// Consumes a small integer if there is one (lex.c `lexer_get_int()`).
    pub fn get_int(&mut self) -> Option<i32> {
        let v = self.int_value()?;
        self.get();
        Some(v)
    }

    /// Consumes a small integer or fails with "expecting small integer".
    pub fn force_int(&mut self) -> Result<i32, Error> {
        self.get_int()
            .ok_or_else(|| self.syntax_error(Some("expecting small integer")))
    }

    /// Consumes `t` or fails with "expecting `t'" (lex.c
    /// `lexer_force_match()`).
    pub fn force_match(&mut self, t: &Token) -> Result<(), Error> {
        if *t == Token::End {
            return self.force_end();
        }
        if self.matches(t) {
            Ok(())
        } else {
            Err(self.syntax_error(Some(&format!("expecting `{t}'"))))
        }
    }

    /// Fails unless at end of input.
    pub fn force_end(&self) -> Result<(), Error> {
        if self.token == Token::End {
            Ok(())
        } else {
            Err(self.syntax_error(Some("expecting end of input")))
        }
    }

    /// An error with `message`, unless the current token is itself a lexical
    /// error, whose message wins (lex.c `lexer_error()`).
    pub fn error(&self, message: impl Into<String>) -> Error {
        let message = match &self.token {
            Token::Error(e) => e.clone(),
            _ => message.into(),
        };
        Error::Parse {
            pos: self.start,
            message,
        }
    }

    /// ``Syntax error at `TOKEN' MESSAGE.`` (lex.c `lexer_syntax_error()`).
    pub fn syntax_error(&self, message: Option<&str>) -> Error {
        let mut s = String::from("Syntax error");
        if self.token == Token::End {
            s.push_str(" at end of input");
        } else {
            s.push_str(" at `");
            s.push_str(&self.input[self.start..self.next]);
            s.push('\'');
        }
        if let Some(m) = message {
            s.push(' ');
            s.push_str(m);
        }
        s.push('.');
        self.error(s)
    }
}

/// Parses an IPv6 address as `inet_pton(AF_INET6)` does.
pub(crate) fn parse_ipv6(s: &str) -> Option<u128> {
    s.parse::<Ipv6Addr>().ok().map(u128::from)
}

/// Parses an IPv4 address as `inet_pton(AF_INET)` does.
pub(crate) fn parse_ipv4(s: &str) -> Option<u32> {
    s.parse::<Ipv4Addr>().ok().map(u32::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_text_is_glibc_inet_ntop() {
        let cases = [
            ("::", "::"),
            ("::1", "::1"),
            ("::2:3", "::0.2.0.3"),
            ("::ffff:c000:280", "::ffff:192.0.2.128"),
            (
                "2001:db8:85a3::8a2e:370:7334",
                "2001:db8:85a3::8a2e:370:7334",
            ),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),
            ("ff02::1:ff00:0", "ff02::1:ff00:0"),
            ("1::", "1::"),
        ];
        for (input, want) in cases {
            let v = u128::from(input.parse::<Ipv6Addr>().unwrap());
            assert_eq!(format_ipv6(v), want, "{input}");
        }
    }

    #[test]
    fn cidr() {
        assert_eq!(cidr_len(0xffff_0000, 32), Some(16));
        assert_eq!(cidr_len(0, 32), Some(0));
        assert_eq!(cidr_len(0xffff_00ff, 32), None);
        assert_eq!(cidr_len(u128::MAX, 128), Some(128));
        assert_eq!(cidr_len(1, 128), None);
    }
}

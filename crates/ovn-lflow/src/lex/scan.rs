//! The scanner: one token from a byte position (lex.c `lex_token_parse()`).
//!
//! Token boundaries always fall on ASCII bytes or whole characters, so the
//! returned offsets are valid `str` indices.

use super::{bit_len, parse_ipv4, parse_ipv6, Int, IntFormat, Token};

/// Scans the token that starts at or after `pos` (skipping white space and
/// comments). Returns it with its start and end offsets.
pub(super) fn scan(input: &str, mut p: usize) -> (Token, usize, usize) {
    let b = input.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    loop {
        let start = p;
        let c = match b.get(p) {
            None => return (Token::End, p, p),
            Some(&c) => c,
        };
        let (token, end) = match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                p += 1;
                continue;
            }
            b'/' => match at(p + 1) {
                b'/' => {
                    p = input[p..].find('\n').map_or(b.len(), |i| p + i);
                    continue;
                }
                b'*' => match skip_block_comment(b, p + 2) {
                    Ok(next) => {
                        p = next;
                        continue;
                    }
                    Err(end) => (err("`/*' without matching `*/'."), end),
                },
                _ => (err("`/' is only valid as part of `//' or `/*'."), p + 1),
            },
            b'(' => (Token::LParen, p + 1),
            b')' => (Token::RParen, p + 1),
            b'{' => (Token::LCurly, p + 1),
            b'}' => (Token::RCurly, p + 1),
            b'[' => (Token::LSquare, p + 1),
            b']' => (Token::RSquare, p + 1),
            b'=' if at(p + 1) == b'=' => (Token::Eq, p + 2),
            b'=' => (Token::Equals, p + 1),
            b'!' if at(p + 1) == b'=' => (Token::Ne, p + 2),
            b'!' => (Token::LogNot, p + 1),
            b'&' if at(p + 1) == b'&' => (Token::LogAnd, p + 2),
            b'&' => (err("`&' is only valid as part of `&&'."), p + 1),
            b'|' if at(p + 1) == b'|' => (Token::LogOr, p + 2),
            b'|' => (err("`|' is only valid as part of `||'."), p + 1),
            b'<' if at(p + 1) == b'=' => (Token::Le, p + 2),
            b'<' if at(p + 1) == b'-' && at(p + 2) == b'>' => (Token::Exchange, p + 3),
            b'<' => (Token::Lt, p + 1),
            b'>' if at(p + 1) == b'=' => (Token::Ge, p + 2),
            b'>' => (Token::Gt, p + 1),
            b'.' if at(p + 1) == b'.' => (Token::Ellipsis, p + 2),
            b'.' => (err("`.' is only valid as part of `..' or a number."), p + 1),
            b',' => (Token::Comma, p + 1),
            b';' => (Token::Semicolon, p + 1),
            b'-' if at(p + 1) == b'-' => (Token::Decrement, p + 2),
            b'-' => (Token::Hyphen, p + 1),
            b'$' => scan_sigil(b, p, "$", Token::Macro),
            b'@' => scan_sigil(b, p, "@", Token::PortGroup),
            b'^' => scan_sigil(b, p, "^", Token::Template),
            b':' if at(p + 1) != b':' => (Token::Colon, p + 1),
            b':' | b'0'..=b'9' => scan_integer(input, p),
            b'"' => scan_string(input, p),
            b'a'..=b'f' | b'A'..=b'F' => {
                // An Ethernet or IPv6 address starts with hex digits and a
                // colon; an identifier never does.
                let n = b[p..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
                if at(p + n) == b':' {
                    scan_integer(input, p)
                } else {
                    scan_id(b, p, Token::Id)
                }
            }
            c if is_id1(c) => scan_id(b, p, Token::Id),
            c => invalid_char(input, p, c),
        };
        return (token, start, end);
    }
}

fn err(message: &str) -> Token {
    Token::Error(message.to_string())
}

fn is_id1(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'.'
}

fn is_idn(c: u8) -> bool {
    is_id1(c) || c.is_ascii_digit()
}

/// Skips a `/* ... */` comment body starting at `p`; a comment may not span
/// lines. On error, returns where the error token ends.
fn skip_block_comment(b: &[u8], mut p: usize) -> Result<usize, usize> {
    loop {
        match b.get(p) {
            Some(b'*') if b.get(p + 1) == Some(&b'/') => return Ok(p + 2),
            None | Some(b'\n') => return Err(p),
            Some(_) => p += 1,
        }
    }
}

fn scan_id(b: &[u8], p: usize, make: fn(String) -> Token) -> (Token, usize) {
    let n = 1 + b[p + 1..].iter().take_while(|&&c| is_idn(c)).count();
    let s = String::from_utf8_lossy(&b[p..p + n]).into_owned();
    (make(s), p + n)
}

fn scan_sigil(b: &[u8], p: usize, sigil: &str, make: fn(String) -> Token) -> (Token, usize) {
    if !b.get(p + 1).is_some_and(|&c| is_id1(c)) {
        return (
            err(&format!(
                "`{sigil}' must be followed by a valid identifier."
            )),
            p + 1,
        );
    }
    scan_id(b, p + 1, make)
}

fn invalid_char(input: &str, p: usize, c: u8) -> (Token, usize) {
    let len = input[p..].chars().next().map_or(1, char::len_utf8);
    let message = if c.is_ascii_graphic() || c == b' ' {
        format!("Invalid character `{}' in input.", c as char)
    } else {
        format!("Invalid byte 0x{c:02x} in input.")
    };
    (Token::Error(message), p + len)
}

/// A quoted string with JSON escapes (lex.c `lex_parse_string()`).
fn scan_string(input: &str, p: usize) -> (Token, usize) {
    let b = input.as_bytes();
    let start = p + 1;
    let mut q = start;
    loop {
        match b.get(q) {
            None => return (err("Input ends inside quoted string."), q),
            Some(b'"') => {
                let token = match json_unescape(&input[start..q]) {
                    Ok(s) => Token::String(s),
                    Err(e) => Token::Error(e),
                };
                return (token, q + 1);
            }
            Some(b'\\') => q += if q + 1 < b.len() { 2 } else { 1 },
            Some(_) => q += 1,
        }
    }
}

/// OVS `json_string_unescape()`.
fn json_unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => return Err("quoted string may not end with backslash".into()),
            Some(c @ ('"' | '\\' | '/')) => out.push(c),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => out.push(json_unicode(&mut chars)?),
            Some(c) => return Err(format!("bad escape \\{c}")),
        }
    }
    Ok(out)
}

fn json_4hex(chars: &mut std::str::Chars<'_>) -> Result<u32, String> {
    let hex: String = chars.by_ref().take(4).collect();
    if hex.chars().count() < 4 {
        return Err("quoted string ends within \\u escape".into());
    }
    let v = u32::from_str_radix(&hex, 16)
        .ok()
        .filter(|_| hex.bytes().all(|c| c.is_ascii_hexdigit()))
        .ok_or("malformed \\u escape")?;
    if v == 0 {
        return Err("null bytes not supported in quoted strings".into());
    }
    Ok(v)
}

fn json_unicode(chars: &mut std::str::Chars<'_>) -> Result<char, String> {
    let c0 = json_4hex(chars)?;
    if !(0xd800..0xdc00).contains(&c0) {
        // A lone trailing surrogate cannot be a Rust char: OVN would emit
        // invalid UTF-8; we refuse it.
        return char::from_u32(c0).ok_or_else(|| "malformed \\u escape".into());
    }
    if chars.next() != Some('\\') || chars.next() != Some('u') {
        return Err("malformed escaped surrogate pair".into());
    }
    let c1 = json_4hex(chars)?;
    if !(0xdc00..0xe000).contains(&c1) {
        return Err("second half of escaped surrogate pair is not trailing surrogate".into());
    }
    let c = 0x10000 + ((c0 - 0xd800) << 10) + (c1 - 0xdc00);
    char::from_u32(c).ok_or_else(|| "malformed \\u escape".into())
}

/// An integer with an optional mask (lex.c `lex_parse_integer()`).
fn scan_integer(input: &str, p: usize) -> (Token, usize) {
    let (token, end) = scan_integer_(input, p);
    match token {
        Ok(int) if input.as_bytes().get(end) == Some(&b'/') => scan_mask(input, end, int),
        Ok(int) => (Token::Integer(int), end),
        Err(e) => (Token::Error(e), end),
    }
}

/// The extent of an "integer": alphanumerics, colons until the first dot,
/// and dots not followed by a dot (so `1.2.3.4:80` and `1..2` split).
fn integer_extent(b: &[u8], p: usize) -> usize {
    let mut end = p;
    let mut saw_dot = false;
    loop {
        match b.get(end) {
            Some(c) if c.is_ascii_alphanumeric() => {}
            Some(b':') if !saw_dot => {}
            Some(b'.') if b.get(end + 1) != Some(&b'.') => saw_dot = true,
            _ => return end,
        }
        end += 1;
    }
}

fn scan_integer_(input: &str, p: usize) -> (Result<Int, String>, usize) {
    let b = input.as_bytes();
    let end = integer_extent(b, p);
    let s = &input[p..end];
    let result = if s.is_empty() {
        Err("Integer constant expected.".to_string())
    } else if let Some(mac) = parse_mac(s) {
        Ok(Int::new(mac.into(), IntFormat::Ethernet))
    } else if s.bytes().all(|c| c.is_ascii_digit()) {
        parse_decimal(s)
    } else if s.starts_with("0x") || s.starts_with("0X") {
        if s.len() > 2 {
            parse_hex(&s[2..])
        } else {
            Err(format!("Hex digits expected following 0{}.", &s[1..2]))
        }
    } else if s.len() < 46 {
        if let Some(v) = parse_ipv4(s) {
            Ok(Int::new(v.into(), IntFormat::Ipv4))
        } else if let Some(v) = parse_ipv6(s) {
            Ok(Int::new(v, IntFormat::Ipv6))
        } else {
            Err("Invalid numeric constant.".to_string())
        }
    } else {
        Err("Invalid numeric constant.".to_string())
    };
    (result, end)
}

/// `xx:xx:xx:xx:xx:xx`, exactly 17 characters.
fn parse_mac(s: &str) -> Option<u64> {
    if s.len() != 17 {
        return None;
    }
    let mut v = 0u64;
    for (i, part) in s.split(':').enumerate() {
        if i >= 6 || part.len() != 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        v = v << 8 | u64::from_str_radix(part, 16).ok()?;
    }
    Some(v)
}

fn parse_decimal(s: &str) -> Result<Int, String> {
    if s.starts_with('0') && s.len() > 1 {
        return Err("Decimal constants must not have leading zeros.".into());
    }
    match s.parse::<u64>() {
        Ok(v) => Ok(Int::new(v.into(), IntFormat::Decimal)),
        Err(_) => Err("Decimal constants must be less than 2**64.".into()),
    }
}

/// Hex digits, least significant first, as lex.c scans them: the low 128
/// bits are kept and the significant width counted up to 1024 bits.
fn parse_hex(digits: &str) -> Result<Int, String> {
    let mut value = 0u128;
    let mut sig_bits = 0u16;
    for (i, c) in digits.bytes().rev().enumerate() {
        let h = match (c as char).to_digit(16) {
            Some(h) => h,
            None => return Err("Invalid syntax in hexadecimal constant.".into()),
        };
        if h == 0 {
            continue;
        }
        if i / 2 >= 128 {
            return Err("Hexadecimal constant requires more than 1024 bits.".into());
        }
        if i < 32 {
            value |= u128::from(h) << (4 * i);
        }
        sig_bits = sig_bits.max(4 * i as u16 + bit_len(h.into()));
    }
    Ok(Int {
        value,
        mask: None,
        format: IntFormat::Hexadecimal,
        sig_bits,
    })
}

/// `value/mask` (lex.c `lex_parse_mask()`): the same format, or a decimal
/// prefix length after an IPv4 or IPv6 address, or a hex mask after 0.
fn scan_mask(input: &str, slash: usize, value: Int) -> (Token, usize) {
    let (mask, end) = scan_integer_(input, slash + 1);
    let mask = match mask {
        Ok(m) => m,
        Err(e) => return (Token::Error(e), end),
    };
    let prefix = mask.value as u64 as u32;
    let (format, m, sig_bits) = match (value.format, mask.format) {
        (a, b) if a == b => (a, mask.value, mask.sig_bits),
        (IntFormat::Ipv4, IntFormat::Decimal) if prefix <= 32 => {
            let m = prefix_mask(prefix, 32);
            (IntFormat::Ipv4, m, bit_len(m))
        }
        (IntFormat::Ipv6, IntFormat::Decimal) if prefix <= 128 => {
            let m = prefix_mask(prefix, 128);
            (IntFormat::Ipv6, m, bit_len(m))
        }
        (IntFormat::Decimal, IntFormat::Hexadecimal) if value.value as u64 == 0 => {
            (IntFormat::Hexadecimal, mask.value, mask.sig_bits)
        }
        _ => return (err("Value and mask have incompatible formats."), end),
    };
    let int = Int {
        value: value.value & m,
        mask: Some(m),
        format,
        sig_bits,
    };
    (Token::Integer(int), end)
}

/// The top `n` bits of a `width`-bit field (`1 <= width <= 128`).
fn prefix_mask(n: u32, width: u32) -> u128 {
    if n == 0 {
        return 0;
    }
    let full = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    full & !((1u128 << (width - n)) - 1)
}

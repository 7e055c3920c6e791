//! Actions that start with a field: assignments, exchanges and
//! `dst = function(...)` (actions.c `parse_set_action()`).

use super::*;
use crate::symtab::SymbolKind;

impl<'a, 's> Parser<'a, 's> {
    /// actions.c `parse_set_action()`.
    pub(super) fn parse_set_action(&mut self) -> R<Option<Action>> {
        let lhs = self.field()?;
        if self.lexer().matches(&Token::Exchange) {
            return Ok(Some(Action::Exchange(self.parse_assignment(true, lhs)?)));
        }
        if !self.lexer().matches(&Token::Equals) {
            return Err(self.syntax(Some("expecting `=' or `<->'")));
        }
        let Token::Id(id) = self.tok().clone() else {
            return self.parse_load(lhs).map(Some);
        };
        if self.p.lexer.lookahead() != Token::LParen {
            return Ok(Some(Action::Move(self.parse_assignment(false, lhs)?)));
        }
        self.parse_function(&id, lhs)
    }

    /// `dst = function(...)`, or an assignment if `id` names no function.
    fn parse_function(&mut self, id: &str, dst: FieldRef) -> R<Option<Action>> {
        use Action::*;
        let pp = self.pp;
        Ok(Some(match id {
            "select" => Select(self.parse_select(dst)?),
            "put_dhcp_opts" => {
                let p = self.parse_put_opts(&dst, pp.dhcp_opts, "DHCPv4")?;
                if !p.options.iter().any(|o| o.code == 0) {
                    return Err(self.err("put_dhcp_opts requires offerip to be specified."));
                }
                PutDhcpv4Opts(p)
            }
            "put_dhcpv6_opts" => {
                PutDhcpv6Opts(self.parse_put_opts(&dst, pp.dhcpv6_opts, "DHCPv6")?)
            }
            "dns_lookup" => DnsLookup(self.parse_result("dns_lookup", Some("udp"), dst)?),
            "put_nd_ra_opts" => PutNdRaOpts(self.parse_put_nd_ra_opts(&dst)?),
            "check_pkt_larger" => return self.parse_check_pkt_larger(dst),
            "lookup_arp" => LookupArp(self.parse_lookup_mac_bind(dst, 32)?),
            "lookup_nd" => LookupNd(self.parse_lookup_mac_bind(dst, 128)?),
            "lookup_arp_ip" => LookupArpIp(self.parse_lookup_mac_bind_ip(dst, 32)?),
            "lookup_nd_ip" => LookupNdIp(self.parse_lookup_mac_bind_ip(dst, 128)?),
            "chk_lb_hairpin" => ChkLbHairpin(self.parse_result(id, None, dst)?),
            "chk_lb_hairpin_reply" => ChkLbHairpinReply(self.parse_result(id, None, dst)?),
            "get_fdb" => self.parse_get_fdb(dst)?,
            "lookup_fdb" => self.parse_lookup_fdb(dst)?,
            "check_in_port_sec" => CheckInPortSec(self.parse_result(id, None, dst)?),
            "check_out_port_sec" => CheckOutPortSec(self.parse_result(id, None, dst)?),
            "chk_ecmp_nh_mac" => ChkEcmpNhMac(self.parse_result(id, None, dst)?),
            "chk_ecmp_nh" => ChkEcmpNh(self.parse_result(id, None, dst)?),
            "chk_lb_aff" => ChkLbAff(self.parse_result(id, None, dst)?),
            _ => Move(self.parse_assignment(false, dst)?),
        }))
    }

    /// actions.c `parse_LOAD()`: `field = constant`.
    fn parse_load(&mut self, dst: FieldRef) -> R<Action> {
        self.type_check(&dst, dst.n_bits, true)?;
        let value = match self.p.parse_single_constant(&dst)? {
            SetItem::Int(i) => Value::Int(i),
            SetItem::Str(s) => Value::Str(s),
            SetItem::AddressSet(_) | SetItem::PortGroup(_) => {
                return Err(self.syntax(Some("expecting constant")))
            }
        };
        let load = Load { dst, value };
        Ok(match load.dst.symbol.kind {
            SymbolKind::OvnField(_) => Action::OvnFieldLoad(load),
            _ => Action::Load(load),
        })
    }

    /// actions.c `parse_assignment_action()`: `lhs = rhs` or `lhs <-> rhs`.
    fn parse_assignment(&mut self, exchange: bool, lhs: FieldRef) -> R<Move> {
        let rhs = self.field()?;
        let (ls, rs) = (&lhs.symbol, &rhs.symbol);
        let message = if (ls.width != 0) != (rs.width != 0) {
            Some(if exchange {
                format!(
                    "Can't exchange {} field ({}) with {} field ({}).",
                    kind_name(&lhs),
                    ls.name,
                    kind_name(&rhs),
                    rs.name
                )
            } else {
                format!(
                    "Can't assign {} field ({}) to {} field ({}).",
                    kind_name(&rhs),
                    rs.name,
                    kind_name(&lhs),
                    ls.name
                )
            })
        } else if lhs.n_bits != rhs.n_bits {
            Some(if exchange {
                format!(
                    "Can't exchange {}-bit field with {}-bit field.",
                    lhs.n_bits, rhs.n_bits
                )
            } else {
                format!(
                    "Can't assign {}-bit value to {}-bit destination.",
                    rhs.n_bits, lhs.n_bits
                )
            })
        } else if lhs.n_bits == 0 && string_width(&lhs) != string_width(&rhs) {
            let what = if exchange { "exchange" } else { "assignment" };
            Some(format!(
                "String fields {} and {} are incompatible for {what}.",
                ls.name, rs.name
            ))
        } else {
            None
        };
        if let Some(m) = message {
            return Err(self.err(m));
        }
        self.type_check(&lhs, lhs.n_bits, true)?;
        self.type_check(&rhs, rhs.n_bits, exchange)?;
        Ok(Move { dst: lhs, src: rhs })
    }

    /// actions.c `parse_select_action()`.
    fn parse_select(&mut self, dst: FieldRef) -> R<Select> {
        self.type_check(&dst, dst.n_bits, true)?;
        if dst.n_bits < 16 {
            let m = format!(
                "cannot use {}-bit field {}[{}..{}] for \"select\", which requires at least 16 \
                 bits.",
                dst.n_bits,
                dst.symbol.name,
                dst.ofs,
                dst.ofs + dst.n_bits - 1
            );
            return Err(self.err(m));
        }
        self.not_last_table("select")?;
        self.lexer().get();
        self.lexer().get();
        let mut members = Vec::new();
        while !self.lexer().matches(&Token::RParen) {
            let id = self.uint16("id")?;
            let mut weight = 0;
            if self.lexer().matches(&Token::Equals) {
                weight = self.uint16("weight")?;
                if weight == 0 {
                    return Err(self.syntax(Some("weight can't be 0")));
                }
            }
            self.lexer().matches(&Token::Comma);
            members.push((id, if weight == 0 { 100 } else { weight }));
        }
        if members.len() <= 1 {
            return Err(self.syntax(Some("expecting at least 2 group members")));
        }
        Ok(Select {
            dst,
            members,
            table: self.pp.cur_ltable.wrapping_add(1),
        })
    }

    /// actions.c `parse_ovnact_result()`: `dst = name()` with a 1-bit dst.
    fn parse_result(&mut self, name: &str, prereq: Option<&str>, dst: FieldRef) -> R<FieldRef> {
        self.lexer().get();
        self.lexer().get();
        if !self.lexer().matches(&Token::RParen) {
            return Err(self.err(format!("{name} doesn't take any parameters")));
        }
        self.type_check(&dst, 1, true)?;
        if let Some(p) = prereq {
            self.add_prerequisite(p)?;
        }
        Ok(dst)
    }

    fn parse_check_pkt_larger(&mut self, dst: FieldRef) -> R<Option<Action>> {
        self.type_check(&dst, 1, true)?;
        self.lexer().get();
        self.expect(Token::LParen)?;
        let Some(len) = self.lexer().get_int() else {
            return Ok(None);
        };
        self.expect(Token::RParen)?;
        Ok(Some(Action::CheckPktLarger {
            dst,
            len: len as u16,
        }))
    }

    fn parse_lookup_mac_bind(&mut self, dst: FieldRef, width: u16) -> R<LookupMacBind> {
        self.type_check(&dst, 1, true)?;
        self.lexer().get();
        self.lexer().get();
        let port = self.action_field(0, false)?;
        self.expect(Token::Comma)?;
        let ip = self.action_field(width, false)?;
        self.expect(Token::Comma)?;
        let mac = self.action_field(48, false)?;
        self.expect(Token::RParen)?;
        Ok(LookupMacBind { dst, port, ip, mac })
    }

    fn parse_lookup_mac_bind_ip(&mut self, dst: FieldRef, width: u16) -> R<LookupMacBindIp> {
        self.type_check(&dst, 1, true)?;
        self.lexer().get();
        self.lexer().get();
        let port = self.action_field(0, false)?;
        self.expect(Token::Comma)?;
        let ip = self.action_field(width, false)?;
        self.expect(Token::RParen)?;
        Ok(LookupMacBindIp { dst, port, ip })
    }

    /// `dst = get_fdb(mac)`: a string field, or a writable 32-bit field.
    fn parse_get_fdb(&mut self, dst: FieldRef) -> R<Action> {
        self.lexer().get();
        self.lexer().get();
        if dst.n_bits != 0 {
            self.type_check(&dst, 32, true)?;
        }
        let mac = self.action_field(48, false)?;
        self.expect(Token::RParen)?;
        Ok(Action::GetFdb { dst, mac })
    }

    fn parse_lookup_fdb(&mut self, dst: FieldRef) -> R<Action> {
        self.lexer().get();
        self.lexer().get();
        self.type_check(&dst, 1, true)?;
        let port = self.action_field(0, false)?;
        self.expect(Token::Comma)?;
        let mac = self.action_field(48, false)?;
        self.expect(Token::RParen)?;
        Ok(Action::LookupFdb { dst, port, mac })
    }

    /// actions.c `parse_put_nd_ra_opts()`.
    fn parse_put_nd_ra_opts(&mut self, dst: &FieldRef) -> R<PutOpts> {
        let po = self.parse_put_opts(dst, self.pp.nd_ra_opts, "IPv6 ND RA")?;
        let (mut stateful, mut prefix, mut slla) = (false, false, false);
        for o in &po.options {
            let invalid = || format!("Invalid value for \"{}\" option", o.name);
            let [v] = o.value.values.as_slice() else {
                return Err(self.err(invalid()));
            };
            let (s, i) = match v {
                Value::Str(s) => (Some(s.as_str()), None),
                Value::Int(i) => (None, Some(i)),
            };
            let ok = match o.code {
                0 => {
                    stateful |= s == Some("dhcpv6_stateful");
                    matches!(s, Some("slaac" | "dhcpv6_stateful" | "dhcpv6_stateless"))
                }
                255 => matches!(s, Some("MEDIUM" | "HIGH" | "LOW")),
                1 => {
                    slla = true;
                    i.is_some_and(|i| i.format == IntFormat::Ethernet)
                }
                3 => {
                    prefix = true;
                    i.is_some_and(|i| i.format == IntFormat::Ipv6 && i.mask.is_some())
                }
                5 => i.is_some_and(|i| i.format == IntFormat::Decimal),
                25 => i.is_some_and(|i| i.format == IntFormat::Ipv6),
                24 | 31 => s.is_some(),
                _ => true,
            };
            if !ok {
                return Err(self.err(invalid()));
            }
        }
        if !slla {
            return Err(self.err("slla option not present"));
        }
        if !stateful && !prefix {
            return Err(self.err(
                "prefix option needs to be set when address mode is slaac/dhcpv6_stateless.",
            ));
        }
        self.add_prerequisite("ip6")?;
        Ok(po)
    }
}

/// The width of the base field behind a string symbol.
fn string_width(f: &FieldRef) -> u32 {
    f.symbol.base().map_or(0, |(b, _)| b.n_bits())
}

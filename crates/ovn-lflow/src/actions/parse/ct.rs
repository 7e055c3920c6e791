//! The connection tracking actions (actions.c `parse_CT_*()`,
//! `parse_ct_nat()`, `parse_ct_lb_action()`).

use super::*;

impl<'a, 's> Parser<'a, 's> {
    /// The `ct_*` actions that start with their keyword.
    pub(super) fn parse_ct_keyword(&mut self, id: &str) -> R<Action> {
        use Action::*;
        let next_table = self.pp.cur_ltable.wrapping_add(1);
        Ok(match id {
            "ct_next" => {
                self.not_last_table("ct_next")?;
                self.add_prerequisite("ip")?;
                CtNext(next_table)
            }
            "ct_commit" => self.parse_ct_commit()?,
            "ct_dnat" => CtDnat(self.parse_ct_nat(id)?),
            "ct_snat" => CtSnat(self.parse_ct_nat(id)?),
            "ct_dnat_in_czone" => CtDnatInCzone(self.parse_ct_nat(id)?),
            "ct_snat_in_czone" => CtSnatInCzone(self.parse_ct_nat(id)?),
            "ct_lb" => CtLb(self.parse_ct_lb()?),
            "ct_lb_mark" => CtLbMark(self.parse_ct_lb()?),
            "ct_clear" => CtClear,
            "ct_commit_nat" => {
                self.add_prerequisite("ip")?;
                self.not_last_table("ct_commit_related")?;
                CtCommitNat(next_table)
            }
            "ct_snat_to_vip" => CtSnatToVip,
            // Unreachable while KEYWORDS lists exactly these.
            _ => return Err(self.err(format!("Syntax error at `{id}' expecting action."))),
        })
    }

    /// actions.c `parse_CT_COMMIT()`.
    pub(super) fn parse_ct_commit(&mut self) -> R<Action> {
        match self.tok() {
            Token::LCurly => Ok(Action::CtCommitV2(
                self.parse_nested(Some("ip"), WR_CT_COMMIT)?,
            )),
            Token::LParen => self.parse_ct_commit_v1(),
            _ => {
                self.add_prerequisite("ip")?;
                Ok(Action::CtCommitV2(Actions::default()))
            }
        }
    }

    pub(super) fn parse_ct_commit_v1(&mut self) -> R<Action> {
        self.add_prerequisite("ip")?;
        let mut cc = CtCommitV1::default();
        if self.lexer().matches(&Token::LParen) {
            while !self.lexer().matches(&Token::RParen) {
                self.parse_ct_commit_v1_arg(&mut cc)?;
                self.lexer().matches(&Token::Comma);
            }
        }
        Ok(Action::CtCommitV1(cc))
    }

    pub(super) fn parse_ct_commit_v1_arg(&mut self, cc: &mut CtCommitV1) -> R<()> {
        let is_mark = if self.lexer().match_id("ct_mark") {
            true
        } else if self.lexer().match_id("ct_label") {
            false
        } else {
            return Err(self.syntax(None));
        };
        self.expect(Token::Equals)?;
        let Token::Integer(i) = *self.tok() else {
            return Err(self.syntax(Some("expecting integer")));
        };
        if is_mark {
            cc.mark = i.value as u64 as u32;
            cc.mark_mask = i.mask.map_or(u32::MAX, |m| m as u64 as u32);
        } else {
            cc.label = i.value;
            cc.label_mask = i.mask.unwrap_or(u128::MAX);
        }
        self.lexer().get();
        Ok(())
    }

    /// actions.c `parse_ct_nat()`.
    pub(super) fn parse_ct_nat(&mut self, name: &str) -> R<CtNat> {
        self.add_prerequisite("ip")?;
        self.not_last_table(name)?;
        let mut n = CtNat {
            ip: None,
            ports: None,
            table: self.pp.cur_ltable.wrapping_add(1),
        };
        if !self.lexer().matches(&Token::LParen) {
            return Ok(n);
        }
        n.ip = match self.unmasked_int() {
            Some(i) if i.format == IntFormat::Ipv4 => {
                Some(IpAddr::V4(Ipv4Addr::from(i.value as u32)))
            }
            Some(i) if i.format == IntFormat::Ipv6 => Some(IpAddr::V6(Ipv6Addr::from(i.value))),
            _ => return Err(self.syntax(Some("expecting IPv4 or IPv6 address"))),
        };
        self.lexer().get();
        if self.lexer().matches(&Token::Comma) {
            let Some(lo) = self.decimal() else {
                return Err(self.syntax(Some("expecting Integer for port range")));
            };
            let lo = lo as u16;
            if lo == 0 {
                return Err(self.syntax(Some("range can't be 0")));
            }
            self.lexer().get();
            let mut hi = None;
            if self.lexer().matches(&Token::Hyphen) {
                let Some(h) = self.unmasked_int() else {
                    return Err(self.syntax(Some("expecting Integer for port range")));
                };
                let h = h.value as u16;
                if h <= lo {
                    return Err(self.syntax(Some("range high should be greater than range low")));
                }
                self.lexer().get();
                hi = Some(h);
            }
            n.ports = Some((lo, hi));
        }
        self.expect(Token::RParen)?;
        Ok(n)
    }

    /// actions.c `parse_ct_lb_action()`.
    pub(super) fn parse_ct_lb(&mut self) -> R<CtLb> {
        self.not_last_table("ct_lb")?;
        self.add_prerequisite("ip")?;
        let mut lb = CtLb {
            backends: Vec::new(),
            hash_fields: None,
            flag: CtLbFlag::None,
            table: self.pp.cur_ltable.wrapping_add(1),
        };
        if !self.lexer().matches(&Token::LParen) || self.lexer().matches(&Token::RParen) {
            return Ok(lb);
        }
        if !self.lexer().match_id("backends") {
            return Err(self.syntax(Some("expecting backends")));
        }
        self.expect(Token::Equals)?;
        while !self.lexer().matches(&Token::Semicolon) && !self.lexer().matches(&Token::RParen) {
            let b = self.parse_backend()?;
            self.lexer().matches(&Token::Comma);
            lb.backends.push(b);
        }
        if self.lexer().match_id("hash_fields") {
            if !self.lexer().matches(&Token::Equals) {
                return Err(self.syntax(Some("invalid hash_fields")));
            }
            let Token::String(s) = self.tok().clone() else {
                return Err(self.syntax(Some("invalid hash_fields")));
            };
            lb.hash_fields = Some(s);
            self.lexer().get();
            if !self.lexer().matches(&Token::Semicolon) {
                self.lexer().get();
            }
        }
        if self.lexer().match_id("skip_snat") {
            lb.flag = CtLbFlag::SkipSnat;
            self.lexer().get();
        } else if self.lexer().match_id("force_snat") {
            lb.flag = CtLbFlag::ForceSnat;
            self.lexer().get();
        }
        Ok(lb)
    }

    pub(super) fn parse_backend(&mut self) -> R<Backend> {
        if self.lexer().matches(&Token::LSquare) {
            let ip = match self.unmasked_int() {
                Some(i) if i.format == IntFormat::Ipv6 => IpAddr::V6(Ipv6Addr::from(i.value)),
                _ => return Err(self.syntax(Some("expecting IPv6 address"))),
            };
            self.lexer().get();
            if !self.lexer().matches(&Token::RSquare) {
                return Err(self.syntax(Some("no closing square bracket")));
            }
            let port = if self.lexer().matches(&Token::Colon) {
                self.uint16("port number")?
            } else {
                0
            };
            return Ok(Backend { ip, port });
        }
        let ip = match self.unmasked_int() {
            Some(i) if i.format == IntFormat::Ipv4 => IpAddr::V4(Ipv4Addr::from(i.value as u32)),
            Some(i) if i.format == IntFormat::Ipv6 => IpAddr::V6(Ipv6Addr::from(i.value)),
            _ => return Err(self.syntax(Some("expecting IP address"))),
        };
        self.lexer().get();
        let mut port = 0;
        if self.lexer().matches(&Token::Colon) {
            if ip.is_ipv6() {
                let m = "IPv6 address needs square brackets if port is included";
                return Err(self.syntax(Some(m)));
            }
            port = self.uint16("port number")?;
        }
        Ok(Backend { ip, port })
    }
}

//! Actions with arguments of their own: `log`, `set_meter`,
//! `bind_vport`, `fwd_group`, `commit_ecmp_nh`, `commit_lb_aff`, `sample`.

use super::*;

impl<'a, 's> Parser<'a, 's> {
    /// actions.c `parse_LOG()`.
    pub(super) fn parse_log(&mut self) -> R<Log> {
        let mut verdict = None;
        let mut log = Log {
            verdict: LogVerdict::Allow,
            severity: LogSeverity::Info,
            name: None,
            meter: None,
        };
        if self.lexer().matches(&Token::LParen) {
            while !self.lexer().matches(&Token::RParen) {
                self.parse_log_arg(&mut log, &mut verdict)?;
                self.lexer().matches(&Token::Comma);
            }
        }
        match verdict {
            Some(v) => Ok(Log { verdict: v, ..log }),
            None => Err(self.syntax(Some("expecting verdict"))),
        }
    }

    pub(super) fn parse_log_arg(
        &mut self,
        log: &mut Log,
        verdict: &mut Option<LogVerdict>,
    ) -> R<()> {
        if self.lexer().match_id("verdict") {
            self.expect(Token::Equals)?;
            *verdict = Some(if self.lexer().match_id("drop") {
                LogVerdict::Drop
            } else if self.lexer().match_id("reject") {
                LogVerdict::Reject
            } else if self.lexer().match_id("allow") {
                LogVerdict::Allow
            } else {
                return Err(self.syntax(Some("unknown verdict")));
            });
        } else if self.lexer().match_id("name") {
            self.expect(Token::Equals)?;
            let Token::String(s) = self.tok().clone() else {
                return Err(self.syntax(Some("expecting string")));
            };
            if s.len() >= 64 {
                return Err(self.syntax(Some("name must be shorter than 64 characters")));
            }
            log.name = Some(s);
            self.lexer().get();
        } else if self.lexer().match_id("severity") {
            self.expect(Token::Equals)?;
            let Token::Id(s) = self.tok().clone() else {
                return Err(self.syntax(Some("expecting severity")));
            };
            log.severity = match s.as_str() {
                "alert" => LogSeverity::Alert,
                "warning" => LogSeverity::Warning,
                "notice" => LogSeverity::Notice,
                "info" => LogSeverity::Info,
                "debug" => LogSeverity::Debug,
                _ => return Err(self.syntax(Some("unknown severity"))),
            };
            self.lexer().get();
        } else if self.lexer().match_id("meter") {
            self.expect(Token::Equals)?;
            let Token::String(s) = self.tok().clone() else {
                return Err(self.syntax(Some("expecting string")));
            };
            log.meter = Some(s);
            self.lexer().get();
        } else {
            return Err(self.syntax(None));
        }
        Ok(())
    }

    /// actions.c `parse_set_meter_action()`.
    pub(super) fn parse_set_meter(&mut self) -> R<Action> {
        self.expect(Token::LParen)?;
        let rate = self.decimal().unwrap_or(0);
        self.lexer().get();
        let mut burst = 0;
        if self.lexer().matches(&Token::Comma) {
            burst = self.decimal().unwrap_or(0);
            self.lexer().get();
        }
        self.expect(Token::RParen)?;
        if rate == 0 {
            return Err(self.err("Rate 0 for set_meter is not in valid."));
        }
        Ok(Action::SetMeter { rate, burst })
    }

    pub(super) fn parse_bind_vport(&mut self) -> R<Action> {
        self.expect(Token::LParen)?;
        let Token::String(vport) = self.tok().clone() else {
            return Err(self.syntax(Some("expecting port name string")));
        };
        self.lexer().get();
        self.expect(Token::Comma)?;
        let parent = self.action_field(0, false)?;
        self.expect(Token::RParen)?;
        Ok(Action::BindVport { vport, parent })
    }

    pub(super) fn parse_fwd_group(&mut self) -> R<FwdGroup> {
        let mut g = FwdGroup {
            liveness: false,
            child_ports: Vec::new(),
            table: self.pp.cur_ltable.wrapping_add(1),
        };
        if !self.lexer().matches(&Token::LParen) {
            return Ok(g);
        }
        if self.lexer().match_id("liveness") {
            self.expect(Token::Equals)?;
            g.liveness = self.parse_bool()?;
            self.expect(Token::Comma)?;
        }
        if self.lexer().match_id("childports") {
            self.expect(Token::Equals)?;
            while !self.lexer().matches(&Token::RParen) {
                let Token::String(p) = self.tok().clone() else {
                    return Err(self.syntax(Some("expecting logical switch port")));
                };
                g.child_ports.push(p);
                self.lexer().get();
                self.lexer().matches(&Token::Comma);
            }
        }
        Ok(g)
    }

    /// `true` or `false`, quoted or not.
    pub(super) fn parse_bool(&mut self) -> R<bool> {
        if self.lexer().match_string("true") || self.lexer().match_id("true") {
            Ok(true)
        } else if self.lexer().match_string("false") || self.lexer().match_id("false") {
            Ok(false)
        } else {
            Err(self.syntax(Some("expecting true or false")))
        }
    }

    pub(super) fn parse_proto(&mut self) -> R<u8> {
        for (name, p) in [("tcp", 6), ("udp", 17), ("sctp", 132)] {
            if self.lexer().match_id(name) {
                return Ok(p);
            }
        }
        Err(self.syntax(Some("invalid protocol")))
    }

    /// `name =` with actions.c's "invalid parameter" message.
    pub(super) fn param(&mut self, name: &str) -> R<()> {
        if !self.lexer().match_id(name) {
            return Err(self.syntax(Some("invalid parameter")));
        }
        self.expect(Token::Equals)
    }

    pub(super) fn parse_commit_ecmp_nh(&mut self) -> R<Action> {
        self.expect(Token::LParen)?;
        self.param("ipv6")?;
        let ipv6 = self.parse_bool()?;
        self.expect(Token::Comma)?;
        self.param("proto")?;
        let proto = self.parse_proto()?;
        self.expect(Token::RParen)?;
        Ok(Action::CommitEcmpNh { ipv6, proto })
    }

    /// A quoted `ip[:port]` or `[ip6][:port]` (ovn-util.c
    /// `ip_address_and_port_from_lb_key()`).
    pub(super) fn lb_key(&mut self) -> R<(IpAddr, u16)> {
        let key = match self.tok() {
            Token::String(s) => parse_host_port(s),
            _ => None,
        };
        key.ok_or_else(|| self.syntax(Some("invalid parameter")))
    }

    pub(super) fn parse_commit_lb_aff(&mut self) -> R<CommitLbAff> {
        self.expect(Token::LParen)?;
        self.param("vip")?;
        let (vip, vip_port) = self.lb_key()?;
        self.lexer().get();
        self.expect(Token::Comma)?;
        self.param("backend")?;
        let (backend, backend_port) = self.lb_key()?;
        if vip.is_ipv4() != backend.is_ipv4() {
            return Err(self.syntax(Some("invalid protocol family")));
        }
        self.lexer().get();
        self.expect(Token::Comma)?;
        let mut proto = 0;
        if vip_port != 0 {
            self.param("proto")?;
            proto = self.parse_proto()?;
            self.expect(Token::Comma)?;
        }
        self.param("timeout")?;
        let timeout = self.uint16("affinity timeout")?;
        self.expect(Token::RParen)?;
        Ok(CommitLbAff {
            vip,
            vip_port,
            backend,
            backend_port,
            proto,
            timeout,
        })
    }

    /// actions.c `parse_sample()`.
    pub(super) fn parse_sample(&mut self) -> R<Sample> {
        let mut s = Sample {
            probability: 0,
            obs_domain: 0,
            collector_set: 0,
            obs_point: 0,
            use_cookie: false,
        };
        if self.lexer().matches(&Token::LParen) {
            while !self.lexer().matches(&Token::RParen) {
                self.parse_sample_arg(&mut s)?;
                self.lexer().matches(&Token::Comma);
            }
        }
        if s.probability == 0 {
            return Err(self.err("probability must be greater than zero"));
        }
        Ok(s)
    }

    pub(super) fn parse_sample_arg(&mut self, s: &mut Sample) -> R<()> {
        if self.lexer().match_id("probability") {
            self.expect(Token::Equals)?;
            if self.decimal().is_some() {
                s.probability = self.uint16("probability")?;
            }
        } else if self.lexer().match_id("obs_point") {
            self.expect(Token::Equals)?;
            if matches!(self.tok(), Token::Macro(m) if m == "cookie") {
                s.use_cookie = true;
            } else if let Some(v) = self.decimal() {
                s.obs_point = v as u32;
            } else {
                return Err(self.syntax(Some("malformed sample observation_point_id")));
            }
            self.lexer().get();
        } else if self.lexer().match_id("obs_domain") {
            self.expect(Token::Equals)?;
            if let Some(v) = self.decimal() {
                let v = v as u32;
                if v > 255 {
                    return Err(self.syntax(Some("obs_domain must be 8-bit long")));
                }
                s.obs_domain = v as u8;
            }
            self.lexer().get();
        } else if self.lexer().match_id("collector_set") {
            self.expect(Token::Equals)?;
            if let Some(v) = self.decimal() {
                s.collector_set = v as u32;
            }
            self.lexer().get();
        } else {
            return Err(self.syntax(Some("unknown argument")));
        }
        Ok(())
    }
}

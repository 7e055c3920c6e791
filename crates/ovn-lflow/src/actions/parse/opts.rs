//! Options of `put_dhcp_opts`, `put_dhcpv6_opts`, `put_nd_ra_opts` and
//! `trigger_event` (actions.c `parse_gen_opt()` and its callers).

use super::*;

impl<'a, 's> Parser<'a, 's> {
    /// actions.c `parse_gen_opt()`.
    pub(super) fn parse_gen_opt(&mut self, table: &OptionTable, kind: &str) -> R<GenOption> {
        let Token::Id(name) = self.tok().clone() else {
            return Err(self.syntax(None));
        };
        let Some(def) = table.get(&name).cloned() else {
            return Err(self.syntax(Some(&format!("expecting {kind} option name"))));
        };
        self.lexer().get();
        self.expect(Token::Equals)?;
        let cs = self.p.parse_constant_set()?;
        let mut values: Vec<Value> = cs
            .items
            .into_iter()
            .map(|i| match i {
                SetItem::Str(s) => Value::Str(s),
                SetItem::Int(i) => Value::Int(i),
                SetItem::AddressSet(_) | SetItem::PortGroup(_) => {
                    unreachable!("sets are refused in actions")
                }
            })
            .collect();
        // Collected in place: the parse's growth slack (four values for one) would
        // stay with every DHCP option of every port's flows.
        values.shrink_to_fit();
        let value = ConstantSet {
            values,
            in_curlies: cs.in_curlies,
        };
        let is_str = matches!(value.values.first(), Some(Value::Str(_)));
        if def.ty != crate::dhcp::OptType::HostId {
            if def.ty.is_string() && !is_str {
                return Err(self.err(format!("{kind} option {name} requires string value.")));
            }
            if !def.ty.is_string() && is_str {
                return Err(self.err(format!("{kind} option {name} requires numeric value.")));
            }
        }
        Ok(GenOption {
            name: def.name,
            code: def.code,
            ty: def.ty,
            value,
        })
    }

    /// actions.c `parse_put_opts()`, after `dst =`.
    pub(super) fn parse_put_opts(
        &mut self,
        dst: &FieldRef,
        table: &OptionTable,
        kind: &str,
    ) -> R<PutOpts> {
        self.lexer().get();
        self.lexer().get();
        self.type_check(dst, 1, true)?;
        let mut options = Vec::new();
        while !self.lexer().matches(&Token::RParen) {
            options.push(self.parse_gen_opt(table, kind)?);
            self.lexer().matches(&Token::Comma);
        }
        options.shrink_to_fit();
        Ok(PutOpts {
            dst: dst.clone(),
            options,
        })
    }

    pub(super) fn parse_trigger_event(&mut self) -> R<TriggerEvent> {
        self.expect(Token::LParen)?;
        if !self.lexer().match_id("event") {
            return Err(self.syntax(Some("Expecting 'event' option")));
        }
        self.expect(Token::Equals)?;
        let event = match self.tok() {
            Token::String(s) if s.len() < 64 => s.clone(),
            _ => return Err(self.syntax(Some("Expecting string"))),
        };
        if event != "empty_lb_backends" {
            return Err(self.syntax(Some("Unknown event '-1'")));
        }
        self.lexer().get();
        self.lexer().matches(&Token::Comma);
        let mut options = Vec::new();
        while !self.lexer().matches(&Token::RParen) {
            options.push(self.parse_gen_opt(self.pp.event_opts, &event)?);
            self.lexer().matches(&Token::Comma);
        }
        self.validate_empty_lb_backends(&options)?;
        Ok(TriggerEvent { event, options })
    }

    pub(super) fn validate_empty_lb_backends(&self, options: &[GenOption]) -> R<()> {
        for o in options {
            let s = match o.value.values.as_slice() {
                [Value::Str(s)] => s,
                _ => return Err(self.err(format!("Invalid value for \"{}\" option", o.name))),
            };
            let m = match o.code {
                1 if parse_host_port(s).is_none() => format!("Invalid load balancer VIP '{s}'"),
                2 if !matches!(s.as_str(), "tcp" | "udp" | "sctp") => {
                    format!("Load balancer protocol '{s}' is not 'tcp', 'udp', or 'sctp'")
                }
                3 if !is_uuid(s) => format!("Load balancer '{s}' is not a UUID"),
                _ => continue,
            };
            return Err(self.err(m));
        }
        Ok(())
    }
}

/// `host[:port]` or `[ipv6][:port]`, numeric only (OVS
/// `inet_parse_active()` with no name resolution).
pub(crate) fn parse_host_port(s: &str) -> Option<(IpAddr, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        let port = match tail {
            "" => None,
            t => Some(t.strip_prefix(':')?),
        };
        (IpAddr::V6(h.parse().ok()?), port)
    } else if s.matches(':').count() == 1 {
        let (h, p) = s.split_once(':')?;
        (IpAddr::V4(h.parse().ok()?), Some(p))
    } else {
        (s.parse().ok()?, None)
    };
    let port = match port {
        None => 0,
        Some(p) if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
    };
    Some((host, port))
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (OVS `uuid_from_string()`).
fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

//! The control protocol's parsers on untrusted client bytes.
//!
//! Feeds the input, as one request line, to
//! [`parse_request_line`](vswitch::control::protocol::parse_request_line), the function
//! the control server calls on every line it reads; then feeds the text a request
//! carries (and the raw input, if it is UTF-8) to the parsers that the requests'
//! handlers run: the ACL rule syntax (`acl-add`), the port specs of every `add-port`
//! flag with the port-set checks that follow them, the Geneve tunnel spec and its
//! `opt=` syntax. Also parses the input as a reply line (`vswitchctl`'s side).
//!
//! Asserts: nothing panics; an accepted request serializes to a line that parses
//! back to the same request; an accepted ACL rule writes (`Display`) a line that
//! parses back to an equal rule and writes the same line again, and survives the
//! config file's TOML form; an accepted port or tunnel spec survives a round trip
//! through the config file's TOML form (`[[port]]`, `[[uplink]]`-as-port, `[[geneve]]`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vswitch::config::{parse_geneve_spec, parse_port, validate_ports, PortConfig, PortFlag};
use vswitch::control::protocol::{
    parse_request_line, ReplyLine, Request, RequestLine, MAX_REQUEST_BYTES, PROTOCOL_VERSION,
};
use vswitch::model::acl::AclRule;

/// Every flag a port spec may be written for.
const FLAGS: [PortFlag; 5] = [
    PortFlag::VhostUser,
    PortFlag::VhostUserClient,
    PortFlag::Uplink,
    PortFlag::Tap,
    PortFlag::Geneve,
];

/// An ACL rule in the one-line syntax, as `acl-add` takes it.
fn acl_rule(text: &str) {
    let Ok(rule) = text.parse::<AclRule>() else {
        return;
    };
    let line = rule.to_string();
    let again: AclRule = line
        .parse()
        .unwrap_or_else(|e| panic!("{text:?} parsed, but its Display {line:?} does not: {e}"));
    assert_eq!(again, rule, "{text:?} -> {line:?}");
    assert_eq!(again.to_string(), line);
    // The config file's form of the same rule.
    let t = toml::to_string(&rule).expect("an accepted rule serializes to TOML");
    let back: AclRule = toml::from_str(&t)
        .unwrap_or_else(|e| panic!("{text:?}: its TOML {t:?} does not parse back: {e}"));
    assert_eq!(back, rule, "{text:?} -> TOML {t:?}");
}

/// A port spec written for `flag`, as `add-port` takes it: parsed, then checked as a
/// set of one port (the checks `add-port` runs before opening anything).
fn port_spec(flag: PortFlag, spec: &str) {
    if flag == PortFlag::Geneve {
        geneve_spec(spec);
        return;
    }
    let Ok((field, port)) = parse_port(flag, spec) else {
        return;
    };
    assert!(field.starts_with(flag.flag()));
    let t = toml::to_string(&port).expect("a parsed port serializes to TOML");
    let back: PortConfig = toml::from_str(&t)
        .unwrap_or_else(|e| panic!("{flag:?} {spec:?}: its TOML {t:?} does not parse back: {e}"));
    assert_eq!(back, port, "{flag:?} {spec:?} -> TOML {t:?}");
    let _ = validate_ports(&[(field, port)]);
}

/// A tunnel endpoint spec (`add-port` with flag `geneve`) and its options.
fn geneve_spec(spec: &str) {
    let Ok(g) = parse_geneve_spec(spec) else {
        return;
    };
    for o in &g.options {
        if let Ok((_, _, data)) = vswitch::config::geneve::parse_option(o) {
            assert!(data.len() % 4 == 0 && data.len() <= 124, "{o:?}");
        }
    }
    let _ = g.overhead();
    let t = toml::to_string(&g).expect("a parsed tunnel serializes to TOML");
    let back: vswitch::config::GeneveConfig = toml::from_str(&t)
        .unwrap_or_else(|e| panic!("--geneve {spec:?}: its TOML {t:?} does not parse back: {e}"));
    assert_eq!(back, g, "--geneve {spec:?} -> TOML {t:?}");
}

fuzz_target!(|data: &[u8]| {
    // The reader never hands over more than this.
    if data.len() > MAX_REQUEST_BYTES {
        return;
    }
    if let Ok(req) = parse_request_line(data) {
        let line = serde_json::to_string(&RequestLine {
            version: PROTOCOL_VERSION,
            request: req.clone(),
        })
        .expect("a request serializes");
        assert!(
            !line.contains('\n'),
            "a request line must be one line: {line:?}"
        );
        assert_eq!(
            parse_request_line(line.as_bytes()).as_ref(),
            Ok(&req),
            "{line:?}"
        );
        match &req {
            Request::AclAdd { rule, .. } => acl_rule(rule),
            Request::AddPort { flag, spec } => port_spec(*flag, spec),
            _ => {}
        }
    }
    // vswitchctl's side: a reply line from the daemon.
    if let Ok(r) = serde_json::from_slice::<ReplyLine>(data) {
        let _ = serde_json::to_string(&r).expect("a reply serializes");
    }
    // The same parsers on the raw text, so they need not be reached through JSON.
    if let Ok(text) = std::str::from_utf8(data) {
        acl_rule(text);
        for flag in FLAGS {
            port_spec(flag, text);
        }
        let _ = vswitch::config::geneve::parse_option(text);
    }
});

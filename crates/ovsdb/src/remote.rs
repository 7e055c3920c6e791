//! Where a server listens: `unix:PATH` or `tcp:IP:PORT`, as ovsdb-server's
//! `--remote` and ovn-controller's `ovn-remote` spell active connections.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use crate::Error;

/// An OVSDB server to connect to.
///
/// Parsed from and displayed as `unix:PATH`, `tcp:IP:PORT` or
/// `tcp:[IPv6]:PORT` (ovsdb(7) "Connection Methods"; `ssl:` is not
/// supported).
///
/// ```
/// use ovsdb::Remote;
/// let r: Remote = "tcp:[::1]:6642".parse().unwrap();
/// assert_eq!(r.to_string(), "tcp:[::1]:6642");
/// assert!("tcp:localhost".parse::<Remote>().unwrap_err().to_string().contains("tcp:IP:PORT"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Remote {
    /// A Unix domain stream socket.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

const EXPECTED: &str = "unix:PATH, tcp:IP:PORT or tcp:[IPv6]:PORT";

impl FromStr for Remote {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let err = |expected| Error::ParseRemote {
            input: s.to_owned(),
            expected,
        };
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(err("a socket path after unix:"));
            }
            return Ok(Remote::Unix(PathBuf::from(path)));
        }
        let Some(addr) = s.strip_prefix("tcp:") else {
            return Err(err(EXPECTED));
        };
        if let Ok(sa) = addr.parse::<SocketAddr>() {
            return Ok(Remote::Tcp(sa));
        }
        // `tcp:IPv6:PORT` without brackets, as OVS also accepts: the port is
        // after the last colon.
        if let Some((ip, port)) = addr.rsplit_once(':') {
            if let (Ok(ip), Ok(port)) = (ip.parse::<IpAddr>(), port.parse::<u16>()) {
                return Ok(Remote::Tcp(SocketAddr::new(ip, port)));
            }
        }
        Err(err(
            "tcp:IP:PORT or tcp:[IPv6]:PORT with a numeric IP address and port",
        ))
    }
}

impl Remote {
    /// Whether a connection to it is probed for inactivity
    /// ([`crate::ClientConfig::inactivity_probe`]): over TCP, yes; over a Unix
    /// socket, no, as Open vSwitch's `stream_or_pstream_needs_probes` says. The
    /// peer on the same host closes the socket when it dies, and a local server
    /// busy for seconds (ovsdb-server sending a large update) is not dead.
    pub fn needs_probes(&self) -> bool {
        matches!(self, Remote::Tcp(_))
    }
}

impl fmt::Display for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Remote::Unix(p) => write!(f, "unix:{}", p.display()),
            Remote::Tcp(sa) => write!(f, "tcp:{sa}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        for s in [
            "unix:/run/ovn/ovnsb_db.sock",
            "tcp:127.0.0.1:6642",
            "tcp:[fe80::1]:6642",
        ] {
            assert_eq!(s.parse::<Remote>().unwrap().to_string(), s);
        }
        assert_eq!(
            "tcp:::1:6642".parse::<Remote>().unwrap().to_string(),
            "tcp:[::1]:6642"
        );
    }

    #[test]
    fn errors_name_what_was_expected() {
        for (s, want) in [
            ("ssl:1.2.3.4:6642", EXPECTED),
            ("unix:", "a socket path"),
            ("tcp:host:6642", "numeric IP"),
            ("tcp:1.2.3.4", "numeric IP"),
        ] {
            let e = s.parse::<Remote>().unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}

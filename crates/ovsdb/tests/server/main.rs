//! Integration tests against a real ovsdb-server (Open vSwitch 3.1),
//! started per test in a temporary directory. One test binary, so the
//! tests run in parallel.

mod support;

mod monitor;
mod property;
mod reconnect;
mod southbound;
mod transact;

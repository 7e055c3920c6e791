//! The global connection limit and the per-zone limits (Open vSwitch's
//! `ovs-appctl dpctl/ct-set-maxconns` and `ct-set-limits`).
//!
//! Counts are atomics read and written with `Relaxed` ordering: they
//! publish no data, and [`Limits::admit`] adds before it compares, so
//! racing commits can never push a count past its limit (one of them backs
//! out). A zone's count moves only with its own connections, so a zone at
//! its limit refuses only its own new connections.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::verdict::Refused;

/// Stored zone limit meaning "follow the default".
const FOLLOW_DEFAULT: u32 = u32::MAX;
/// Stored default meaning "no limit".
const UNLIMITED: u32 = u32::MAX;
const ZONES: usize = 1 << 16;

#[derive(Debug)]
pub(crate) struct Limits {
    max_connections: AtomicU32,
    total: AtomicU32,
    default_zone: AtomicU32,
    zone_limit: Box<[AtomicU32]>,
    zone_count: Box<[AtomicU32]>,
}

impl Limits {
    pub fn new(max_connections: u32, default_zone: Option<u32>) -> Limits {
        let zones = |v: u32| (0..ZONES).map(|_| AtomicU32::new(v)).collect::<Box<[_]>>();
        Limits {
            max_connections: AtomicU32::new(max_connections),
            total: AtomicU32::new(0),
            default_zone: AtomicU32::new(default_zone.unwrap_or(UNLIMITED)),
            zone_limit: zones(FOLLOW_DEFAULT),
            zone_count: zones(0),
        }
    }

    /// Counts one more connection in `zone`, or says which limit refuses it.
    pub fn admit(&self, zone: u16) -> Result<(), Refused> {
        let z = usize::from(zone);
        if self.zone_count[z].fetch_add(1, Relaxed) >= self.effective(zone) {
            self.zone_count[z].fetch_sub(1, Relaxed);
            return Err(Refused::ZoneFull);
        }
        if self.total.fetch_add(1, Relaxed) >= self.max_connections.load(Relaxed) {
            self.total.fetch_sub(1, Relaxed);
            self.zone_count[z].fetch_sub(1, Relaxed);
            return Err(Refused::TableFull);
        }
        Ok(())
    }

    /// Uncounts a removed connection.
    pub fn release(&self, zone: u16) {
        self.zone_count[usize::from(zone)].fetch_sub(1, Relaxed);
        self.total.fetch_sub(1, Relaxed);
    }

    fn effective(&self, zone: u16) -> u32 {
        match self.zone_limit[usize::from(zone)].load(Relaxed) {
            FOLLOW_DEFAULT => self.default_zone.load(Relaxed),
            n => n,
        }
    }

    pub fn zone_limit(&self, zone: u16) -> Option<u32> {
        match self.effective(zone) {
            UNLIMITED => None,
            n => Some(n),
        }
    }

    pub fn set_zone_limit(&self, zone: u16, limit: Option<u32>) {
        let v = limit.map_or(FOLLOW_DEFAULT, |n| n.min(u32::MAX - 1));
        self.zone_limit[usize::from(zone)].store(v, Relaxed);
    }

    pub fn set_default_zone_limit(&self, limit: Option<u32>) {
        self.default_zone.store(limit.unwrap_or(UNLIMITED), Relaxed);
    }

    pub fn default_zone_limit(&self) -> Option<u32> {
        match self.default_zone.load(Relaxed) {
            UNLIMITED => None,
            n => Some(n),
        }
    }

    pub fn set_max_connections(&self, n: u32) {
        self.max_connections.store(n, Relaxed);
    }

    pub fn max_connections(&self) -> u32 {
        self.max_connections.load(Relaxed)
    }

    pub fn total(&self) -> u32 {
        self.total.load(Relaxed)
    }

    #[inline]
    pub fn zone_count(&self, zone: u16) -> u32 {
        self.zone_count[usize::from(zone)].load(Relaxed)
    }

    /// Zones with connections, ascending.
    pub fn zones(&self) -> Vec<(u16, u32)> {
        (0..=u16::MAX)
            .filter_map(|z| Some((z, self.zone_count(z))).filter(|&(_, n)| n > 0))
            .collect()
    }

    /// Bytes of the per-zone arrays.
    pub fn bytes(&self) -> usize {
        2 * ZONES * core::mem::size_of::<AtomicU32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_limit_then_global_limit() {
        let l = Limits::new(3, Some(2));
        assert_eq!(l.admit(1), Ok(()));
        assert_eq!(l.admit(1), Ok(()));
        assert_eq!(l.admit(1), Err(Refused::ZoneFull));
        assert_eq!(l.admit(2), Ok(()));
        assert_eq!(l.admit(3), Err(Refused::TableFull));
        assert_eq!((l.zone_count(1), l.zone_count(3), l.total()), (2, 0, 3));
        l.release(1);
        assert_eq!(l.admit(3), Ok(()));
        l.set_zone_limit(1, Some(0));
        assert_eq!(l.zone_limit(1), Some(0));
        l.set_zone_limit(1, None);
        assert_eq!(l.zone_limit(1), Some(2));
        l.set_default_zone_limit(None);
        assert_eq!(l.zone_limit(1), None);
        assert_eq!(l.zones(), vec![(1, 1), (2, 1), (3, 1)]);
    }
}

//! What ethtool netlink does not carry on the kernels this crate supports,
//! read with the `SIOCETHTOOL` ioctl: the driver name (`ETHTOOL_GDRVINFO`,
//! what `ethtool -i` uses) and the rx flow hash fields (`ETHTOOL_GRXFH`,
//! what `ethtool -n IFACE rx-flow-hash udp4` uses).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `ETHTOOL_GDRVINFO` (`<linux/ethtool.h>`).
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
/// `ETHTOOL_BUSINFO_LEN`, and the length of the other string fields.
const FIELD_LEN: usize = 32;

/// `struct ethtool_drvinfo` (`<linux/ethtool.h>`), laid out as the kernel's.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; FIELD_LEN],
    version: [u8; FIELD_LEN],
    fw_version: [u8; FIELD_LEN],
    bus_info: [u8; FIELD_LEN],
    erom_version: [u8; FIELD_LEN],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `ETHTOOL_GRXFH` (`<linux/ethtool.h>`).
const ETHTOOL_GRXFH: u32 = 0x0000_0029;
/// `UDP_V4_FLOW`.
pub(crate) const UDP_V4_FLOW: u32 = 0x02;
/// `UDP_V6_FLOW`.
pub(crate) const UDP_V6_FLOW: u32 = 0x06;

/// The head of `struct ethtool_rxnfc` (`cmd`, `flow_type`, `data`) followed
/// by room for the rest of it (`fs`, `rule_cnt`: under 200 bytes on 64-bit
/// targets), so the kernel may copy the whole struct in or out.
#[repr(C)]
struct EthtoolRxnfc {
    cmd: u32,
    flow_type: u32,
    data: u64,
    rest: [u64; 32],
}

/// Runs one `SIOCETHTOOL` request on `ifname` with `data` as `ifr_data`.
///
/// # Safety
///
/// `data` must point to a live, exclusively borrowed buffer laid out as the
/// kernel's structure for the command in its first `u32`, at least as large
/// as the kernel reads or writes for that command.
unsafe fn ethtool_ioctl(ifname: &str, data: *mut libc::c_void) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments; the result is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = ifname.as_bytes();
    if name.len() >= ifr.ifr_name.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data.cast();
    // SAFETY: SIOCETHTOOL reads `ifr` (a NUL-terminated name, checked above)
    // and reads and writes the buffer behind `data`, which the caller
    // guarantees is valid for the command; `ifr` is exclusively borrowed.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The rx flow hash fields (`RXH_*` bits) of `flow_type` on `ifname`.
///
/// # Errors
///
/// The ioctl's errno; `EOPNOTSUPP` when the driver has no `get_rxnfc`.
pub(crate) fn rx_flow_hash(ifname: &str, flow_type: u32) -> io::Result<u64> {
    let mut nfc = EthtoolRxnfc {
        cmd: ETHTOOL_GRXFH,
        flow_type,
        data: 0,
        rest: [0; 32],
    };
    // SAFETY: `nfc` is an exclusively borrowed `struct ethtool_rxnfc` with
    // room to spare, live until the call returns.
    unsafe { ethtool_ioctl(ifname, (&mut nfc as *mut EthtoolRxnfc).cast())? };
    Ok(nfc.data)
}

/// The driver name of `ifname` (`ethtool_drvinfo.driver`).
///
/// # Errors
///
/// The ioctl's errno: `ENODEV` for no such interface, `EOPNOTSUPP` when the
/// device has no `get_drvinfo` (e.g. `lo`).
pub(crate) fn driver_name(ifname: &str) -> io::Result<String> {
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; FIELD_LEN],
        version: [0; FIELD_LEN],
        fw_version: [0; FIELD_LEN],
        bus_info: [0; FIELD_LEN],
        erom_version: [0; FIELD_LEN],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    // SAFETY: `info` is an exclusively borrowed `struct ethtool_drvinfo`,
    // live until the call returns.
    unsafe { ethtool_ioctl(ifname, (&mut info as *mut EthtoolDrvinfo).cast())? };
    let end = info
        .driver
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(FIELD_LEN);
    Ok(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

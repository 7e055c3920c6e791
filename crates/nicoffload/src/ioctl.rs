//! The one value ethtool netlink does not carry: the driver name, read with
//! the `SIOCETHTOOL` ioctl (`ETHTOOL_GDRVINFO`, what `ethtool -i` uses).

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

/// The driver name of `ifname` (`ethtool_drvinfo.driver`).
///
/// # Errors
///
/// The ioctl's errno: `ENODEV` for no such interface, `EOPNOTSUPP` when the
/// device has no `get_drvinfo` (e.g. `lo`).
pub(crate) fn driver_name(ifname: &str) -> io::Result<String> {
    // SAFETY: socket(2) with constant arguments; the result is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };

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
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = ifname.as_bytes();
    if name.len() >= ifr.ifr_name.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut info as *mut EthtoolDrvinfo).cast();
    // SAFETY: SIOCETHTOOL reads `ifr` (a NUL-terminated name, checked above,
    // and a pointer to `info`) and writes at most `size_of::<EthtoolDrvinfo>()`
    // bytes into `info`, which lives until after the call; both are
    // exclusively borrowed here.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let end = info
        .driver
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(FIELD_LEN);
    Ok(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

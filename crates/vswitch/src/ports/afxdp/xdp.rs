//! The XDP program of an AF_XDP uplink: an XSKMAP and a six-instruction program that
//! redirects every frame to the AF_XDP socket of its rx queue, loaded and attached
//! through Debian's libbpf (`libbpf1`, linked as `-lbpf`).
//!
//! The program is written here as BPF instructions rather than compiled from C, so no
//! BPF compiler or object file is involved (nothing to keep in step with a source). It is,
//! in C (`Documentation/networking/af_xdp.rst`, "XSKMAP / BPF_MAP_TYPE_XSKMAP"):
//!
//! ```c
//! SEC("xdp") int vswitch_xsk(struct xdp_md *ctx) {
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//!
//! `XDP_PASS` in the flags is the action when the map has no socket for the queue
//! (Linux ≥ 5.3): frames of queues without a socket go to the kernel stack.
//!
//! Attachment goes through netlink (`bpf_xdp_attach`), so a program survives a crash of
//! vswitchd; [`XdpProgram::attach`] therefore first detaches whatever program is on the
//! interface in either mode (a stale one of a crashed run) and logs its id.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `enum bpf_prog_type`: BPF_PROG_TYPE_XDP (include/uapi/linux/bpf.h).
const BPF_PROG_TYPE_XDP: c_int = 6;
/// `enum bpf_map_type`: BPF_MAP_TYPE_XSKMAP.
const BPF_MAP_TYPE_XSKMAP: c_int = 17;
/// `XDP_FLAGS_SKB_MODE` (include/uapi/linux/if_link.h).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `BPF_FUNC_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`.
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `BPF_F_XDP_HAS_FRAGS` (include/uapi/linux/bpf.h, Linux ≥ 5.18): the program accepts
/// multi-buffer frames (larger than one page), needed for AF_XDP's XDP_USE_SG.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// The leading fields of libbpf's `struct bpf_prog_load_opts` (bpf/bpf.h), up to
/// `prog_flags`. libbpf reads only the first `sz` bytes of an options struct, so a
/// caller may pass this prefix.
#[repr(C)]
struct ProgLoadOpts {
    sz: usize,
    attempts: c_int,
    expected_attach_type: c_int,
    prog_btf_fd: u32,
    prog_flags: u32,
}

/// `struct bpf_insn`: opcode, dst_reg:4 | src_reg:4, offset, immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

/// What an uplink that carries Geneve tunnel endpoints steers to its sockets: UDP to
/// a local endpoint's address and port, and 802.1Q-tagged frames when the uplink also
/// carries OVN provider networks; everything else (ARP, ND, ICMP, the host's own
/// traffic) goes to the kernel stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TepFilter {
    /// The IPv4 endpoint's address and UDP port.
    pub v4: Option<([u8; 4], u16)>,
    /// The IPv6 endpoint's address and UDP port.
    pub v6: Option<([u8; 16], u16)>,
    /// Steer every 802.1Q-tagged frame too (the uplink carries VLAN provider networks).
    pub vlan: bool,
}

impl TepFilter {
    /// The XDP filter of uplink port `uplink`: the addresses and ports of the tunnel
    /// endpoints on it, and its VLAN frames when it is `bridged` (carries OVN provider
    /// networks); None when it carries no endpoint of its own (none, or only endpoints
    /// behind a tap): every frame goes to vswitchd.
    pub fn of(
        teps: &[crate::config::GeneveConfig],
        uplink: &str,
        bridged: bool,
    ) -> Option<TepFilter> {
        let mut f = TepFilter {
            vlan: bridged,
            ..Default::default()
        };
        let mut any = false;
        // An endpoint behind a tap (`device`) leaves the uplink a switch port: every
        // frame comes to vswitchd.
        for g in teps
            .iter()
            .filter(|g| g.uplink == uplink && g.device.is_none())
        {
            any = true;
            match g.local {
                std::net::IpAddr::V4(a) => f.v4 = Some((a.octets(), g.port)),
                std::net::IpAddr::V6(a) => f.v6 = Some((a.octets(), g.port)),
            }
        }
        any.then_some(f)
    }
}

/// The program with a tunnel endpoint filter, in C (offsets of an untagged frame; a
/// frame the filter does not match, or too short for it, goes to the kernel):
///
/// ```c
/// if (VLAN && eth->h_proto == htons(ETH_P_8021Q))
///         return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// if (eth->h_proto == htons(ETH_P_IP) && data + 42 <= end && ip->version_ihl == 0x45
///     && ip->protocol == IPPROTO_UDP && !(ip->frag_off & htons(0x3fff))
///     && ip->daddr == LOCAL4 && udp->dest == htons(PORT4))
///         return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// if (eth->h_proto == htons(ETH_P_IPV6) && data + 62 <= end && ip6->nexthdr == IPPROTO_UDP
///     && ip6->daddr == LOCAL6 && udp->dest == htons(PORT6))
///         return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// return XDP_PASS;
/// ```
///
/// Loads from the packet are in host (little-endian) order, so the constants are the
/// frame's bytes read as little-endian integers.
fn tep_program(map_fd: i32, f: &TepFilter) -> Vec<BpfInsn> {
    let mut a = Asm::default();
    let le16 = |b: [u8; 2]| i32::from(u16::from_le_bytes(b));
    let le32 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i32;
    // r6 = ctx; r2 = data; r3 = data_end
    a.op(insn(0xbf, 6, 1, 0, 0));
    a.op(insn(0x61, 2, 1, 0, 0));
    a.op(insn(0x61, 3, 1, 4, 0));
    // if data + 14 > end: pass
    a.op(insn(0xbf, 4, 2, 0, 0));
    a.op(insn(0x07, 4, 0, 0, 14));
    a.jmp(insn(0x2d, 4, 3, 0, 0), "pass");
    a.op(insn(0x69, 5, 2, 12, 0));
    if f.vlan {
        a.jmp(insn(0x15, 5, 0, 0, le16([0x81, 0x00])), "redirect");
    }
    if let Some((ip, port)) = f.v4 {
        a.jmp(insn(0x55, 5, 0, 0, le16([0x08, 0x00])), "not4");
        a.op(insn(0xbf, 4, 2, 0, 0));
        a.op(insn(0x07, 4, 0, 0, 42));
        a.jmp(insn(0x2d, 4, 3, 0, 0), "pass");
        a.op(insn(0x71, 4, 2, 14, 0));
        a.jmp(insn(0x55, 4, 0, 0, 0x45), "pass");
        a.op(insn(0x71, 4, 2, 23, 0));
        a.jmp(insn(0x55, 4, 0, 0, 17), "pass");
        a.op(insn(0x69, 4, 2, 20, 0));
        a.op(insn(0x57, 4, 0, 0, le16([0x3f, 0xff])));
        a.jmp(insn(0x55, 4, 0, 0, 0), "pass");
        a.op(insn(0x61, 4, 2, 30, 0));
        a.jmp(insn(0x56, 4, 0, 0, le32(&ip)), "pass");
        a.op(insn(0x69, 4, 2, 36, 0));
        a.jmp(insn(0x55, 4, 0, 0, le16(port.to_be_bytes())), "pass");
        a.jmp(insn(0x05, 0, 0, 0, 0), "redirect");
        a.label("not4");
    }
    if let Some((ip, port)) = f.v6 {
        a.jmp(insn(0x55, 5, 0, 0, le16([0x86, 0xdd])), "pass");
        a.op(insn(0xbf, 4, 2, 0, 0));
        a.op(insn(0x07, 4, 0, 0, 62));
        a.jmp(insn(0x2d, 4, 3, 0, 0), "pass");
        a.op(insn(0x71, 4, 2, 20, 0));
        a.jmp(insn(0x55, 4, 0, 0, 17), "pass");
        for k in 0..4 {
            a.op(insn(0x61, 4, 2, 38 + 4 * k as i16, 0));
            a.jmp(insn(0x56, 4, 0, 0, le32(&ip[4 * k..])), "pass");
        }
        a.op(insn(0x69, 4, 2, 56, 0));
        a.jmp(insn(0x55, 4, 0, 0, le16(port.to_be_bytes())), "pass");
        // A match falls through to the redirect.
    } else {
        // Not IPv4, and no IPv6 endpoint (the verifier refuses unreachable code, so
        // this jump exists only when something reaches it).
        a.jmp(insn(0x05, 0, 0, 0, 0), "pass");
    }
    a.label("redirect");
    // r2 = ctx->rx_queue_index; r1 = &xsks; r3 = XDP_PASS; return redirect_map(...)
    a.op(insn(0x61, 2, 6, XDP_MD_RX_QUEUE_INDEX, 0));
    a.op(insn(0x18, 1, 1, 0, map_fd));
    a.op(insn(0, 0, 0, 0, 0));
    a.op(insn(0xb7, 3, 0, 0, XDP_PASS));
    a.op(insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    a.op(insn(0x95, 0, 0, 0, 0));
    a.label("pass");
    a.op(insn(0xb7, 0, 0, 0, XDP_PASS));
    a.op(insn(0x95, 0, 0, 0, 0));
    a.finish()
}

/// A few BPF instructions with forward jumps to labels, resolved at the end.
#[derive(Default)]
struct Asm {
    insns: Vec<BpfInsn>,
    labels: Vec<(&'static str, usize)>,
    fixups: Vec<(usize, &'static str)>,
}

impl Asm {
    fn op(&mut self, i: BpfInsn) {
        self.insns.push(i);
    }
    fn jmp(&mut self, i: BpfInsn, to: &'static str) {
        self.fixups.push((self.insns.len(), to));
        self.insns.push(i);
    }
    fn label(&mut self, name: &'static str) {
        self.labels.push((name, self.insns.len()));
    }
    fn finish(mut self) -> Vec<BpfInsn> {
        for (at, to) in self.fixups {
            let target = self
                .labels
                .iter()
                .find(|l| l.0 == to)
                .map(|l| l.1)
                .expect("every label is placed");
            // A jump's offset counts from the next instruction.
            self.insns[at].off = (target - at - 1) as i16;
        }
        self.insns
    }
}

/// The program, with the XSKMAP's fd patched into instruction 1 (`BPF_PSEUDO_MAP_FD`).
fn program(map_fd: i32) -> [BpfInsn; 6] {
    [
        // r2 = *(u32 *)(r1 + 16): ctx->rx_queue_index     (BPF_LDX | BPF_MEM | BPF_W)
        insn(0x61, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = &xsks                                       (BPF_LD | BPF_DW | BPF_IMM, 2 slots)
        insn(0x18, 1, 1, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS                                    (BPF_ALU64 | BPF_MOV | BPF_K)
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)                (BPF_JMP | BPF_CALL)
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // return r0                                        (BPF_JMP | BPF_EXIT)
        insn(0x95, 0, 0, 0, 0),
    ]
}

#[link(name = "bpf")]
extern "C" {
    fn bpf_map_create(
        map_type: c_int,
        map_name: *const c_char,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        opts: *const c_void,
    ) -> c_int;
    fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    fn bpf_map_delete_elem(fd: c_int, key: *const c_void) -> c_int;
    fn bpf_prog_load(
        prog_type: c_int,
        prog_name: *const c_char,
        license: *const c_char,
        insns: *const BpfInsn,
        insn_cnt: usize,
        opts: *const ProgLoadOpts,
    ) -> c_int;
    fn bpf_xdp_attach(ifindex: c_int, prog_fd: c_int, flags: u32, opts: *const c_void) -> c_int;
    fn bpf_xdp_detach(ifindex: c_int, flags: u32, opts: *const c_void) -> c_int;
    fn bpf_xdp_query_id(ifindex: c_int, flags: c_int, prog_id: *mut u32) -> c_int;
}

/// libbpf ≥ 1.0 returns `-errno` on failure.
fn check(rc: c_int) -> io::Result<c_int> {
    if rc < 0 {
        Err(io::Error::from_raw_os_error(-rc))
    } else {
        Ok(rc)
    }
}

/// Errors of loading and attaching the program.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// BPF_MAP_CREATE of the XSKMAP failed (EPERM: not root or no CAP_BPF).
    #[error("cannot create the XSKMAP: {0}")]
    CreateMap(io::Error),
    /// BPF_PROG_LOAD failed (the verifier refused it, or no permission).
    #[error("cannot load the XDP program: {0}")]
    LoadProgram(io::Error),
    /// Attaching to the interface failed (e.g. EOPNOTSUPP: no native XDP in the driver).
    #[error("cannot attach the XDP program in {mode} mode: {source}")]
    Attach {
        /// `native` or `generic`.
        mode: &'static str,
        /// Why.
        source: io::Error,
    },
    /// Inserting a socket into the XSKMAP failed.
    #[error("cannot insert the AF_XDP socket of queue {queue} into the XSKMAP: {source}")]
    MapUpdate {
        /// Rx queue.
        queue: u32,
        /// Why.
        source: io::Error,
    },
}

/// The XSKMAP and program of one uplink, attached to its interface while this lives.
#[derive(Debug)]
pub struct XdpProgram {
    ifindex: i32,
    flags: u32,
    map: OwnedFd,
    prog: OwnedFd,
    attached: bool,
    /// The program was loaded with `BPF_F_XDP_HAS_FRAGS` (multi-buffer frames reach it).
    pub frags: bool,
}

impl XdpProgram {
    /// Creates the XSKMAP (`max_entries` queues), loads the program (with `filter`, the
    /// tunnel endpoints' filter, if any), detaches any program already on `ifindex`
    /// (logging its id), and attaches ours with `flags` ([`XDP_FLAGS_DRV_MODE`] or
    /// [`XDP_FLAGS_SKB_MODE`]).
    pub fn attach(
        ifindex: u32,
        max_entries: u32,
        flags: u32,
        filter: Option<&TepFilter>,
    ) -> Result<Self, XdpError> {
        let name = c"vswitch_xsks";
        // SAFETY: plain libbpf call; the name is NUL-terminated, opts may be NULL.
        let rc = unsafe {
            bpf_map_create(
                BPF_MAP_TYPE_XSKMAP,
                name.as_ptr(),
                4,
                4,
                max_entries.max(1),
                std::ptr::null(),
            )
        };
        let map = check(rc).map_err(XdpError::CreateMap)?;
        // SAFETY: `map` is a new fd that nothing else owns.
        let map = unsafe { OwnedFd::from_raw_fd(map) };
        let (prog, frags) = load(map.as_raw_fd(), filter)?;
        let ifindex = ifindex as i32;
        for (f, mode) in [
            (XDP_FLAGS_SKB_MODE, "generic"),
            (XDP_FLAGS_DRV_MODE, "native"),
        ] {
            let mut id = 0u32;
            // SAFETY: `id` is a valid u32 to write.
            let rc = unsafe { bpf_xdp_query_id(ifindex, f as c_int, &mut id) };
            if rc == 0 && id != 0 {
                tracing::warn!(
                    ifindex,
                    prog_id = id,
                    mode,
                    "replacing an XDP program already attached (a stale one of a crashed run?)"
                );
                // SAFETY: plain libbpf call; opts may be NULL.
                unsafe { bpf_xdp_detach(ifindex, f, std::ptr::null()) };
            }
        }
        attach_fd(ifindex, &prog, flags)?;
        Ok(XdpProgram {
            ifindex,
            flags,
            map,
            prog,
            attached: true,
            frags,
        })
    }

    /// Replaces the attached program by one with `filter` (or none: every frame to the
    /// sockets), keeping the XSKMAP and its sockets.
    ///
    /// # Errors
    /// Loading or attaching the new program failed; the old one stays.
    pub fn set_filter(&mut self, filter: Option<&TepFilter>) -> Result<(), XdpError> {
        let (prog, _) = load(self.map.as_raw_fd(), filter)?;
        attach_fd(self.ifindex, &prog, self.flags)?;
        self.prog = prog;
        Ok(())
    }
}

/// Attaches program `prog` to `ifindex` with `flags` (replacing ours if attached).
fn attach_fd(ifindex: i32, prog: &OwnedFd, flags: u32) -> Result<(), XdpError> {
    // SAFETY: plain libbpf call with an fd we own; opts may be NULL.
    let rc = unsafe { bpf_xdp_attach(ifindex, prog.as_raw_fd(), flags, std::ptr::null()) };
    check(rc).map(|_| ()).map_err(|source| XdpError::Attach {
        mode: if flags & XDP_FLAGS_SKB_MODE != 0 {
            "generic"
        } else {
            "native"
        },
        source,
    })
}

/// Loads the program for XSKMAP `map_fd` (with `filter` if any); returns it and whether
/// it takes multi-buffer frames.
fn load(map_fd: i32, filter: Option<&TepFilter>) -> Result<(OwnedFd, bool), XdpError> {
    {
        let insns = match filter {
            Some(f) => tep_program(map_fd, f),
            None => program(map_fd).to_vec(),
        };
        let license: &CStr = c"GPL";
        let load = |prog_flags: u32| {
            let opts = ProgLoadOpts {
                sz: std::mem::size_of::<ProgLoadOpts>(),
                attempts: 0,
                expected_attach_type: 0,
                prog_btf_fd: 0,
                prog_flags,
            };
            // SAFETY: `insns` is a valid array of insns.len() instructions; the strings
            // are NUL-terminated; `opts` is a valid prefix of bpf_prog_load_opts whose
            // `sz` says how long it is.
            check(unsafe {
                bpf_prog_load(
                    BPF_PROG_TYPE_XDP,
                    c"vswitch_xsk".as_ptr(),
                    license.as_ptr(),
                    insns.as_ptr(),
                    insns.len(),
                    &opts,
                )
            })
        };
        // Multi-buffer first; a kernel older than 5.18 refuses the flag (EINVAL).
        let (rc, frags) = match load(BPF_F_XDP_HAS_FRAGS) {
            Ok(fd) => (Ok(fd), true),
            Err(e) => {
                tracing::info!(error = %e, "XDP program without multi-buffer support (BPF_F_XDP_HAS_FRAGS refused)");
                (load(0), false)
            }
        };
        let prog = rc.map_err(XdpError::LoadProgram)?;
        // SAFETY: `prog` is a new fd that nothing else owns.
        Ok((unsafe { OwnedFd::from_raw_fd(prog) }, frags))
    }
}

impl XdpProgram {
    /// Points rx queue `queue` at the AF_XDP socket `xsk_fd`.
    pub fn insert(&self, queue: u32, xsk_fd: i32) -> Result<(), XdpError> {
        // SAFETY: key and value point at valid u32/i32 values of the map's sizes.
        let rc = unsafe {
            bpf_map_update_elem(
                self.map.as_raw_fd(),
                (&queue as *const u32).cast(),
                (&xsk_fd as *const i32).cast(),
                0,
            )
        };
        check(rc)
            .map(|_| ())
            .map_err(|source| XdpError::MapUpdate { queue, source })
    }

    /// Removes rx queue `queue`'s socket from the map (its frames go to the stack).
    pub fn remove(&self, queue: u32) {
        // SAFETY: the key points at a valid u32.
        unsafe { bpf_map_delete_elem(self.map.as_raw_fd(), (&queue as *const u32).cast()) };
    }

    /// Detaches the program if ours is still the attached one. Idempotent.
    pub fn detach(&mut self) {
        if !self.attached {
            return;
        }
        self.attached = false;
        let _ = &self.prog;
        // SAFETY: plain libbpf call; opts may be NULL.
        let rc = unsafe { bpf_xdp_detach(self.ifindex, self.flags, std::ptr::null()) };
        if rc < 0 {
            tracing::warn!(ifindex = self.ifindex, error = %io::Error::from_raw_os_error(-rc), "XDP detach failed");
        }
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        self.detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump of a filter program lands inside the program, and no instruction is
    /// unreachable (the verifier refuses both).
    #[test]
    fn tep_programs_are_well_formed() {
        let f4 = TepFilter {
            v4: Some(([198, 51, 100, 1], 6081)),
            ..TepFilter::default()
        };
        let f6 = TepFilter {
            v4: None,
            vlan: false,
            v6: Some((
                [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                6081,
            )),
        };
        let f46 = TepFilter {
            v4: f4.v4,
            v6: f6.v6,
            vlan: false,
        };
        let vlan = TepFilter { vlan: true, ..f46 };
        for f in [f4, f6, f46, vlan] {
            let p = tep_program(9, &f);
            let mut reached = vec![false; p.len()];
            let mut todo = vec![0usize];
            while let Some(i) = todo.pop() {
                if i >= p.len() || reached[i] {
                    continue;
                }
                reached[i] = true;
                let op = p[i].code;
                match op {
                    0x95 => {}
                    0x05 => todo.push((i as i64 + 1 + i64::from(p[i].off)) as usize),
                    0x18 => todo.push(i + 2),
                    _ if op & 0x07 == 0x05 || op & 0x07 == 0x06 => {
                        if op != 0x85 {
                            let t = i as i64 + 1 + i64::from(p[i].off);
                            assert!((0..p.len() as i64).contains(&t), "{f:?}: jump out at {i}");
                            todo.push(t as usize);
                        }
                        todo.push(i + 1);
                    }
                    _ => todo.push(i + 1),
                }
            }
            // The second slot of the 16-byte load is data, not an instruction.
            for (i, r) in reached.iter().enumerate() {
                let second_slot = i > 0 && p[i - 1].code == 0x18;
                assert!(*r || second_slot, "{f:?}: instruction {i} unreachable");
            }
        }
    }

    #[test]
    fn program_encoding() {
        let p = program(7);
        // ldxw r2, [r1+16]
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        // lddw r1, map_fd 7 (src_reg = BPF_PSEUDO_MAP_FD = 1)
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, 2));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);
    }
}

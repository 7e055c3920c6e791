//! The operator's reference, generated from the definitions it describes so that it
//! cannot drift from them: man pages vswitchd(8) and vswitchctl(8) (one page per
//! vswitchctl command as well, `vswitchctl-acl-add(8)`, as git and cargo do) from the
//! clap definitions ([`vswitch::config::Args`], [`vswitch::control::cli::Cli`]) with
//! `clap_mangen`; vswitchd.toml(5) from the key table
//! [`vswitch::config::keys::FILE_KEYS`] with `roff`; bash, zsh and fish completion with
//! `clap_complete`. `scripts/package.sh` runs the binary; the Debian package installs
//! what it writes.

#![deny(missing_docs)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap::{Command, CommandFactory};
use clap_complete::Shell;
use roff::{bold, italic, roman, Roff};
use vswitch::config::keys::{keys_of, Section};

/// vswitchd's command (its flags and help).
pub fn vswitchd() -> Command {
    vswitch::config::Args::command()
}

/// vswitchctl's command (its commands, flags and help).
pub fn vswitchctl() -> Command {
    vswitch::control::cli::Cli::command()
}

/// Writes `cmd`'s page in section 8, and one per subcommand (recursively), into `dir`.
///
/// # Errors
/// A page cannot be written.
pub fn man_pages(cmd: Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    write_pages(cmd, dir, &mut out)?;
    Ok(out)
}

fn write_pages(cmd: Command, dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir, out)?;
    }
    let man = clap_mangen::Man::new(cmd)
        .section("8")
        .manual("vswitch")
        .source(format!("vswitch {}", env!("CARGO_PKG_VERSION")));
    out.push(man.generate_to(dir)?);
    Ok(())
}

/// The page vswitchd.toml(5): the file's format and every key, by section, from the
/// key table.
pub fn config_page() -> String {
    let mut r = Roff::new();
    let version = format!("vswitch {}", env!("CARGO_PKG_VERSION"));
    r.control("TH", ["VSWITCHD.TOML", "5", "", &version, "vswitch"]);
    r.control("SH", ["NAME"]);
    r.text([roman("vswitchd.toml - vswitchd's configuration file")]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([roman("/etc/vswitch/vswitchd.toml")]);
    r.control("SH", ["DESCRIPTION"]);
    r.text([roman(
        "A TOML file read by vswitchd --config FILE at start and again on vswitchctl \
         reload or SIGHUP (systemctl reload vswitchd). Every vswitchd flag has a key of \
         the same name with _ for -; flags given on the command line win over the \
         file's scalars and add to its ports and static MACs. An unknown key, a value \
         of the wrong type or out of range is refused with the file, the field and what \
         was expected; at start vswitchd then exits with status 2, on a reload nothing \
         changes. Port tables ([[port]], [[uplink]], [[tap]]) take the option keys their \
         flag's spec takes (queues=2 in --vhost-user is queues = 2 in [[port]]).",
    )]);
    for section in Section::ALL {
        r.control("SH", [section_title(section).as_str()]);
        for k in keys_of(section) {
            r.control("TP", []);
            r.text([bold(k.name), roman(" = "), italic(k.value)]);
            r.text([roman(k.help)]);
            r.control("br", []);
            r.text([roman(format!("Reload: {}.", k.reload.describe()))]);
        }
    }
    r.control("SH", ["EXAMPLE"]);
    r.control("nf", []);
    r.text([roman(EXAMPLE)]);
    r.control("fi", []);
    r.control("SH", ["FILES"]);
    r.text([roman(
        "/etc/vswitch/vswitchd.toml, the packaged file (a conffile: an upgrade keeps \
         your edits).",
    )]);
    r.control("SH", ["SEE ALSO"]);
    r.text([
        bold("vswitchd"),
        roman("(8), "),
        bold("vswitchctl"),
        roman("(8), "),
        bold("systemctl"),
        roman("(1)"),
    ]);
    r.render()
}

fn section_title(section: Section) -> String {
    match section {
        Section::Top => "TOP-LEVEL KEYS".to_string(),
        s => format!("KEYS OF {}", s.heading()),
    }
}

const EXAMPLE: &str = r#"pmd_cpus = [2, 3]
poll = "busy"
metrics = "127.0.0.1:9477"

[[port]]
name = "vm1"
type = "vhost-user"
path = "/run/vswitch/vm1.sock"
queues = 2
vlan = 10

[[uplink]]
name = "up0"
iface = "eth1"

[[acl]]
port = "vm1"
action = "drop"
ip_proto = "udp"
l4_dst = "5000-5999""#;

/// Writes bash, zsh and fish completion for `cmd` into `dir`.
///
/// # Errors
/// A file cannot be written.
pub fn completions(mut cmd: Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let name = cmd.get_name().to_string();
    [Shell::Bash, Shell::Zsh, Shell::Fish]
        .into_iter()
        .map(|sh| clap_complete::generate_to(sh, &mut cmd, &name, dir))
        .collect()
}

/// Writes everything under `out`: `man/` (the pages) and `completions/`.
///
/// # Errors
/// A directory or file cannot be written.
pub fn generate(out: &Path) -> io::Result<Vec<PathBuf>> {
    let (man, comp) = (out.join("man"), out.join("completions"));
    fs::create_dir_all(&man)?;
    fs::create_dir_all(&comp)?;
    let mut files = man_pages(vswitchd(), &man)?;
    files.extend(man_pages(vswitchctl(), &man)?);
    let page = man.join("vswitchd.toml.5");
    fs::write(&page, config_page())?;
    files.push(page);
    files.extend(completions(vswitchd(), &comp)?);
    files.extend(completions(vswitchctl(), &comp)?);
    Ok(files)
}

//! The generated reference is complete: every flag, command and argument has help text
//! (so `--help`, the man pages and the completions teach), every flag is on its page,
//! every config key on vswitchd.toml(5), and the packaged config file is valid.

use std::path::Path;

use clap::{Arg, Command};
use vswitch::config::keys::{Section, FILE_KEYS};

/// Every argument and subcommand of `cmd` (recursively) that has no help, by path.
fn missing_help(cmd: &Command, path: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let generated = |a: &Arg| matches!(a.get_id().as_str(), "help" | "version");
    for a in cmd
        .get_arguments()
        .filter(|a| !generated(a) && !a.is_hide_set())
    {
        let help = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
        if help.is_none_or(|h| h.trim().is_empty()) {
            missing.push(format!("{path} {}", a.get_id()));
        }
    }
    for s in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let sub = format!("{path} {}", s.get_name());
        if s.get_about().or(s.get_long_about()).is_none() {
            missing.push(sub.clone());
        }
        missing.extend(missing_help(s, &sub));
    }
    missing
}

#[test]
fn every_flag_argument_and_command_has_help() {
    for (cmd, name) in [
        (vswitch_docgen::vswitchd(), "vswitchd"),
        (vswitch_docgen::vswitchctl(), "vswitchctl"),
    ] {
        let mut cmd = cmd;
        cmd.build();
        assert_eq!(missing_help(&cmd, name), Vec::<String>::new());
    }
}

#[test]
fn the_help_check_catches_a_flag_without_help() {
    let cmd = Command::new("t")
        .arg(Arg::new("quiet").long("quiet").help("Says less."))
        .arg(Arg::new("bare").long("bare"))
        .subcommand(Command::new("sub").arg(Arg::new("x").long("x")));
    assert_eq!(missing_help(&cmd, "t"), ["t bare", "t sub", "t sub x"]);
}

/// The page as text, roff's escaped hyphens made plain.
fn page(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join("man").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .replace("\\-", "-")
}

#[test]
fn pages_and_completions_name_every_flag_command_and_key() {
    let dir = std::env::temp_dir().join(format!("vswitch-docgen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    vswitch_docgen::generate(&dir).unwrap();
    let d = page(&dir, "vswitchd.8");
    for a in vswitch_docgen::vswitchd().get_arguments() {
        if let Some(l) = a.get_long() {
            assert!(d.contains(&format!("--{l}")), "vswitchd.8 lacks --{l}");
        }
    }
    let c = page(&dir, "vswitchctl.8");
    for s in vswitch_docgen::vswitchctl().get_subcommands() {
        let n = s.get_name();
        assert!(c.contains(n), "vswitchctl.8 lacks {n}");
        page(&dir, &format!("vswitchctl-{n}.8"));
    }
    assert!(page(&dir, "vswitchctl-acl-add.8").contains("--position"));
    let t = page(&dir, "vswitchd.toml.5");
    for k in FILE_KEYS {
        assert!(
            t.contains(&format!("\\fB{}\\fR", k.name)),
            "vswitchd.toml.5 lacks {} {}",
            k.section.heading(),
            k.name
        );
    }
    for s in Section::ALL.iter().skip(1) {
        assert!(
            t.contains(s.heading()),
            "vswitchd.toml.5 lacks {}",
            s.heading()
        );
    }
    let comp = dir.join("completions");
    let bash = std::fs::read_to_string(comp.join("vswitchctl.bash")).unwrap();
    assert!(bash.contains("add-port") && bash.contains("pmd-rebalance"));
    let zsh = std::fs::read_to_string(comp.join("_vswitchd")).unwrap();
    assert!(zsh.contains("--pmd-cpus"));
    let fish = std::fs::read_to_string(comp.join("vswitchctl.fish")).unwrap();
    assert!(fish.contains("reload"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_packaged_config_file_is_valid_and_starts_a_switch_without_ports() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vswitch/debian/vswitchd.toml");
    let args = vswitch::config::Args {
        config: Some(path.clone()),
        ..Default::default()
    };
    let c = vswitch::config::Config::try_from(args)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(c.ports.is_empty(), "the packaged file attaches no port");
    assert_eq!(
        c.control.to_str(),
        Some(vswitch::config::DEFAULT_CONTROL_SOCKET)
    );
}

#[test]
fn troubleshooting_explains_every_drop_reason() {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/troubleshooting.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let row = |name: &str| format!("| `{name}` |");
    let mut missing: Vec<&str> = Vec::new();
    missing.extend(
        vswitch::model::stats::DropReason::ALL
            .iter()
            .map(|r| r.name())
            .filter(|n| !text.contains(&row(n))),
    );
    missing.extend(
        vswitch::model::tunnel::TunnelDrop::ALL
            .iter()
            .map(|r| r.name())
            .filter(|n| !text.contains(&row(n))),
    );
    missing.extend(
        geneve::decap::DropReason::ALL
            .iter()
            .map(|r| r.as_str())
            .filter(|n| !text.contains(&row(n))),
    );
    assert!(
        missing.is_empty(),
        "{} lacks rows for {missing:?}",
        page.display()
    );
}

#[test]
fn the_docs_explain_every_flag_and_command() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut text = String::new();
    for e in std::fs::read_dir(&docs).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            text.push_str(&std::fs::read_to_string(&p).unwrap());
        }
    }
    let mut missing = Vec::new();
    for a in vswitch_docgen::vswitchd().get_arguments() {
        if let Some(l) = a.get_long().filter(|l| !matches!(*l, "help" | "version")) {
            if !text.contains(&format!("--{l}")) {
                missing.push(format!("vswitchd --{l}"));
            }
        }
    }
    for s in vswitch_docgen::vswitchctl().get_subcommands() {
        if !text.contains(&format!("vswitchctl {}", s.get_name())) {
            missing.push(format!("vswitchctl {}", s.get_name()));
        }
    }
    assert!(missing.is_empty(), "docs/*.md never mention {missing:?}");
}

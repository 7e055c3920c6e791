//! `bench-report`: turns the raw JSON lines that `scripts/bench-report.sh` collects from
//! the benchmark scripts into `results.json`, `report.md` and plots (PNG and SVG).
//!
//! The shell script runs the scenarios (it needs root, namespaces, DPDK and OVS); this
//! binary does no measuring, only parsing, aggregation over rounds, target checks and
//! drawing, so all of that is unit-tested in `cargo test --workspace`.

mod aggregate;
mod criterion;
mod plot;
mod raw;
mod report;
mod table;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

/// Benchmark report generator for vswitch (driven by scripts/bench-report.sh).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Writes OUT/results.json, OUT/report.md, OUT/readme-excerpt.md and OUT/plots/*.{png,svg}.
    Render {
        /// Raw figures, one JSON object per line (the scripts' --json output).
        #[arg(long)]
        raw: PathBuf,
        /// The machine and versions, one JSON object (cpu_model, cores, kernel, date, …).
        #[arg(long)]
        machine: PathBuf,
        /// Output directory (created).
        #[arg(long)]
        out: PathBuf,
        /// Also replace the text between `<!-- bench-report:begin -->` and
        /// `<!-- bench-report:end -->` in this README with the excerpt, and copy the PVP
        /// Mpps plot next to it under `docs/bench/`.
        #[arg(long)]
        readme: Option<PathBuf>,
    },
    /// Prints criterion's scale-bench estimates under DIR (target/criterion/scale) as raw
    /// JSON lines (ns per packet).
    Criterion {
        /// The criterion group directory.
        dir: PathBuf,
    },
}

const BEGIN: &str = "<!-- bench-report:begin -->";
const END: &str = "<!-- bench-report:end -->";

fn main() -> Result<()> {
    match Args::parse().cmd {
        Cmd::Render {
            raw,
            machine,
            out,
            readme,
        } => render(&raw, &machine, &out, readme.as_deref()),
        Cmd::Criterion { dir } => {
            for r in criterion::scale_records(&dir)? {
                println!("{}", serde_json::to_string(&r)?);
            }
            Ok(())
        }
    }
}

fn render(raw: &Path, machine: &Path, out: &Path, readme: Option<&Path>) -> Result<()> {
    let text =
        std::fs::read_to_string(raw).with_context(|| format!("raw figures {}", raw.display()))?;
    let records = raw::parse_lines(&text)?;
    let machine: Value = serde_json::from_str(
        &std::fs::read_to_string(machine)
            .with_context(|| format!("machine description {}", machine.display()))?,
    )
    .with_context(|| format!("machine description {}", machine.display()))?;
    let aggs = aggregate::aggregate(&records);
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir).with_context(|| format!("create {}", plot_dir.display()))?;

    let mut plots = Vec::new();
    for c in report::charts(&aggs) {
        if !plot::write(&c, &plot_dir)?.is_empty() {
            plots.push(c.stem.clone());
        }
    }
    let results = json!({
        "machine": machine,
        "generated_by": concat!("bench-report ", env!("CARGO_PKG_VERSION")),
        "targets": report::targets(&aggs),
        "aggregates": aggs,
        "records": records,
    });
    write(
        &out.join("results.json"),
        &serde_json::to_string_pretty(&results)?,
    )?;
    let md = report::markdown(&machine, &records, &aggs, &plots);
    write(&out.join("report.md"), &md)?;
    let has_pvp_plot = plots.iter().any(|p| p == "pvp_mpps");
    let excerpt = report::readme_excerpt(
        &machine,
        &aggs,
        has_pvp_plot.then_some("docs/bench/pvp_mpps.svg"),
    );
    write(&out.join("readme-excerpt.md"), &excerpt)?;
    if let Some(readme) = readme {
        update_readme(readme, &excerpt)?;
        if has_pvp_plot {
            let docs = readme.parent().unwrap_or(Path::new(".")).join("docs/bench");
            std::fs::create_dir_all(&docs)?;
            for ext in ["png", "svg"] {
                let f = format!("pvp_mpps.{ext}");
                std::fs::copy(plot_dir.join(&f), docs.join(&f))
                    .with_context(|| format!("copy {f} to {}", docs.display()))?;
            }
        }
    }
    for o in report::targets(&aggs) {
        let met = match o.met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        let r = o.ratio.map(|r| format!("{r:.2}x")).unwrap_or_default();
        eprintln!("target: {} -- {met} {r}", o.name);
    }
    eprintln!(
        "bench-report: wrote {}/report.md, results.json, plots/",
        out.display()
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

/// Replaces what lies between the markers in `readme` with `excerpt`.
fn update_readme(readme: &Path, excerpt: &str) -> Result<()> {
    let text =
        std::fs::read_to_string(readme).with_context(|| format!("read {}", readme.display()))?;
    let new = splice(&text, excerpt)
        .with_context(|| format!("{}: markers {BEGIN} … {END}", readme.display()))?;
    write(readme, &new)
}

fn splice(text: &str, excerpt: &str) -> Result<String> {
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        bail!("missing");
    };
    if e < b {
        bail!("in the wrong order");
    }
    Ok(format!(
        "{}{BEGIN}\n{}\n{}",
        &text[..b],
        excerpt.trim_end(),
        &text[e..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_between_markers() {
        let t = format!("a\n{BEGIN}\nold\n{END}\nb\n");
        assert_eq!(
            splice(&t, "new\n").unwrap(),
            format!("a\n{BEGIN}\nnew\n{END}\nb\n")
        );
        assert!(splice("no markers", "x").is_err());
        assert!(splice(&format!("{END}{BEGIN}"), "x").is_err());
    }

    #[test]
    fn render_writes_every_file() {
        let dir = std::env::temp_dir().join(format!("bench-report-main-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let raw = dir.join("raw.jsonl");
        std::fs::write(
            &raw,
            r#"{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64},"metrics":{"mpps":7.0,"gbps":3.58}}
{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":1518},"metrics":{"mpps":2.0,"gbps":24.3}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":64},"metrics":{"mpps":4.0}}
"#,
        )
        .unwrap();
        let machine = dir.join("machine.json");
        std::fs::write(
            &machine,
            r#"{"cpu_model":"Test CPU","cores":2,"date":"2026-11-26"}"#,
        )
        .unwrap();
        let readme = dir.join("README.md");
        std::fs::write(&readme, format!("# x\n{BEGIN}\n{END}\n")).unwrap();
        let out = dir.join("out");
        render(&raw, &machine, &out, Some(&readme)).unwrap();
        for f in [
            "results.json",
            "report.md",
            "readme-excerpt.md",
            "plots/pvp_mpps.png",
            "plots/pvp_mpps.svg",
            "plots/pvp_gbps.svg",
        ] {
            assert!(out.join(f).exists(), "{f}");
        }
        assert!(!out.join("plots/flows_mpps.png").exists());
        let results: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap())
                .unwrap();
        assert_eq!(results["machine"]["cpu_model"], "Test CPU");
        assert_eq!(results["records"].as_array().unwrap().len(), 3);
        let readme = std::fs::read_to_string(&readme).unwrap();
        assert!(readme.contains("on Test CPU, 2 cores"), "{readme}");
        assert!(dir.join("docs/bench/pvp_mpps.png").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}

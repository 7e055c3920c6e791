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
        /// `<!-- bench-report:end -->` in docs/benchmarks.md beside this README with the
        /// excerpt, the text between `<!-- bench-report:headline:begin -->` and
        /// `…:headline:end -->` in the README with the headline figure, and copy the
        /// PVP Mpps plot under `docs/bench/`.
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
const HEADLINE_BEGIN: &str = "<!-- bench-report:headline:begin -->";
const HEADLINE_END: &str = "<!-- bench-report:headline:end -->";

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
        "bench/report.md",
        has_pvp_plot.then_some("bench/pvp_mpps.svg"),
    );
    write(&out.join("readme-excerpt.md"), &excerpt)?;
    if let Some(readme) = readme {
        let root = readme.parent().unwrap_or(Path::new("."));
        let headline = report::headline(&machine, &aggs, "docs/benchmarks.md");
        update_pages(readme, &root.join("docs/benchmarks.md"), &excerpt, headline)?;
        if has_pvp_plot {
            let docs = root.join("docs/bench");
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

/// Writes the excerpt between the markers of `page` (docs/benchmarks.md) and the
/// headline between the headline markers of `readme`. A README that still has the
/// excerpt's own markers (the layout before docs/) gets the excerpt there.
fn update_pages(readme: &Path, page: &Path, excerpt: &str, headline: Option<String>) -> Result<()> {
    let text =
        std::fs::read_to_string(readme).with_context(|| format!("read {}", readme.display()))?;
    if text.contains(BEGIN) {
        return splice_file(readme, BEGIN, END, excerpt);
    }
    splice_file(page, BEGIN, END, excerpt)?;
    if let Some(h) = headline {
        splice_file(readme, HEADLINE_BEGIN, HEADLINE_END, &h)?;
    }
    Ok(())
}

/// Replaces what lies between `begin` and `end` in `path` with `text`.
fn splice_file(path: &Path, begin: &str, end: &str, text: &str) -> Result<()> {
    let old = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let new = splice(&old, begin, end, text)
        .with_context(|| format!("{}: markers {begin} … {end}", path.display()))?;
    write(path, &new)
}

fn splice(text: &str, begin: &str, end: &str, excerpt: &str) -> Result<String> {
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        bail!("missing");
    };
    if e < b {
        bail!("in the wrong order");
    }
    Ok(format!(
        "{}{begin}\n{}\n{}",
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
            splice(&t, BEGIN, END, "new\n").unwrap(),
            format!("a\n{BEGIN}\nnew\n{END}\nb\n")
        );
        assert!(splice("no markers", BEGIN, END, "x").is_err());
        assert!(splice(&format!("{END}{BEGIN}"), BEGIN, END, "x").is_err());
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

    #[test]
    fn render_writes_the_docs_page_and_the_readme_headline() {
        let dir = std::env::temp_dir().join(format!("bench-report-docs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        let raw = dir.join("raw.jsonl");
        std::fs::write(
            &raw,
            r#"{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64},"metrics":{"mpps":7.0}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":64},"metrics":{"mpps":4.0}}
{"scenario":"pvp","switch":"limit","round":1,"params":{"frame_size":64},"metrics":{"mpps":8.0}}
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
        std::fs::write(&readme, format!("# x\n{HEADLINE_BEGIN}\n{HEADLINE_END}\n")).unwrap();
        let page = dir.join("docs/benchmarks.md");
        std::fs::write(&page, format!("# B\n{BEGIN}\nold\n{END}\nrest\n")).unwrap();
        render(&raw, &machine, &dir.join("out"), Some(&readme)).unwrap();
        let page = std::fs::read_to_string(&page).unwrap();
        assert!(
            page.contains("on Test CPU, 2 cores") && !page.contains("old"),
            "{page}"
        );
        assert!(page.contains("[bench/report.md](bench/report.md)") && page.ends_with("rest\n"));
        let readme = std::fs::read_to_string(&readme).unwrap();
        assert!(
            readme.contains("vswitchd 7.000 Mpps, 1.75× Open vSwitch"),
            "{readme}"
        );
        assert!(readme.contains("0.88× testpmd"), "{readme}");
        assert!(
            !readme.contains("| target |"),
            "the README gets the headline only"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

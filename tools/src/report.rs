//! What a tool reports: the head of its section of BENCHMARKS.md (date, machine,
//! command), its targets as a table and as a summary on stdout, and the writing of the
//! section and of the tool's line in the document's index.

use std::path::Path;

use anyhow::{Context, Result};

/// The current UTC time as RFC 3339 to the second, for "Measured ..." lines.
pub fn utc_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The command line this tool was started with.
pub fn command_line() -> String {
    portable_command_line(std::env::args())
}

/// `args` as a command that reads the same on any machine: the program as
/// `target/release/<name>`, and any other absolute path as `<file name>` (a build or a
/// data file kept somewhere of the measurer's own).
pub fn portable_command_line(args: impl IntoIterator<Item = String>) -> String {
    let file_name = |path: &str| {
        Path::new(path)
            .file_name()
            .map_or(path.to_owned(), |name| name.to_string_lossy().into_owned())
    };
    args.into_iter()
        .enumerate()
        .map(|(index, arg)| match (index, arg.starts_with('/')) {
            (0, _) => format!("target/release/{}", file_name(&arg)),
            (_, true) => format!("<{}>", file_name(&arg)),
            (_, false) => match arg.split_once("=/") {
                Some((flag, path)) => format!("{flag}=<{}>", file_name(&format!("/{path}"))),
                None => arg,
            },
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `"2 CPUs (model), 23.5 GiB RAM"`, from the OS.
pub fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split(':').nth(1))
        .map_or(String::new(), |model| format!(" ({})", model.trim()));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kib: f64 = meminfo
        .lines()
        .find_map(|line| {
            line.strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    format!("{cpus} CPUs{model}, {:.1} GiB RAM", memory_kib / 1024.0 / 1024.0)
}

/// The start of a tool's section: its heading, `Measured <now> with `tools/src/bin/<tool>.rs`.`,
/// and the first two list items, `- Machine:` and `- Command:` (each line ends in `\n`).
pub fn section_head(heading: &str, tool: &str) -> String {
    format!(
        "{heading}\n\nMeasured {} with `tools/src/bin/{tool}.rs`.\n\n- Machine: {}\n- Command: `{}`\n",
        utc_now(),
        machine_description(),
        command_line()
    )
}

/// `| a | b | c |`, without a line end.
pub fn markdown_row<S: AsRef<str>>(cells: &[S]) -> String {
    let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
    format!("| {} |", cells.join(" | "))
}

/// One target a tool checks: what was measured, the result, the target, and whether
/// the result met it.
pub struct Goal {
    /// What was measured, e.g. `non-200 responses`.
    pub measurement: String,
    /// The measured value as the tool writes it.
    pub result: String,
    /// The target as written in the issue, e.g. `<= 2 ms`.
    pub target: &'static str,
    pub met: bool,
}

impl Goal {
    pub fn new(measurement: impl Into<String>, result: String, target: &'static str, met: bool) -> Goal {
        Goal {
            measurement: measurement.into(),
            result,
            target,
            met,
        }
    }
}

/// The goals as a Markdown table: `| measurement | result | target | |`, a verdict of
/// `met` or `**not met**` each.
pub fn goals_table(goals: &[Goal]) -> String {
    let mut out = String::from("| measurement | result | target | |\n|---|---:|---|---|\n");
    for goal in goals {
        let verdict = if goal.met { "met" } else { "**not met**" };
        let cells = [goal.measurement.as_str(), &goal.result, goal.target, verdict];
        out.push_str(&markdown_row(&cells));
        out.push('\n');
    }
    out
}

/// The goals on stdout, after a `summary:` line: `  measurement: result (target …: met)`.
pub fn print_goals(goals: &[Goal]) {
    println!("\nsummary:");
    for goal in goals {
        println!(
            "  {}: {} (target {}: {})",
            goal.measurement,
            goal.result,
            goal.target,
            if goal.met { "met" } else { "NOT met" }
        );
    }
}

/// The heading that starts a hand-written note under a tool's section: the tool keeps
/// these when it rewrites the section (`### Reading (by hand, 2026-11-29)`).
pub const READING_PREFIX: &str = "### Reading";

/// Replaces the section of `document` under the line `heading` (up to the next `## `
/// heading) with `section`, or appends `section` when there is none. The old section's
/// readings (from a line starting with [`READING_PREFIX`] to the next `### ` or `## `
/// heading that is not one) follow the new text: what a person wrote stays, what the
/// tool wrote is replaced.
pub fn upsert_markdown_section(document: &str, heading: &str, section: &str) -> String {
    let (mut out, mut readings) = (String::new(), String::new());
    let (mut in_section, mut in_reading, mut replaced) = (false, false, false);
    for line in document.split_inclusive('\n') {
        if line.trim_end() == heading {
            if !replaced {
                out.push_str(section);
                out.push('\n');
            }
            (in_section, in_reading, replaced) = (true, false, true);
            continue;
        }
        if in_section && line.starts_with("## ") {
            in_section = false;
            out.push_str(&take_readings(&mut readings));
        }
        if !in_section {
            out.push_str(line);
            continue;
        }
        if line.starts_with(READING_PREFIX) {
            in_reading = true;
        } else if line.starts_with("### ") {
            in_reading = false;
        }
        if in_reading {
            readings.push_str(line);
        }
    }
    out.push_str(&take_readings(&mut readings));
    if !replaced {
        out = match out.trim_end() {
            "" => "# Benchmarks".to_string(),
            existing => existing.to_string(),
        };
        out.push_str("\n\n");
        out.push_str(section);
    }
    format!("{}\n", out.trim_end())
}

/// The readings kept from a replaced section, followed by a blank line (empty when none);
/// the new section's text before them ends in one already.
fn take_readings(readings: &mut String) -> String {
    let kept = std::mem::take(readings);
    match kept.trim() {
        "" => String::new(),
        text => format!("{text}\n\n"),
    }
}

/// Reads `path` (empty when missing), puts `section` under `heading`, writes it back.
pub fn write_markdown_section(path: &Path, heading: &str, section: &str) -> Result<()> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    std::fs::write(path, upsert_markdown_section(&existing, heading, section))
        .with_context(|| format!("writing {}", path.display()))
}

/// A tool's line in the index of BENCHMARKS.md: its binary's name and its index table row.
pub struct IndexEntry {
    /// The binary, e.g. `bench-chat`.
    pub tool: &'static str,
    /// Its row of the index table: `| section | tool | what it measures |`.
    pub row: &'static str,
}

/// Writes `section` under `heading` in `path`, adds the tool to the document's index
/// when `index` is given, and says so on stdout.
pub fn publish_section(path: &Path, heading: &str, section: &str, index: Option<&IndexEntry>) -> Result<()> {
    write_markdown_section(path, heading, section)?;
    if let Some(index) = index {
        add_to_index(path, index.tool, index.row)?;
    }
    println!("wrote {heading:?} in {}", path.display());
    Ok(())
}

/// Adds a tool to the preamble of BENCHMARKS.md (the part before the first `## `), unless
/// present: `index_row` in its index table, its run command in the build-and-run block
/// and its binary in a `cargo build` line that names binaries one by one.
pub fn add_to_index(path: &Path, tool: &str, index_row: &str) -> Result<()> {
    let document = std::fs::read_to_string(path)?;
    let preamble_end = document
        .match_indices("\n## ")
        .next()
        .map_or(document.len(), |(at, _)| at + 1);
    let (preamble, rest) = document.split_at(preamble_end);
    let mut lines: Vec<String> = preamble.lines().map(str::to_owned).collect();
    if !preamble.contains(&format!("`{tool}`")) {
        if let Some(header) = lines.iter().position(|line| line.starts_with("| section | tool |")) {
            let mut end = header;
            while lines.get(end + 1).is_some_and(|line| line.starts_with('|')) {
                end += 1;
            }
            lines.insert(end + 1, index_row.to_string());
        }
    }
    if !preamble.contains(&format!("target/release/{tool}")) {
        if let Some(last_run) = lines.iter().rposition(|line| line.starts_with("target/release/bench-")) {
            lines.insert(
                last_run + 1,
                format!("target/release/{tool} --write-markdown BENCHMARKS.md"),
            );
        }
        for line in &mut lines {
            let names_binaries = line.starts_with("cargo build --release") && !line.contains("--workspace");
            if names_binaries && !line.contains(tool) {
                line.push_str(&format!(" --bin {tool}"));
            }
        }
    }
    let mut updated = lines.join("\n");
    updated.push('\n');
    updated.push_str(rest);
    if updated != document {
        std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCUMENT: &str = "# Benchmarks\n\n## Recommend\n\nMeasured then.\n\n| old | table |\n\n\
                            ### Latency\n\nold latency\n\n### Reading (by hand, 2026-11-28)\n\n- a note\n\n\
                            ## Memory\n\nMeasured too.\n";

    #[test]
    fn a_rewritten_section_keeps_its_readings_and_drops_the_old_tool_text() {
        let rewritten = upsert_markdown_section(DOCUMENT, "## Recommend", "## Recommend\n\nMeasured now.\n");
        assert_eq!(
            rewritten,
            "# Benchmarks\n\n## Recommend\n\nMeasured now.\n\n### Reading (by hand, 2026-11-28)\n\n- a note\n\n\
             ## Memory\n\nMeasured too.\n"
        );
    }

    #[test]
    fn the_last_section_keeps_its_readings_and_a_new_one_is_appended() {
        let document = "# Benchmarks\n\n## Memory\n\nold\n\n### Reading (by hand, 2026-11-29)\n\nkept\n";
        let rewritten = upsert_markdown_section(document, "## Memory", "## Memory\n\nnew\n");
        assert_eq!(
            rewritten,
            "# Benchmarks\n\n## Memory\n\nnew\n\n### Reading (by hand, 2026-11-29)\n\nkept\n"
        );
        let appended = upsert_markdown_section(document, "## Chat", "## Chat\n\nfirst\n");
        assert!(appended.ends_with("kept\n\n## Chat\n\nfirst\n"), "{appended}");
    }

    #[test]
    fn commands_name_no_path_of_the_machine_they_ran_on() {
        let args = [
            "/root/.cache/rankstream/target/release/bench-recommend",
            "--server-bin",
            "/tmp/rk/rankstream-new",
            "--json=/tmp/out/report.json",
            "--write-markdown",
            "BENCHMARKS.md",
        ]
        .map(String::from);
        assert_eq!(
            portable_command_line(args),
            "target/release/bench-recommend --server-bin <rankstream-new> --json=<report.json> --write-markdown BENCHMARKS.md"
        );
    }
}

//! `rankstream import`: catalog items, users or events from a JSON-lines or CSV file
//! into a running node, through its bulk endpoints, with a progress bar (rate, ETA).
//!
//! - Rows are sent `--batch-size` at a time. A batch the node cannot take now (408,
//!   429, 503, or rows refused as unavailable) is sent again after `Retry-After`;
//!   sending again is harmless (items and users are upserts, events carry ids).
//! - After each acknowledged batch, `NAME.import-state.json` (NAME: the file's name,
//!   in the working directory, since the file's own may be read-only) says how many
//!   rows are done. An import that stops (an error, Ctrl-C, a kill) says where; the same
//!   command resumes after the last acknowledged batch (`--restart` starts over). The
//!   state file is removed once the file is through.
//! - Rows the node refuses for good go to `NAME.rejected.jsonl` (also in the working
//!   directory), one JSON object per line: the row number, the row as sent, the code
//!   and the reason.
//! - Events without an `id` get `<file name>:<row number>`, so that an event imported
//!   twice is applied once.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use indicatif::{ProgressBar, ProgressStyle};
use rankstream::api::Peers;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::{ImportArgs, ImportFormat, ImportKind};

/// How long one batch may take to be answered.
const REQUEST_LIMIT: Duration = Duration::from_secs(120);
/// The wait before sending a batch again when the node gave no `Retry-After`.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Retries of one batch before the import stops.
const MAX_RETRIES: u32 = 60;
/// Fields that name things: a CSV cell for one stays a string ("007" is not 7).
const NAMING_FIELDS: [&str; 8] = ["id", "uid", "sid", "cid", "item_id", "_table", "type", "session_id"];

/// Where an import of a file stands, kept beside it.
#[derive(Debug, Serialize, Deserialize)]
struct ImportState {
    /// Rows (data lines; a CSV's header is not one) acknowledged.
    rows_done: u64,
    /// The file's length when the import began: another length means another file.
    file_bytes: u64,
}

/// What the import did, printed as JSON at the end.
#[derive(Debug, Default, Serialize)]
struct Summary {
    rows: u64,
    imported: u64,
    duplicates: u64,
    rejected: u64,
    resumed_after: u64,
    seconds: f64,
    rows_per_second: f64,
    rejected_file: Option<String>,
}

/// How a row is shaped before it is sent.
struct Shape {
    kind: ImportKind,
    /// CSV columns or JSON keys renamed to fields.
    renames: HashMap<String, String>,
    /// CSV columns split into arrays at a separator.
    splits: HashMap<String, String>,
    skipped: Vec<String>,
    table: Option<String>,
    event_type: Option<String>,
    /// Events: the prefix of ids given to rows that have none.
    id_prefix: String,
}

pub async fn run(args: ImportArgs) -> anyhow::Result<()> {
    let http = args
        .url
        .trim_end_matches('/')
        .strip_prefix("http://")
        .with_context(|| format!("--url {:?}: an http:// URL of the node", args.url))?
        .to_owned();
    ensure!(args.batch_size > 0, "--batch-size must be at least 1");
    let shape = Shape::of(&args)?;
    let file_bytes = std::fs::metadata(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?
        .len();
    let state_path = beside(&args.file, "import-state.json");
    let skip = match (args.restart, read_state(&state_path)?) {
        (false, Some(state)) if state.file_bytes == file_bytes => {
            eprintln!(
                "resuming after row {} (an earlier import of this file stopped there; --restart starts over)",
                state.rows_done
            );
            state.rows_done
        }
        (false, Some(_)) => bail!(
            "{} is from an import of a file of another length: remove it or pass --restart",
            state_path.display()
        ),
        _ => 0,
    };
    let rejected_path = args
        .rejected
        .clone()
        .unwrap_or_else(|| beside(&args.file, "rejected.jsonl"));
    let mut rejected_file = None;
    let peers = Peers::new(5_000);
    let format = args
        .format
        .unwrap_or_else(|| match args.file.extension().and_then(|e| e.to_str()) {
            Some(extension) if extension.eq_ignore_ascii_case("csv") => ImportFormat::Csv,
            _ => ImportFormat::Jsonl,
        });
    let mut rows = Rows::open(&args.file, format)?;
    let progress = ProgressBar::new(file_bytes).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {percent:>3}%  {msg}  ETA {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut summary = Summary {
        resumed_after: skip,
        ..Summary::default()
    };
    let mut row_number = 0u64;
    loop {
        let mut batch = Vec::with_capacity(args.batch_size);
        while batch.len() < args.batch_size {
            let Some(row) = rows.next_row()? else { break };
            row_number += 1;
            if row_number <= skip {
                continue;
            }
            match shape.apply(row, row_number) {
                Ok(value) => batch.push((row_number, value)),
                Err(reason) => {
                    summary.rows += 1;
                    summary.rejected += 1;
                    let line = json!({"row": row_number, "code": "unreadable", "message": reason});
                    writeln!(open(&mut rejected_file, &rejected_path)?, "{line}")?;
                }
            }
        }
        if batch.is_empty() {
            break;
        }
        let first = batch[0].0;
        let outcome = send(&peers, &http, &args.key, shape.kind, &batch).await;
        let refused = match outcome {
            Ok(outcome) => outcome,
            Err(error) => {
                progress.abandon();
                bail!(
                    "stopped at row {first}: {error:#}. Rows 1 to {} are imported; the same command resumes from row {first}",
                    first - 1
                );
            }
        };
        summary.rows += batch.len() as u64;
        summary.rejected += refused.rows.len() as u64;
        summary.duplicates += refused.duplicates;
        summary.imported += batch.len() as u64 - refused.rows.len() as u64 - refused.duplicates;
        for (index, code, message) in refused.rows {
            let (row, sent) = &batch[index];
            let line = json!({"row": row, "code": code, "message": message, "sent": sent});
            writeln!(open(&mut rejected_file, &rejected_path)?, "{line}")?;
        }
        let last = batch[batch.len() - 1].0;
        write_state(
            &state_path,
            &ImportState {
                rows_done: last,
                file_bytes,
            },
        )?;
        progress.set_position(rows.bytes_read());
        let rate = summary.rows as f64 / started.elapsed().as_secs_f64().max(1e-9);
        progress.set_message(format!("{last} rows ({rate:.0} rows/s), {} rejected", summary.rejected));
    }
    progress.finish();
    let _ = std::fs::remove_file(&state_path);
    summary.seconds = started.elapsed().as_secs_f64();
    summary.rows_per_second = summary.rows as f64 / summary.seconds.max(1e-9);
    summary.rejected_file = rejected_file.map(|_| rejected_path.display().to_string());
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

/// The rejected rows' file, created at the first one.
fn open<'a>(file: &'a mut Option<File>, path: &Path) -> anyhow::Result<&'a mut File> {
    if file.is_none() {
        *file = Some(File::create(path).with_context(|| format!("creating {}", path.display()))?);
    }
    Ok(file.as_mut().expect("just created"))
}

/// `NAME.<suffix>` in the working directory, NAME being `file`'s name.
fn beside(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{suffix}"));
    PathBuf::from(name)
}

fn read_state(path: &Path) -> anyhow::Result<Option<ImportState>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                format!("{} is not an import state", path.display())
            })?))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Written aside and renamed, so that a kill never leaves half a state.
fn write_state(path: &Path, state: &ImportState) -> anyhow::Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, serde_json::to_vec(state)?)?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

/// The rows of a file, each a JSON object, and how far into the file they are.
enum Rows {
    Jsonl {
        lines: std::io::Lines<BufReader<File>>,
        bytes: u64,
    },
    Csv {
        reader: csv::Reader<File>,
        headers: Vec<String>,
    },
}

impl Rows {
    fn open(path: &Path, format: ImportFormat) -> anyhow::Result<Rows> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok(match format {
            ImportFormat::Jsonl => Rows::Jsonl {
                lines: BufReader::new(file).lines(),
                bytes: 0,
            },
            ImportFormat::Csv => {
                let mut reader = csv::Reader::from_reader(file);
                let headers = reader
                    .headers()?
                    .iter()
                    .map(|header| header.trim().to_owned())
                    .collect();
                Rows::Csv { reader, headers }
            }
        })
    }

    /// The next row; blank JSON lines are skipped.
    fn next_row(&mut self) -> anyhow::Result<Option<Row>> {
        match self {
            Rows::Jsonl { lines, bytes } => loop {
                let Some(line) = lines.next() else { return Ok(None) };
                let line = line?;
                *bytes += line.len() as u64 + 1;
                if line.trim().is_empty() {
                    continue;
                }
                return Ok(Some(match serde_json::from_str::<Value>(&line) {
                    Ok(Value::Object(object)) => Row::Json(object),
                    Ok(_) => Row::Unreadable("not a JSON object".into()),
                    Err(error) => Row::Unreadable(format!("not JSON: {error}")),
                }));
            },
            Rows::Csv { reader, headers } => {
                let mut record = csv::StringRecord::new();
                match reader.read_record(&mut record) {
                    Ok(false) => Ok(None),
                    Ok(true) => Ok(Some(Row::Csv(
                        headers.iter().cloned().zip(record.iter().map(str::to_owned)).collect(),
                    ))),
                    Err(error) => Ok(Some(Row::Unreadable(format!("not a CSV record: {error}")))),
                }
            }
        }
    }

    fn bytes_read(&self) -> u64 {
        match self {
            Rows::Jsonl { bytes, .. } => *bytes,
            Rows::Csv { reader, .. } => reader.position().byte(),
        }
    }
}

enum Row {
    Json(Map<String, Value>),
    /// Column name and cell, in column order.
    Csv(Vec<(String, String)>),
    /// A line that is not a row, and why: rejected without being sent.
    Unreadable(String),
}

impl Shape {
    fn of(args: &ImportArgs) -> anyhow::Result<Shape> {
        let pairs = |values: &[String], flag: &str| -> anyhow::Result<HashMap<String, String>> {
            values
                .iter()
                .map(|pair| match pair.split_once('=') {
                    Some((from, to)) if !from.is_empty() && !to.is_empty() => Ok((from.to_owned(), to.to_owned())),
                    _ => bail!("--{flag} {pair:?}: expected NAME=VALUE"),
                })
                .collect()
        };
        let mut renames = pairs(&args.map, "map")?;
        if let Some(column) = &args.id_column {
            let id = match args.kind {
                ImportKind::Users => "uid",
                ImportKind::Items | ImportKind::Events => "id",
            };
            renames.insert(column.clone(), id.to_owned());
        }
        ensure!(
            args.table.is_none() || args.kind == ImportKind::Items,
            "--table is for items"
        );
        ensure!(
            args.event_type.is_none() || args.kind == ImportKind::Events,
            "--event-type is for events"
        );
        let name = args.file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        Ok(Shape {
            kind: args.kind,
            renames,
            splits: pairs(&args.split, "split")?,
            skipped: args.skip.clone(),
            table: args.table.clone(),
            event_type: args.event_type.clone(),
            id_prefix: name,
        })
    }

    /// The row as the endpoint takes it: columns renamed, skipped and split, CSV cells
    /// typed, defaults filled in; or why the line is not a row.
    fn apply(&self, row: Row, number: u64) -> Result<Value, String> {
        let mut object = Map::new();
        match row {
            Row::Unreadable(reason) => return Err(reason),
            Row::Json(fields) => {
                for (key, value) in fields {
                    if !self.skipped.contains(&key) {
                        object.insert(self.renames.get(&key).cloned().unwrap_or(key), value);
                    }
                }
            }
            Row::Csv(cells) => {
                for (column, cell) in cells {
                    if self.skipped.contains(&column) || cell.is_empty() {
                        continue;
                    }
                    let field = self.renames.get(&column).cloned().unwrap_or_else(|| column.clone());
                    let value = match self.splits.get(&column) {
                        Some(separator) => Value::Array(
                            cell.split(separator.as_str())
                                .map(str::trim)
                                .filter(|part| !part.is_empty())
                                .map(|part| Value::String(part.to_owned()))
                                .collect(),
                        ),
                        None if NAMING_FIELDS.contains(&field.as_str()) => Value::String(cell),
                        None => typed(cell),
                    };
                    object.insert(field, value);
                }
            }
        }
        match self.kind {
            ImportKind::Items => {
                if let Some(table) = &self.table {
                    object.entry("_table").or_insert_with(|| json!(table));
                }
            }
            ImportKind::Users => {}
            ImportKind::Events => {
                object
                    .entry("id")
                    .or_insert_with(|| json!(format!("{}:{number}", self.id_prefix)));
                if let Some(kind) = &self.event_type {
                    object.entry("type").or_insert_with(|| json!(kind));
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// A CSV cell as the JSON value it reads as: a number, a boolean, else a string.
fn typed(cell: String) -> Value {
    if let Ok(number) = cell.parse::<f64>() {
        if number.is_finite() {
            return match cell.parse::<i64>() {
                Ok(whole) => json!(whole),
                Err(_) => json!(number),
            };
        }
    }
    match cell.as_str() {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(cell),
    }
}

/// What the node refused of a batch for good, and the duplicates it took.
struct Refused {
    /// Index in the batch, code, reason.
    rows: Vec<(usize, String, String)>,
    duplicates: u64,
}

/// Per-row codes that mean "not now" rather than "not ever".
fn transient(code: &str) -> bool {
    matches!(code, "unavailable" | "shard_unavailable" | "timeout" | "rate_limited")
}

/// Sends a batch until the node has taken or refused every row of it for good.
async fn send(
    peers: &Peers,
    http: &str,
    key: &str,
    kind: ImportKind,
    batch: &[(u64, Value)],
) -> anyhow::Result<Refused> {
    let (method, path, wrapper) = match kind {
        ImportKind::Items => ("PUT", "/v1/catalog/items", "items"),
        ImportKind::Users => ("POST", "/v1/users", "users"),
        ImportKind::Events => ("POST", "/v1/events", "events"),
    };
    // Indexes into `batch` of the rows still to send.
    let mut pending: Vec<usize> = (0..batch.len()).collect();
    let mut refused = Refused {
        rows: Vec::new(),
        duplicates: 0,
    };
    for attempt in 0.. {
        let rows: Vec<&Value> = pending.iter().map(|&index| &batch[index].1).collect();
        let body = serde_json::to_vec(&json!({ wrapper: rows }))?;
        let answer = peers.call_json(http, method, path, key, body, REQUEST_LIMIT).await;
        let Some((status, retry_after, reply)) = answer else {
            bail!("the node at {http} did not answer within {REQUEST_LIMIT:?}");
        };
        // Per row of this attempt: (index into `pending`, code, message).
        let failures: Vec<(usize, String, String)> = match status {
            200 | 202 => {
                refused.duplicates += reply["duplicates"].as_u64().unwrap_or(0);
                let list = match kind {
                    ImportKind::Events => &reply["rejected"],
                    ImportKind::Items | ImportKind::Users => &reply["failed"],
                };
                row_failures(list)
            }
            // Nothing stored: the reasons are per row.
            400 if reply["details"].is_array() => row_failures(&reply["details"]),
            408 | 429 | 503 => pending
                .iter()
                .enumerate()
                .map(|(at, _)| (at, "unavailable".to_owned(), String::new()))
                .collect(),
            _ => bail!("{method} {path}: {status} {reply}"),
        };
        let mut again = Vec::new();
        for (at, code, message) in failures {
            let Some(&index) = pending.get(at) else { continue };
            match transient(&code) {
                true => again.push(index),
                false => refused.rows.push((index, code, message)),
            }
        }
        if again.is_empty() {
            return Ok(refused);
        }
        ensure!(
            attempt < MAX_RETRIES,
            "{method} {path}: the node was still unable to take {} rows after {MAX_RETRIES} tries",
            again.len()
        );
        pending = again;
        tokio::time::sleep(retry_after.map_or(RETRY_PAUSE, Duration::from_secs)).await;
    }
    unreachable!("the loop returns or fails")
}

/// `[{index, code, message}]` as tuples.
fn row_failures(list: &Value) -> Vec<(usize, String, String)> {
    list.as_array()
        .map(|failures| {
            failures
                .iter()
                .filter_map(|failure| {
                    Some((
                        failure["index"].as_u64()? as usize,
                        failure["code"].as_str().unwrap_or("rejected").to_owned(),
                        failure["message"].as_str().unwrap_or_default().to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_read_as_numbers_booleans_or_strings() {
        assert_eq!(typed("42".into()), json!(42));
        assert_eq!(typed("4.5".into()), json!(4.5));
        assert_eq!(typed("true".into()), json!(true));
        assert_eq!(typed("Toy Story (1995)".into()), json!("Toy Story (1995)"));
        assert_eq!(typed("NaN".into()), json!("NaN"));
    }
}

//! Runs the cases of one catalog against its server, each case in its own
//! conversation, and collects every failure instead of stopping at the first; the
//! report of a whole suite run.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::case::{Answer, Case, Question, Turn};
use super::catalog::Catalog;
use super::want::{Before, Expected, Position};
use crate::common::TestServer;

pub const CHAT: &str = "/chat";

/// Why one turn of a case failed.
#[derive(Debug)]
pub struct Failure {
    /// 1-based.
    pub turn: usize,
    pub message: String,
    pub why: String,
}

/// What running one case gave.
#[derive(Debug)]
pub struct Outcome {
    pub case: String,
    pub messages: usize,
    pub passed_messages: usize,
    pub failures: Vec<Failure>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// `POST /chat`; an answer other than 200 is an error.
pub fn chat(server: &TestServer, body: Value) -> Result<Value, String> {
    let (status, answer) = server.admin_post(CHAT, body);
    match status.as_u16() {
        200 => Ok(answer),
        _ => Err(format!("HTTP {status}: {answer}")),
    }
}

/// The item ids of an answer.
pub fn item_ids(answer: &Value) -> Result<Vec<String>, String> {
    let items = answer["items"]
        .as_array()
        .ok_or_else(|| format!("no items array in {answer}"))?;
    items
        .iter()
        .map(|item| {
            item["item_id"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("an item without item_id: {item}"))
        })
        .collect()
}

pub fn run_cases(server: &TestServer, catalog: &Catalog, cases: &[Case]) -> Vec<Outcome> {
    cases.iter().map(|case| run_case(server, catalog, case)).collect()
}

fn run_case(server: &TestServer, catalog: &Catalog, case: &Case) -> Outcome {
    let mut conversation = Conversation::default();
    let mut outcome = Outcome {
        case: case.name.clone(),
        messages: case.turns.len(),
        passed_messages: 0,
        failures: Vec::new(),
    };
    for (index, turn) in case.turns.iter().enumerate() {
        let (why, goes_on) = match conversation.take(server, catalog, turn) {
            Ok(problems) if problems.is_empty() => {
                outcome.passed_messages += 1;
                continue;
            }
            Ok(problems) => (problems.join("; "), true),
            Err(stop) => (format!("{stop} (later turns not run)"), false),
        };
        outcome.failures.push(Failure {
            turn: index + 1,
            message: turn.message.to_owned(),
            why,
        });
        if !goes_on {
            break;
        }
    }
    outcome
}

/// A conversation in progress: its id and what it showed.
#[derive(Default)]
struct Conversation {
    id: Option<String>,
    before: Option<Answered>,
    /// Every item shown so far.
    shown: HashSet<String>,
}

/// A turn that was answered.
struct Answered {
    expected: Expected,
    constraints: Value,
    items: Vec<String>,
}

impl Conversation {
    /// Sends the turn's message and checks the answer: the problems found, or why
    /// the conversation cannot go on.
    fn take(&mut self, server: &TestServer, catalog: &Catalog, turn: &Turn) -> Result<Vec<String>, String> {
        let mut body = json!({"message": turn.message});
        if let Some(id) = &self.id {
            body["conversation_id"] = json!(id);
        }
        let answer = chat(server, body)?;
        let items = item_ids(&answer)?;
        let reply = answer["message"].as_str().unwrap_or_default();
        let constraints = answer.get("constraints").cloned().unwrap_or(Value::Null);
        let before = self.before.as_ref().map(|answered| Before {
            expected: &answered.expected,
            items: &answered.items,
        });
        let expected = turn
            .want
            .resolve(catalog, before.as_ref())
            .map_err(|error| format!("cannot check: {error}"))?;

        let mut problems = constraint_problems(&expected, &constraints, turn.want.unchanged, self.before.as_ref());
        let context = Context {
            catalog,
            expected: &expected,
            items: &items,
            reply,
            before: self.before.as_ref().map(|answered| answered.items.as_slice()),
            shown: &self.shown,
        };
        problems.extend(context.check(turn.answer));
        for text in &turn.says {
            if !reply.contains(text) {
                problems.push(format!("the reply does not say {text:?}: {reply:?}"));
            }
        }

        if let Some(id) = answer["conversation_id"].as_str() {
            self.id = Some(id.to_owned());
        }
        self.shown.extend(items.iter().cloned());
        self.before = Some(Answered {
            expected,
            constraints,
            items,
        });
        Ok(problems)
    }
}

/// The problems of an answer that must match `expected`: its constraints and its items.
pub fn matching_problems(catalog: &Catalog, expected: &Expected, answer: &Value) -> Vec<String> {
    let items = match item_ids(answer) {
        Ok(items) => items,
        Err(error) => return vec![error],
    };
    let mut problems = constraint_problems(expected, &answer["constraints"], false, None);
    let context = Context {
        catalog,
        expected,
        items: &items,
        reply: "",
        before: None,
        shown: &HashSet::new(),
    };
    problems.extend(context.matching(false));
    problems
}

/// The answer's constraints: those of the previous answer when the turn changes
/// nothing (`unchanged`), else as expected.
fn constraint_problems(
    expected: &Expected,
    constraints: &Value,
    unchanged: bool,
    before: Option<&Answered>,
) -> Vec<String> {
    match (constraints, before) {
        (Value::Null, _) => vec!["no constraints in the answer".to_owned()],
        (_, Some(before)) if unchanged && *constraints != before.constraints => vec![format!(
            "constraints changed: {} before, {constraints} now",
            before.constraints
        )],
        _ if unchanged => Vec::new(),
        _ => expected.mismatches(constraints),
    }
}

/// What an answer's items and reply are checked against.
struct Context<'a> {
    catalog: &'a Catalog,
    expected: &'a Expected,
    items: &'a [String],
    reply: &'a str,
    /// The previous answer's items.
    before: Option<&'a [String]>,
    shown: &'a HashSet<String>,
}

impl Context<'_> {
    fn check(&self, answer: Answer) -> Vec<String> {
        match answer {
            Answer::Matching => self.matching(false),
            Answer::Unseen => self.matching(true),
            Answer::NothingUnlessPriceRelaxed => self.nothing(),
            Answer::About(position, question) => self.about(position, question),
        }
    }

    /// Every item satisfies the expectation (and was not shown before when `unseen`);
    /// some item comes back when the catalog has one.
    fn matching(&self, unseen: bool) -> Vec<String> {
        let mut problems = Vec::new();
        for id in self.items {
            let Some(item) = self.catalog.get(id) else {
                problems.push(format!("item {id} is not in the catalog"));
                continue;
            };
            let mut why = self.expected.violations(item);
            if unseen && self.shown.contains(id) {
                why.push("shown before".into());
            }
            if !why.is_empty() {
                problems.push(format!("{:?} ({id}) {}", item.title, why.join(", ")));
            }
        }
        let candidates = self
            .expected
            .matching(self.catalog)
            .filter(|item| !unseen || !self.shown.contains(&item.id))
            .count();
        if self.items.is_empty() && candidates > 0 {
            problems.push(format!("no items, but {candidates} catalog items match"));
        }
        problems
    }

    fn nothing(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let matches = self.expected.matching(self.catalog).count();
        if matches > 0 {
            problems.push(format!(
                "case error: {matches} catalog items match, the case expects none"
            ));
        }
        if !self.items.is_empty() {
            problems.push(format!("expected no items, got {:?}", self.items));
        }
        let relaxed = self.expected.without_price().matching(self.catalog).count();
        let would_match = format!(" {relaxed} item");
        for text in ["I found no", "Relax", &would_match] {
            if !self.reply.contains(text) {
                problems.push(format!("the reply does not say {text:?}: {:?}", self.reply));
            }
        }
        problems
    }

    /// Only the item at `position` of the previous answer, and the reply answers `question`.
    fn about(&self, position: Position, question: Question) -> Vec<String> {
        let Some(target) = self.before.and_then(|items| position.pick(items)) else {
            return vec![format!(
                "nothing to refer to: the previous answer has no item at {position}"
            )];
        };
        let Some(item) = self.catalog.get(target) else {
            return vec![format!("item {target} is not in the catalog")];
        };
        let mut problems = Vec::new();
        if self.items != [target.clone()] {
            problems.push(format!(
                "expected only {target} ({:?}), got {:?}",
                item.title, self.items
            ));
        }
        let answer = match question {
            Question::Availability => match item.status {
                "available" => " is available.".to_owned(),
                "unavailable" => " is not available.".to_owned(),
                _ => "I don't know whether".to_owned(),
            },
            Question::Price => format!("costs {}.", item.price_text()),
        };
        if !self.reply.contains(&answer) {
            problems.push(format!("the reply does not say {answer:?}: {:?}", self.reply));
        }
        problems
    }
}

/// The outcomes of one catalog's cases.
pub struct CatalogRun {
    pub catalog: String,
    pub items: usize,
    pub outcomes: Vec<Outcome>,
}

impl CatalogRun {
    fn cases(&self) -> usize {
        self.outcomes.len()
    }

    fn passed(&self) -> usize {
        self.outcomes.iter().filter(|outcome| outcome.passed()).count()
    }

    fn messages(&self) -> usize {
        self.outcomes.iter().map(|outcome| outcome.messages).sum()
    }

    fn passed_messages(&self) -> usize {
        self.outcomes.iter().map(|outcome| outcome.passed_messages).sum()
    }
}

/// A whole suite run.
pub struct Report {
    pub runs: Vec<CatalogRun>,
}

/// 9742 → "9,742", as BENCHMARKS.md writes counts.
fn thousands(count: usize) -> String {
    let digits = count.to_string();
    let mut text = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

impl Report {
    fn total(&self, count: impl Fn(&CatalogRun) -> usize) -> usize {
        self.runs.iter().map(count).sum()
    }

    pub fn all_passed(&self) -> bool {
        self.total(CatalogRun::passed) == self.total(CatalogRun::cases)
    }

    /// "chat phrase suite: N cases (M messages), P passed (x%)"
    pub fn summary(&self) -> String {
        let (cases, passed) = (self.total(CatalogRun::cases), self.total(CatalogRun::passed));
        format!(
            "chat phrase suite: {cases} cases ({} messages), {passed} passed ({:.1}%)",
            self.total(CatalogRun::messages),
            percent(passed, cases)
        )
    }

    /// Every failed turn, one line each.
    pub fn failure_table(&self) -> String {
        let mut table = String::from("| catalog | case | turn | message | failure |\n|---|---|---:|---|---|\n");
        for run in &self.runs {
            for outcome in &run.outcomes {
                for failure in &outcome.failures {
                    table.push_str(&format!(
                        "| {} | {} | {} | {} | {} |\n",
                        run.catalog,
                        outcome.case,
                        failure.turn,
                        failure.message,
                        failure.why.replace('|', "\\|")
                    ));
                }
            }
        }
        table
    }

    /// The section for BENCHMARKS.md.
    pub fn markdown(&self, measured_at: &str) -> String {
        let mut text = format!(
            "## Chat phrase suite\n\nMeasured {measured_at} with `tests/it/chat_phrases.rs`.\n\n\
             - Command: `CHAT_SUITE_REPORT=FILE cargo test --release --test it -- chat_phrases::`\n\
             - A case is one conversation (a single message or a multi-turn script); it passes when every \
             turn's constraints, items and reply are as issue 18 says.\n\n\
             | catalog | items | cases | messages | cases passed | messages passed |\n\
             |---|---:|---:|---:|---:|---:|\n"
        );
        for run in &self.runs {
            text.push_str(&format!(
                "| {} | {} | {} | {} | {} ({:.1}%) | {} ({:.1}%) |\n",
                run.catalog,
                thousands(run.items),
                run.cases(),
                run.messages(),
                run.passed(),
                percent(run.passed(), run.cases()),
                run.passed_messages(),
                percent(run.passed_messages(), run.messages())
            ));
        }
        let (cases, messages) = (self.total(CatalogRun::cases), self.total(CatalogRun::messages));
        let (passed, passed_messages) = (self.total(CatalogRun::passed), self.total(CatalogRun::passed_messages));
        text.push_str(&format!(
            "| all | | {cases} | {messages} | {passed} ({:.1}%) | {passed_messages} ({:.1}%) |\n\n\
             Pass rate: **{passed}/{cases} cases ({:.1}%)**, {messages} messages.\n",
            percent(passed, cases),
            percent(passed_messages, messages),
            percent(passed, cases)
        ));
        text
    }
}

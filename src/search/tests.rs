//! The index against an in-memory catalog: ranking of titles and typos, the
//! change feed, the vocabulary, clean reopen and rebuild.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::json;

use super::*;
use crate::config::Config;

/// An in-memory catalog.
#[derive(Default)]
struct Memory {
    rows: Mutex<BTreeMap<(String, String), Map<String, Value>>>,
}

impl Memory {
    fn put(&self, table: &str, id: &str, fields: Value) {
        let mut row = fields.as_object().unwrap().clone();
        row.insert("id".into(), json!(id));
        row.insert("_table".into(), json!(table));
        self.rows.lock().insert((table.into(), id.into()), row);
    }
}

impl ItemSource for Memory {
    fn row(&self, table: &str, id: &str) -> Result<Option<Map<String, Value>>, SourceError> {
        Ok(self.rows.lock().get(&(table.to_owned(), id.to_owned())).cloned())
    }

    fn scan(&self, visit: &mut dyn FnMut(Map<String, Value>)) -> Result<(), SourceError> {
        for row in self.rows.lock().values() {
            visit(row.clone());
        }
        Ok(())
    }
}

fn config() -> SearchConfig {
    SearchConfig {
        commit_interval_ms: 20,
        ..Config::load(None).unwrap().search
    }
}

fn movies() -> Arc<Memory> {
    let memory = Arc::new(Memory::default());
    for (id, name, genres) in [
        ("1", "Toy Story (1995)", json!(["Animation", "Children", "Comedy"])),
        ("2", "Jumanji (1995)", json!(["Adventure", "Children", "Fantasy"])),
        ("3", "Toy Story 2 (1999)", json!(["Animation", "Children", "Comedy"])),
        ("4", "Heat (1995)", json!(["Action", "Crime", "Thriller"])),
        ("5", "The Story of Us (1999)", json!(["Comedy", "Drama"])),
        ("6", "Matrix, The (1999)", json!(["Action", "Sci-Fi"])),
    ] {
        memory.put("movies", id, json!({"name": name, "groups": genres}));
    }
    memory.put(
        "movies",
        "7",
        json!({"name": "Gone", "groups": ["Drama"], "is_deleted": true}),
    );
    memory
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes movie `id` to the catalog and tells the index.
fn upsert(memory: &Memory, changes: &Sender<IndexChange>, id: &str, fields: Value) {
    memory.put("movies", id, fields);
    changes
        .send(IndexChange::Item {
            table: "movies".into(),
            id: id.into(),
        })
        .unwrap();
}

fn ids(hits: &[TextHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.id.as_str()).collect()
}

fn open(directory: &Path, source: Arc<Memory>) -> (SearchIndex, Sender<IndexChange>) {
    let (changes, receiver) = crossbeam::channel::unbounded();
    let index = SearchIndex::open(directory, &config(), source, receiver).unwrap();
    wait_until("the catalog is loaded", || index.is_loaded());
    (index, changes)
}

#[test]
fn titles_rank_first_and_typos_still_find_them() {
    let directory = tempfile::tempdir().unwrap();
    let (index, _changes) = open(&directory.path().join("search"), movies());
    assert_eq!(index.documents(), 6, "the soft-deleted row is not indexed");
    assert_eq!(ids(&index.text_search("toy story", 10).unwrap())[..2], ["1", "3"]);
    assert_eq!(ids(&index.text_search("jumaji", 10).unwrap()), ["2"]);
    assert_eq!(ids(&index.text_search("Toy Stroy", 10).unwrap())[0], "1");
    assert_eq!(ids(&index.text_search("matirx", 10).unwrap()), ["6"]);
    assert_eq!(ids(&index.text_search("thriller", 10).unwrap()), ["4"]);
    assert!(index.text_search("gone", 10).unwrap().is_empty());
    assert!(index.text_search("", 10).unwrap().is_empty());
    assert_eq!(index.text_search("story", 2).unwrap().len(), 2);
    let scores = index.score_ids("story", &["3".into(), "4".into(), "5".into()]).unwrap();
    assert_eq!(scores.len(), 2, "{scores:?}");
    assert!(scores.contains_key("3") && scores.contains_key("5"));
    let vocabulary = index.labels();
    assert_eq!(vocabulary.groups.get("sci-fi").map(String::as_str), Some("Sci-Fi"));
    assert!(vocabulary.groups.contains_key("drama"), "item 5 carries it");
    index.stop();
}

/// A shop's worth of the traps: a category word in unrelated titles, a
/// plural, a misspelling, a well-known item among equal matches.
fn shop() -> Arc<Memory> {
    let memory = Arc::new(Memory::default());
    for (id, title, category, tags) in [
        ("t1", "The Toy", "Comedy", json!([])),
        ("t2", "Toy Story", "Animation", json!(["pixar"])),
        ("t3", "Toy Story 2", "Animation", json!(["pixar"])),
        ("a1", "Re-Animator", "Horror", json!([])),
        ("a2", "Finding Nemo", "Animation", json!(["pixar"])),
        ("a3", "Spirited Away", "Animation", json!(["anime"])),
        ("c1", "Comedy Night Live", "Stand-up", json!([])),
        ("c2", "Groundhog Day", "Comedy", json!([])),
        ("j1", "Jurassic Park", "Adventure", json!(["dinosaurs"])),
        ("j2", "Park Life", "Drama", json!([])),
    ] {
        memory.put(
            "movies",
            id,
            json!({"title": title, "category": category, "tags": tags}),
        );
    }
    memory
}

fn priors(popular: &[(&str, f32)]) -> Arc<Priors> {
    Arc::new(Priors::new(
        popular.iter().map(|(id, prior)| (item_hash(id), *prior)).collect(),
    ))
}

#[test]
fn coverage_ties_go_to_the_prior_and_a_named_label_matches_its_items() {
    let directory = tempfile::tempdir().unwrap();
    let (index, _changes) = open(&directory.path().join("search"), shop());
    let wanted = |text: &str, labels: &[&str]| Wanted {
        tokens: index.tokens(text),
        labels: labels.iter().map(|label| label.to_string()).collect(),
        ..Wanted::default()
    };
    let popular = priors(&[
        ("t2", 1.0),
        ("t3", 0.8),
        ("a2", 0.9),
        ("a3", 0.5),
        ("c2", 0.7),
        ("a1", 0.6),
    ]);
    let find = |wanted: &Wanted| index.find(wanted, 10, &[], popular.clone(), 0.3).unwrap();

    // "toy": every toy title covers the query; the well-known one comes first.
    let toy = find(&wanted("toy", &[]));
    assert_eq!(ids(&toy)[..3], ["t2", "t3", "t1"]);
    assert!(toy.iter().all(|hit| (hit.score - 1.0).abs() < 1e-5), "{toy:?}");
    // A specific title still wins over popularity.
    assert_eq!(ids(&find(&wanted("the toy", &[])))[0], "t1");
    // The label Animation: its items, popular first; Re-Animator's word only after.
    let animation = find(&wanted("", &["animation"]));
    assert_eq!(ids(&animation)[..4], ["t2", "a2", "t3", "a3"]);
    assert!(
        !ids(&animation).contains(&"a1") || animation.iter().position(|h| h.id == "a1") > Some(3),
        "{animation:?}"
    );
    // Stems and typos together: a plural, and a misspelt word.
    assert_eq!(
        ids(&find(&wanted("comedies", &[])))[0],
        "c1",
        "the stem of comedy in a title"
    );
    assert_eq!(ids(&find(&wanted("jurasic park", &[])))[0], "j1");
    // Exclusions: a label or a word ruled out.
    let no_pixar = Wanted {
        excluded_labels: vec!["pixar".into()],
        ..wanted("", &["animation"])
    };
    let no_pixar = find(&no_pixar);
    assert_eq!(ids(&no_pixar)[0], "a3");
    assert!(
        no_pixar
            .iter()
            .all(|hit| !["t2", "t3", "a2"].contains(&hit.id.as_str())),
        "{no_pixar:?}"
    );
    let not_toys = Wanted {
        excluded_words: vec!["toy".into()],
        ..wanted("story", &[])
    };
    assert!(find(&not_toys).is_empty());
    let only_excluded = Wanted {
        excluded_labels: vec!["animation".into()],
        ..Wanted::default()
    };
    let rest = find(&only_excluded);
    assert_eq!(rest.len(), 6, "everything but the excluded label: {rest:?}");
    assert_eq!(rest[0].id, "c2", "by prior");
    // In titles only: "comedy" is the label of t1 and c2, the title of c1.
    assert_eq!(ids(&find(&wanted("comedy", &[]))).len(), 3);
    let titles = Wanted {
        titles_only: true,
        ..wanted("comedy", &[])
    };
    assert_eq!(ids(&find(&titles)), ["c1"]);
    index.stop();
}

/// A word a field has as typed is taken as meant there; one it lacks is looked for
/// within its typos.
#[test]
fn a_word_the_index_has_is_not_expanded_to_its_typos() {
    let directory = tempfile::tempdir().unwrap();
    let memory = Arc::new(Memory::default());
    for (id, name) in [("e", "East of Eden"), ("a", "Easy Rider"), ("b", "Beast")] {
        memory.put("movies", id, json!({ "name": name }));
    }
    let (index, _changes) = open(&directory.path().join("search"), memory);
    let find = |text: &str| {
        let wanted = Wanted {
            tokens: index.tokens(text),
            ..Wanted::default()
        };
        let hits = index.find(&wanted, 10, &[], priors(&[]), 0.0).unwrap();
        let mut found: Vec<String> = ids(&hits).into_iter().map(str::to_owned).collect();
        found.sort();
        found
    };
    assert_eq!(find("east"), ["e"], "not \"easy\", a typo away");
    assert_eq!(find("eazy"), ["a"], "a word the index lacks finds its neighbour");
    assert_eq!(find("easty"), ["a", "e"], "within one typo of both");
    index.stop();
}

#[test]
fn changes_are_followed_and_a_clean_stop_is_trusted() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("search");
    let memory = movies();
    let (index, changes) = open(&path, memory.clone());
    upsert(&memory, &changes, "8", json!({"name": "Paddington", "tags": ["bear"]}));
    wait_until("the upsert is searchable", || {
        ids(&index.text_search("paddington", 5).unwrap()) == ["8"]
    });
    assert!(index.labels().tags.contains_key("bear"));
    upsert(
        &memory,
        &changes,
        "8",
        json!({"name": "Paddington", "is_deleted": true}),
    );
    wait_until("the soft delete is gone", || {
        index.text_search("paddington", 5).unwrap().is_empty()
    });
    assert!(!index.labels().tags.contains_key("bear"));
    memory.rows.lock().remove(&("movies".to_owned(), "2".to_owned()));
    changes
        .send(IndexChange::Item {
            table: "movies".into(),
            id: "2".into(),
        })
        .unwrap();
    wait_until("the purge is gone", || {
        index.text_search("jumanji", 5).unwrap().is_empty()
    });
    index.stop();
    drop(index);

    // A clean stop: the index is trusted as it is (a row only storage has stays unindexed).
    memory.put("movies", "9", json!({"name": "Unseen"}));
    let (index, changes) = open(&path, memory.clone());
    assert!(index.text_search("unseen", 5).unwrap().is_empty());
    assert_eq!(index.documents(), 5);
    memory.rows.lock().retain(|(table, _), _| table != "movies");
    changes.send(IndexChange::Table("movies".into())).unwrap();
    wait_until("the dropped table is gone", || index.documents() == 0);
    assert!(index.labels().groups.is_empty());
    index.stop();
}

#[test]
fn what_is_kept_of_segments_follows_the_index() {
    let directory = tempfile::tempdir().unwrap();
    let memory = movies();
    let (index, changes) = open(&directory.path().join("search"), memory.clone());
    // The typo walk of the first segment is kept...
    assert_eq!(ids(&index.text_search("matirx", 10).unwrap()), ["6"]);
    // ...and a segment written after it is walked for the same token.
    upsert(&memory, &changes, "8", json!({"name": "Matrx Reloaded"}));
    wait_until("the upsert is searchable", || {
        index.text_search("reloaded", 5).unwrap().len() == 1
    });
    let mut found = ids(&index.text_search("matirx", 10).unwrap())
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    found.sort();
    assert_eq!(found, ["6", "8"], "each hit named by its own segment's keys");
    // What is kept of segments no searcher has any more is dropped.
    let searcher = index.reader.searcher();
    assert!(index.segments.len() >= searcher.segment_readers().len());
    index.segments.garbage_collect(&[searcher.generation()]);
    assert_eq!(index.segments.len(), searcher.segment_readers().len());
    index.stop();
}

#[test]
fn a_kept_answer_holds_only_for_its_generation_and_priors() {
    let directory = tempfile::tempdir().unwrap();
    let memory = movies();
    let (index, changes) = open(&directory.path().join("search"), memory.clone());
    let story = Wanted {
        tokens: index.tokens("story"),
        ..Wanted::default()
    };
    let find = |priors: &Arc<Priors>| index.find(&story, 10, &[], priors.clone(), 0.5).unwrap();
    let kept = |priors: &Arc<Priors>| {
        index
            .find_kept(&story, 10, &[], priors, 0.5)
            .map(|hits| hits.unwrap().iter().map(|hit| hit.id.clone()).collect::<Vec<_>>())
    };
    let first_us = priors(&[("5", 1.0)]);
    assert_eq!(kept(&first_us), None, "not asked yet");
    let found = find(&first_us);
    assert_eq!(ids(&found)[0], "5");
    assert_eq!(ids(&find(&first_us))[0], "5", "asked again: the kept answer");
    assert_eq!(
        kept(&first_us),
        Some(ids(&found).into_iter().map(str::to_owned).collect())
    );
    // Other priors: found again, not the answer kept for the first ones.
    let first_toys = priors(&[("3", 1.0)]);
    assert_eq!(kept(&first_toys), None);
    assert_eq!(ids(&find(&first_toys))[0], "3");
    // A commit: the new item is found, not the answer kept before it.
    upsert(&memory, &changes, "8", json!({"name": "A Story"}));
    wait_until("the upsert is searchable", || index.documents() == 7);
    assert_eq!(kept(&first_toys), None, "kept for the searcher before the commit");
    assert!(ids(&find(&first_toys)).contains(&"8"));
    index.stop();
}

#[test]
fn an_unclean_or_missing_index_is_rebuilt() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("search");
    let memory = movies();
    {
        let (index, _changes) = open(&path, memory.clone());
        assert_eq!(index.documents(), 6);
        // The last commit is not marked clean, as after a crash.
        index.abandon();
    }
    memory.put("movies", "9", json!({"name": "Unseen"}));
    let (index, _changes) = open(&path, memory.clone());
    assert_eq!(ids(&index.text_search("unseen", 5).unwrap()), ["9"]);
    index.stop();
    drop(index);
    std::fs::remove_dir_all(&path).unwrap();
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("meta.json"), b"not json").unwrap();
    let (index, _changes) = open(&path, memory);
    assert_eq!(index.documents(), 7);
    index.stop();
}

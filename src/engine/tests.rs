//! The engine against a real RocksDB in a temp dir whose reads and writes fail on
//! demand: a failed persist, wipe or read reaches the caller, and an unreadable
//! snapshot is rebuilt from the event log.

use std::sync::Arc;

use serde_json::json;

use super::catalog::RowKind;
use super::*;
use crate::clock::SystemClock;
use crate::config::{Config, Durability};
use crate::domain::event::decode_v1;
use crate::topology::{Ownership, Topology, SINGLE_TOML};
use crate::training::Training;

struct TestEngine {
    engine: Engine,
    storage: Storage,
    training: Arc<Training>,
}

fn start(dir: &std::path::Path, storage: Option<Storage>) -> TestEngine {
    start_with(dir, storage, Config::load(None).unwrap())
}

fn start_with(dir: &std::path::Path, storage: Option<Storage>, config: Config) -> TestEngine {
    let storage = storage.unwrap_or_else(|| Storage::open(dir, Durability::Sync).unwrap());
    let topology = Topology::parse(SINGLE_TOML).unwrap();
    let training = Training::start(storage.clone(), topology.shards, config.training.clone()).unwrap();
    let all: Vec<_> = (0..topology.shards).collect();
    let engine = Engine::start(
        storage.clone(),
        Ownership::new("single", 0, topology, &all),
        Arc::new(SystemClock),
        &config.engine,
        training.clone(),
    )
    .unwrap();
    TestEngine {
        engine,
        storage,
        training,
    }
}

impl TestEngine {
    fn stop(self) -> Storage {
        self.engine.stop();
        self.training.stop();
        self.storage
    }
}

/// A click received `at` ms after a fixed time (events received in order).
fn click_at(at: i64, id: &str, sid: &str, uid: Option<&str>, item: &str) -> Event {
    let now = 1_700_000_000_000 + at;
    let body = json!({"id": id, "type": "click", "click_type": "tap", "sid": sid, "uid": uid, "item_id": item,
                      "original_timestamp": crate::timestamp::format_rfc3339(now)});
    decode_v1(body, now, || unreachable!("the id is given")).unwrap()
}

fn click(id: &str, sid: &str, uid: Option<&str>, item: &str) -> Event {
    click_at(0, id, sid, uid, item)
}

fn checkpoint_mark(storage: &Storage) -> Vec<Option<Vec<u8>>> {
    (0..8)
        .map(|shard| storage.get(Cf::State, &layout::checkpoint(shard)).unwrap())
        .collect()
}

#[actix_rt::test]
async fn a_checkpoint_that_cannot_persist_fails_and_keeps_the_replay_point() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    let accepted = node.engine.ingest(vec![click("e1", "s1", None, "a")]).await;
    assert!(accepted[0].is_ok(), "{accepted:?}");
    node.engine.checkpoint().await.unwrap();
    let before = checkpoint_mark(&node.storage);

    node.engine.ingest(vec![click("e2", "s1", None, "b")]).await[0]
        .as_ref()
        .unwrap();
    // Only the session's snapshot fails: the checkpoint marks themselves could be written.
    let shard = Topology::parse(SINGLE_TOML).unwrap().shard_for(b"s1");
    node.storage
        .faults()
        .fail_key_writes(Cf::State, &layout::session_state(shard, "s1"));
    let failed = node.engine.checkpoint().await;
    assert!(matches!(failed, Err(LiveStateError::Storage(_))), "{failed:?}");
    assert_eq!(checkpoint_mark(&node.storage), before, "no replay point moved");

    node.storage.faults().clear_key_writes();
    node.engine.checkpoint().await.unwrap();
    assert_ne!(checkpoint_mark(&node.storage), before, "the retry moves it");
    node.stop();
}

#[actix_rt::test]
async fn a_checkpoint_persists_every_changed_state_across_its_batches() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    let sids: Vec<String> = (0..400).map(|n| format!("s{n}")).collect();
    let events = sids
        .iter()
        .enumerate()
        .map(|(n, sid)| click_at(n as i64, &format!("e{n}"), sid, None, "a"))
        .collect();
    assert!(node.engine.ingest(events).await.iter().all(Result::is_ok));
    node.engine.checkpoint().await.unwrap();
    // The replay point moved past every event: a state the checkpoint did not
    // write would come back empty.
    let storage = node.stop();
    let node = start(dir.path(), Some(storage));
    node.engine.recover().await.unwrap();
    for sid in &sids {
        let (state, live) = node
            .engine
            .read_state(LiveStateId::Session(sid.clone()))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{sid} has no state"));
        assert!(!live, "{sid} is read from its persisted state");
        assert_eq!(state.event_count, 1, "{sid}: {state:?}");
    }
    node.stop();
}

#[actix_rt::test]
async fn a_user_delete_that_cannot_wipe_live_state_fails() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    node.engine.ingest(vec![click("e1", "s1", Some("u1"), "a")]).await[0]
        .as_ref()
        .unwrap();
    let shard = Topology::parse(SINGLE_TOML).unwrap().shard_for(b"u1");
    node.storage
        .faults()
        .fail_key_writes(Cf::State, &layout::user_state(shard, "u1"));
    let failed = node.engine.delete_user("u1", &[]).await;
    assert!(
        matches!(failed, Err(DeleteUserError::LiveState(LiveStateError::Storage(_)))),
        "{failed:?}"
    );
    let user = node.engine.read_state(LiveStateId::User("u1".into())).await.unwrap();
    assert!(user.is_some(), "the state is still there, and the caller was told");

    node.storage.faults().clear_key_writes();
    node.engine.delete_user("u1", &[]).await.unwrap();
    for key in [LiveStateId::User("u1".into()), LiveStateId::Session("s1".into())] {
        assert!(node.engine.read_state(key).await.unwrap().is_none(), "wiped on retry");
    }
    node.stop();
}

#[actix_rt::test]
async fn an_unreadable_snapshot_is_rebuilt_from_the_event_log() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    let events = vec![
        click_at(1, "e1", "s1", None, "a"),
        click_at(2, "e2", "s1", Some("u1"), "b"),
        click_at(3, "e3", "s1", Some("u1"), "c"),
    ];
    for event in events {
        node.engine.ingest(vec![event]).await[0].as_ref().unwrap();
    }
    node.engine.checkpoint().await.unwrap();
    let (before, _) = node
        .engine
        .read_state(LiveStateId::Session("s1".into()))
        .await
        .unwrap()
        .unwrap();
    let storage = node.stop();
    let shard = Topology::parse(SINGLE_TOML).unwrap().shard_for(b"s1");
    storage
        .put_unlogged(
            Cf::State,
            &layout::session_state(shard, "s1"),
            b"\xff\xfenot a snapshot",
        )
        .unwrap();

    let node = start(dir.path(), Some(storage));
    node.engine.recover().await.unwrap();
    let (after, live) = node
        .engine
        .read_state(LiveStateId::Session("s1".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(!live);
    assert_eq!(after.event_count, 3, "{after:?}");
    assert_eq!(after.recent, before.recent);
    assert_eq!(after.uid.as_deref(), Some("u1"));
    // An event for the session starts its actor from the rebuilt state.
    node.engine.ingest(vec![click_at(4, "e4", "s1", None, "d")]).await[0]
        .as_ref()
        .unwrap();
    let (live_state, live) = node
        .engine
        .read_state(LiveStateId::Session("s1".into()))
        .await
        .unwrap()
        .unwrap();
    assert!(live);
    assert_eq!(live_state.event_count, 4);
    node.stop();
}

/// A copy of an event that arrives while the first copy is being written (the REST
/// call and the consumer reading the REST topic) is a duplicate only once the first is
/// stored; when that write fails, the copy fails too and a retry stores the event. An
/// earlier answer let a consumer move its offset past an event a failed write lost.
#[actix_rt::test]
async fn a_copy_in_flight_is_a_duplicate_only_once_the_first_is_stored() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    let event = click("e1", "s1", Some("u1"), "p1");
    node.storage.faults().fail_key_writes(Cf::Events, &[]);
    node.storage.faults().hold_writes(true);
    let mut first = Box::pin(node.engine.ingest(vec![event.clone()]));
    let early = tokio::time::timeout(Duration::from_millis(100), &mut first).await;
    assert!(early.is_err(), "held writes answered: {early:?}");
    let mut copy = Box::pin(node.engine.ingest(vec![event.clone()]));
    let early = tokio::time::timeout(Duration::from_millis(200), &mut copy).await;
    assert!(
        early.is_err(),
        "the copy was answered before the first was stored: {early:?}"
    );
    node.storage.faults().hold_writes(false);
    let (first, copy) = futures::join!(first, copy);
    assert!(first[0].is_err(), "{first:?}");
    assert!(
        matches!(&copy[0], Err(LiveStateError::Unavailable(reason)) if reason.contains("earlier copy")),
        "{copy:?}"
    );
    node.storage.faults().clear_key_writes();
    let retried = node.engine.ingest(vec![event.clone()]).await;
    assert_eq!(retried[0].as_ref().ok(), Some(&false), "{retried:?}");

    // Stored: a copy in flight is a duplicate, answered after the first is stored.
    let second = click("e2", "s1", Some("u1"), "p2");
    node.storage.faults().hold_writes(true);
    let mut first = Box::pin(node.engine.ingest(vec![second.clone()]));
    assert!(tokio::time::timeout(Duration::from_millis(100), &mut first)
        .await
        .is_err());
    let mut copy = Box::pin(node.engine.ingest(vec![second.clone(), event]));
    assert!(tokio::time::timeout(Duration::from_millis(200), &mut copy)
        .await
        .is_err());
    node.storage.faults().hold_writes(false);
    let (first, copy) = futures::join!(first, copy);
    assert_eq!(first[0].as_ref().ok(), Some(&false), "{first:?}");
    let copy: Vec<_> = copy.into_iter().map(Result::ok).collect();
    assert_eq!(copy, vec![Some(true), Some(true)]);
    node.stop();
}

#[actix_rt::test]
async fn read_errors_are_errors_not_absence() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    node.storage.faults().fail_reads(Cf::State, true);
    assert!(
        node.engine.stream_offset(0, "events").is_err(),
        "an unreadable offset is not 'no offset'"
    );
    let read = node.engine.read_state(LiveStateId::Session("nobody".into())).await;
    assert!(matches!(read, Err(LiveStateError::Storage(_))), "{read:?}");
    node.storage.faults().fail_reads(Cf::State, false);
    assert_eq!(node.engine.stream_offset(0, "events").unwrap(), None);

    let stored = node
        .engine
        .catalog()
        .upsert_rows(RowKind::Item, vec![json!({"id": "p0", "name": "boat"})])
        .await;
    assert!(stored[0].is_ok(), "{stored:?}");
    node.storage.faults().fail_reads(Cf::Items, true);
    assert!(
        node.engine.items().find("p1", None).is_err(),
        "an unreadable item is not an unknown one"
    );
    assert!(node.engine.items().features("p1").is_err());
    node.storage.faults().fail_reads(Cf::Items, false);
    assert_eq!(node.engine.items().find("p1", None).unwrap(), None);
    node.stop();
}

/// A row kept decoded is read anew once its item is written, soft-deleted or purged.
#[actix_rt::test]
async fn a_kept_row_follows_the_writes_of_its_item() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    let items = node.engine.items();
    let name = |table: Option<&str>| {
        items
            .row("p0", table)
            .unwrap()
            .map(|row| (row["name"].clone(), row.get("is_deleted").cloned()))
    };
    assert_eq!(name(None), None);
    let upsert = |name: &str| {
        node.engine
            .catalog()
            .upsert_rows(RowKind::Item, vec![json!({"id": "p0", "name": name})])
    };
    assert!(upsert("boat").await[0].is_ok());
    assert_eq!(name(None), Some((json!("boat"), Some(json!(false)))));
    assert_eq!(name(Some("items")), Some((json!("boat"), Some(json!(false)))));
    assert!(items.cached_rows().rows >= 1, "{:?}", items.cached_rows());
    assert!(upsert("ship").await[0].is_ok());
    assert_eq!(name(Some("items")), Some((json!("ship"), Some(json!(false)))));
    node.engine.catalog().delete_item("items", "p0", false).await.unwrap();
    assert_eq!(name(None), Some((json!("ship"), Some(json!(true)))));
    node.engine.catalog().delete_item("items", "p0", true).await.unwrap();
    assert_eq!(name(None), None);
    assert_eq!(items.cached_rows().rows, 0, "{:?}", items.cached_rows());
    node.stop();
}

/// Frozen models stay as they were: new events are not learned, and neither a
/// retrain nor the schedule rebuilds them from the log (offline evaluation relies
/// on it).
#[actix_rt::test]
async fn frozen_models_are_neither_learned_nor_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(dir.path(), None);
    assert!(node.engine.ingest(vec![click("e1", "s1", None, "a")]).await[0].is_ok());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while node.training.latest().events < 1 {
        assert!(std::time::Instant::now() < deadline, "the learner did not learn e1");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    node.training.set_frozen(true);
    assert!(node.engine.ingest(vec![click("e2", "s1", None, "b")]).await[0].is_ok());
    let refused = node.training.retrain().await;
    assert!(
        matches!(refused, Err(crate::training::TrainingError::Frozen)),
        "{refused:?}"
    );
    assert_eq!(node.training.latest().events, 1, "e2 was not learned");
    node.training.set_frozen(false);
    let report = node.training.retrain().await.unwrap();
    assert_eq!(report.events, 2, "thawed, a retrain learns the whole log");
    node.stop();
}

/// The live cap passivates the least recently used key to make room; one that cannot
/// persist stays live (nothing is lost) and the cap lets the shard hold one more
/// rather than drop it or try it again without end. Once writes succeed, the next
/// key to come passivates it.
#[actix_rt::test]
async fn a_live_key_that_cannot_persist_stays_live_over_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::load(None).unwrap();
    config.engine.max_live_actors_per_shard = 1;
    let node = start_with(dir.path(), None, config);
    let topology = Topology::parse(SINGLE_TOML).unwrap();
    let shard = topology.shard_for(b"s1");
    let mut same_shard = (2..)
        .map(|n| format!("s{n}"))
        .filter(|sid| topology.shard_for(sid.as_bytes()) == shard);
    let (second, third) = (same_shard.next().unwrap(), same_shard.next().unwrap());
    let live = |sid: &str| {
        let engine = &node.engine;
        let key = LiveStateId::Session(sid.to_owned());
        async move { engine.read_state(key).await.unwrap().map(|(_, live)| live) }
    };

    node.engine.ingest(vec![click_at(0, "e1", "s1", None, "a")]).await[0]
        .as_ref()
        .unwrap();
    node.storage
        .faults()
        .fail_key_writes(Cf::State, &layout::session_state(shard, "s1"));
    node.engine.ingest(vec![click_at(1, "e2", &second, None, "b")]).await[0]
        .as_ref()
        .unwrap();
    assert_eq!(
        live("s1").await,
        Some(true),
        "the key that could not persist stayed live"
    );
    assert_eq!(live(&second).await, Some(true));

    node.storage.faults().clear_key_writes();
    node.engine.ingest(vec![click_at(2, "e3", &third, None, "c")]).await[0]
        .as_ref()
        .unwrap();
    assert_eq!(live("s1").await, Some(false), "passivated once it could persist");
    let (state, _) = node
        .engine
        .read_state(LiveStateId::Session("s1".into()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.event_count, 1, "its event was persisted: {state:?}");
    assert_eq!(live(&third).await, Some(true));
    node.stop();
}

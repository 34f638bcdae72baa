//! Key encoding. Sharded keys start with the big-endian shard number so that a
//! shard is one contiguous key range; a `0x00` separates variable-length parts
//! (names and ids never contain it: the catalog refuses control characters).

use crate::topology::ShardId;

const SEPARATOR: u8 = 0x00;

fn with_shard(shard: ShardId, capacity: usize) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + capacity);
    key.extend_from_slice(&shard.to_be_bytes());
    key
}

/// `items`: `[shard][table]0x00[id]`.
pub fn item(shard: ShardId, table: &str, id: &str) -> Vec<u8> {
    let mut key = table_prefix(shard, table);
    key.extend_from_slice(id.as_bytes());
    key
}

/// The key range `[from, to)` of one table's items on one shard.
pub fn table_range(shard: ShardId, table: &str) -> (Vec<u8>, Vec<u8>) {
    let from = table_prefix(shard, table);
    let mut to = from.clone();
    *to.last_mut().expect("prefix ends with the separator") = SEPARATOR + 1;
    (from, to)
}

/// `[shard][table]0x00`: the prefix of one table's items on one shard.
pub fn table_prefix(shard: ShardId, table: &str) -> Vec<u8> {
    let mut key = with_shard(shard, table.len() + 1);
    key.extend_from_slice(table.as_bytes());
    key.push(SEPARATOR);
    key
}

/// `users`: `[shard][uid]`.
pub fn user(shard: ShardId, uid: &str) -> Vec<u8> {
    let mut key = with_shard(shard, uid.len());
    key.extend_from_slice(uid.as_bytes());
    key
}

/// `user_events`: `[shard][uid]0x00` — followed by the event key of each of the user's events.
pub fn user_events_prefix(shard: ShardId, uid: &str) -> Vec<u8> {
    name_prefix(shard, uid, 0)
}

/// `[shard][name]0x00`, with room for `more` bytes after it.
fn name_prefix(shard: ShardId, name: &str, more: usize) -> Vec<u8> {
    let mut key = with_shard(shard, name.len() + 1 + more);
    key.extend_from_slice(name.as_bytes());
    key.push(SEPARATOR);
    key
}

/// `events`, the shard's log: `[shard]0x00[seq u64 BE]`, in sequence order.
pub fn event_log(shard: ShardId, seq: u64) -> Vec<u8> {
    let mut key = event_log_prefix(shard);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The prefix of a shard's event log.
pub fn event_log_prefix(shard: ShardId) -> Vec<u8> {
    let mut key = with_shard(shard, 9);
    key.push(LOG_TAG);
    key
}

/// The shard whose log an event log key is in.
pub fn event_log_shard(key: &[u8]) -> Option<ShardId> {
    Some(ShardId::from_be_bytes(key.get(..2)?.try_into().ok()?))
}

/// The sequence number of an event log key.
pub fn event_log_seq(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(3..11)?.try_into().ok()?))
}

/// `events`, id index: `[shard]0x01[event id]` → the log key.
pub fn event_id(shard: ShardId, id: &str) -> Vec<u8> {
    let mut key = with_shard(shard, id.len() + 1);
    key.push(ID_TAG);
    key.extend_from_slice(id.as_bytes());
    key
}

/// `rankings`, what a recommend response showed: `[shard]0x02[rec_id]`.
pub fn rec(shard: ShardId, rec_id: &str) -> Vec<u8> {
    let mut key = with_shard(shard, rec_id.len() + 1);
    key.push(REC_TAG);
    key.extend_from_slice(rec_id.as_bytes());
    key
}

/// `models`: the learned artifacts of the node. The key names the encoding's version:
/// a node never decodes another version's artifacts (it relearns them from the log).
/// Stored whole under this key until chunks (below) replaced it.
pub const TRAINED: &[u8] = b"trained.5";
/// `models`: which generation of the artifacts' chunks to read (`training::stored`).
pub const TRAINED_HEAD: &[u8] = b"trained.5.head";
/// `models`: the prefix of the artifacts' chunks.
pub const TRAINED_CHUNKS: &[u8] = b"trained.5.chunk/";

/// `models`: chunk `index` of generation `generation`: `trained.5.chunk/[generation BE][index BE]`.
pub fn trained_chunk(generation: u64, index: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(TRAINED_CHUNKS.len() + 12);
    key.extend_from_slice(TRAINED_CHUNKS);
    key.extend_from_slice(&generation.to_be_bytes());
    key.extend_from_slice(&index.to_be_bytes());
    key
}
/// Artifacts of earlier encodings, deleted when the current ones are persisted.
pub const RETIRED_TRAINED: [&[u8]; 4] = [b"trained", b"trained.2", b"trained.3", b"trained.4"];

const LOG_TAG: u8 = 0x00;
const ID_TAG: u8 = 0x01;
const REC_TAG: u8 = 0x02;

/// `user_events`: `[shard][uid]0x00[log key]` → nothing (before 2026-11-28: the event id;
/// readers take the id from the logged event).
pub fn user_event(shard: ShardId, uid: &str, log_key: &[u8]) -> Vec<u8> {
    let mut key = name_prefix(shard, uid, log_key.len());
    key.extend_from_slice(log_key);
    key
}

/// `session_events`: `[shard][sid]0x00` — followed by a log key where the session's events start.
pub fn session_events_prefix(shard: ShardId, sid: &str) -> Vec<u8> {
    name_prefix(shard, sid, 0)
}

/// `session_events`: `[shard][sid]0x00[log key]` → nothing: the sid's events in that
/// log start at or after this key; `shard` is the sid's.
pub fn session_event(shard: ShardId, sid: &str, log_key: &[u8]) -> Vec<u8> {
    let mut key = name_prefix(shard, sid, log_key.len());
    key.extend_from_slice(log_key);
    key
}

/// `state`: a session's snapshot, `[shard]s[sid]`.
pub fn session_state(shard: ShardId, sid: &str) -> Vec<u8> {
    tagged(shard, b's', sid)
}

/// `state`: a user's snapshot, `[shard]u[uid]`.
pub fn user_state(shard: ShardId, uid: &str) -> Vec<u8> {
    tagged(shard, b'u', uid)
}

/// `state`: a chat conversation (turns and constraints), `[shard]v[conversation id]`.
pub fn conversation(shard: ShardId, id: &str) -> Vec<u8> {
    tagged(shard, b'v', id)
}

/// `state`: the prefix of one shard's conversations.
pub fn conversations_prefix(shard: ShardId) -> Vec<u8> {
    tagged(shard, b'v', "")
}

/// `state`: on the owner of a sid's shard in a cluster, the user another node claimed
/// the session for, `[shard]l[sid]`.
pub fn session_link(shard: ShardId, sid: &str) -> Vec<u8> {
    tagged(shard, b'l', sid)
}

/// `state`: the shard's checkpoint, the highest log sequence whose effects are all in snapshots.
pub fn checkpoint(shard: ShardId) -> Vec<u8> {
    tagged(shard, b'c', "")
}

/// `state`: the next offset to consume from `topic`'s partition of this shard.
pub fn stream_offset(shard: ShardId, topic: &str) -> Vec<u8> {
    tagged(shard, b'o', topic)
}

/// What a `state` key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKey<'a> {
    Session(&'a str),
    User(&'a str),
    Conversation(&'a str),
    SessionLink(&'a str),
    Checkpoint,
    StreamOffset(&'a str),
}

/// The shard and meaning of a `state` key; `None` for one this layout does not write.
pub fn parse_state_key(key: &[u8]) -> Option<(ShardId, StateKey<'_>)> {
    let shard = ShardId::from_be_bytes(key.get(..2)?.try_into().ok()?);
    let name = std::str::from_utf8(key.get(3..)?).ok()?;
    let kind = match key.get(2)? {
        b's' => StateKey::Session(name),
        b'u' => StateKey::User(name),
        b'v' => StateKey::Conversation(name),
        b'l' => StateKey::SessionLink(name),
        b'c' => StateKey::Checkpoint,
        b'o' => StateKey::StreamOffset(name),
        _ => return None,
    };
    Some((shard, kind))
}

/// Every `state` key of `shard` starts with this.
pub fn state_prefix(shard: ShardId) -> Vec<u8> {
    with_shard(shard, 0)
}

/// Every `events` id-index key of `shard` (what dedupes events) starts with this.
pub fn event_id_prefix(shard: ShardId) -> Vec<u8> {
    let mut key = with_shard(shard, 1);
    key.push(ID_TAG);
    key
}

fn tagged(shard: ShardId, tag: u8, name: &str) -> Vec<u8> {
    let mut key = with_shard(shard, name.len() + 1);
    key.push(tag);
    key.extend_from_slice(name.as_bytes());
    key
}

/// `tables`: `[shard of the name][name]`.
pub fn table(shard: ShardId, name: &str) -> Vec<u8> {
    user(shard, name)
}

/// `meta`: node-level, not sharded: `apikey/[id]`.
pub fn api_key(id: &str) -> Vec<u8> {
    [API_KEY_PREFIX, id.as_bytes()].concat()
}

/// `meta`: the secret of this node's own key for calls to the other nodes of its
/// cluster, `nodesecret/[node id]`.
pub fn node_secret(node_id: &str) -> Vec<u8> {
    [b"nodesecret/".as_slice(), node_id.as_bytes()].concat()
}

/// `meta`: the shards whose live state this node holds, with the epoch it got each at
/// (a cluster's live moves).
pub const HELD_SHARDS: &[u8] = b"held-shards";

/// `meta`: this data directory's identity, random, made when it is first used.
pub const STORE_ID: &[u8] = b"store-id";

/// `meta`: the node's secret that API key hashes are keyed with (32 bytes).
pub const KEY_HASH_SECRET: &[u8] = b"key-hash-secret";

/// Prefix of every API key record in `meta`.
pub const API_KEY_PREFIX: &[u8] = b"apikey/";

/// `meta`: an experiment's definition and when it stopped, `experiment/[id]`.
pub fn experiment(id: &str) -> Vec<u8> {
    [EXPERIMENT_PREFIX, id.as_bytes()].concat()
}

/// Prefix of every experiment record in `meta`.
pub const EXPERIMENT_PREFIX: &[u8] = b"experiment/";

/// `meta`: this node's counts of an experiment's arms, `experiment-counts/[id]`
/// (written every second, and at a clean stop).
pub fn experiment_counts(id: &str) -> Vec<u8> {
    [b"experiment-counts/".as_slice(), id.as_bytes()].concat()
}

/// `meta`: the shards whose key ranges a purge must still compact (big-endian u16s):
/// a crash between a user's deletion and the purge does not skip it.
pub const PURGE_PENDING: &[u8] = b"purge-pending";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_parse_back() {
        assert_eq!(
            parse_state_key(&session_state(3, "s1")),
            Some((3, StateKey::Session("s1")))
        );
        assert_eq!(parse_state_key(&user_state(0, "u")), Some((0, StateKey::User("u"))));
        assert_eq!(
            parse_state_key(&session_link(9, "s")),
            Some((9, StateKey::SessionLink("s")))
        );
        assert_eq!(parse_state_key(&checkpoint(2)), Some((2, StateKey::Checkpoint)));
        assert_eq!(
            parse_state_key(&stream_offset(1, "t")),
            Some((1, StateKey::StreamOffset("t")))
        );
        assert!(event_id(4, "e1").starts_with(&event_id_prefix(4)));
    }

    #[test]
    fn item_keys_sort_inside_their_table_range() {
        let (from, to) = table_range(3, "products");
        let key = item(3, "products", "zzz");
        assert!(from <= key && key < to);
        assert!(item(3, "products2", "a") >= to);
        assert!(item(2, "products", "a") < from);
        assert_eq!(&key[..2], &[0, 3]);
        let log = event_log(3, 258);
        assert!(log.starts_with(&event_log_prefix(3)) && event_log(3, 259) > log);
        assert_eq!(event_log_seq(&log), Some(258));
    }
}

//! Small collections for the state every live session and user holds, sized for
//! memory rather than for speed: there are hundreds of thousands of them, each
//! holding a few entries. They read and write the same stored encoding as the
//! standard collections they replace, so states persisted before still load.

use std::borrow::Cow;
use std::fmt;

use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::topology::ShardId;

/// Up to a limit of strings, newest first (event ids): one buffer of
/// length-prefixed strings, oldest first, instead of a string allocation each. A
/// canonical UUID (what the server generates for events without an id) is kept as
/// its 16 bytes rather than its 36 characters. Stored as a sequence of strings,
/// newest first.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NewestStrings {
    /// Each string as a header (LEB128: its length × 2, or 1 for a UUID) and its
    /// bytes, oldest first.
    bytes: Vec<u8>,
    len: u32,
}

/// The header of a packed UUID (a string's header is even).
const UUID_HEADER: usize = 1;

impl NewestStrings {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `value` as the newest, dropping the oldest beyond `limit`.
    pub fn push(&mut self, value: &str, limit: usize) {
        let uuid = canonical_uuid(value);
        let (header, body) = match &uuid {
            Some(uuid) => (UUID_HEADER, &uuid[..]),
            None => (value.len() << 1, value.as_bytes()),
        };
        self.bytes.reserve_exact(leb128_len(header) + body.len());
        write_leb128(header, &mut self.bytes);
        self.bytes.extend_from_slice(body);
        self.len += 1;
        while self.len() > limit {
            let (_, end) = entry(&self.bytes, 0);
            self.bytes.drain(..end);
            self.len -= 1;
        }
    }

    /// Newest first.
    pub fn iter(&self) -> impl Iterator<Item = Cow<'_, str>> {
        let mut starts = Vec::with_capacity(self.len());
        let mut at = 0;
        while at < self.bytes.len() {
            starts.push(at);
            at = entry(&self.bytes, at).1;
        }
        starts.into_iter().rev().map(|start| entry(&self.bytes, start).0)
    }

    /// Newest.
    pub fn front(&self) -> Option<Cow<'_, str>> {
        self.iter().next()
    }
}

/// The 16 bytes of `value` if it is a UUID written the way it is read back:
/// hyphenated, lowercase.
fn canonical_uuid(value: &str) -> Option<[u8; 16]> {
    if value.len() != uuid::fmt::Hyphenated::LENGTH {
        return None;
    }
    let uuid = uuid::Uuid::try_parse(value).ok()?;
    let mut written = [0u8; uuid::fmt::Hyphenated::LENGTH];
    (uuid.hyphenated().encode_lower(&mut written).as_bytes() == value.as_bytes()).then(|| uuid.into_bytes())
}

/// How many bytes `value` takes as LEB128.
pub(super) fn leb128_len(value: usize) -> usize {
    (usize::BITS - value.leading_zeros()).max(1).div_ceil(7) as usize
}

/// Appends `value` as LEB128 (7 bits a byte, low first; the high bit says more follow).
pub(super) fn write_leb128(mut value: usize, out: &mut Vec<u8>) {
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// The LEB128 number at `at` and where what follows it begins.
pub(super) fn read_leb128(bytes: &[u8], mut at: usize) -> (usize, usize) {
    let (mut value, mut shift) = (0usize, 0);
    loop {
        let byte = bytes[at];
        at += 1;
        value |= ((byte & 0x7f) as usize) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return (value, at);
        }
    }
}

/// The string at `start` and where the next begins.
fn entry(bytes: &[u8], start: usize) -> (Cow<'_, str>, usize) {
    let (header, at) = read_leb128(bytes, start);
    if header == UUID_HEADER {
        let mut packed = [0u8; 16];
        packed.copy_from_slice(&bytes[at..at + 16]);
        return (
            Cow::Owned(uuid::Uuid::from_bytes(packed).hyphenated().to_string()),
            at + 16,
        );
    }
    let end = at + (header >> 1);
    // Only whole `&str`s are pushed, so every entry is UTF-8.
    (
        Cow::Borrowed(std::str::from_utf8(&bytes[at..end]).unwrap_or_default()),
        end,
    )
}

impl fmt::Debug for NewestStrings {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for NewestStrings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for value in self.iter() {
            seq.serialize_element(&*value)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for NewestStrings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Newest;
        impl<'de> Visitor<'de> for Newest {
            type Value = NewestStrings;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a sequence of strings, newest first")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NewestStrings, A::Error> {
                let mut newest_first: Vec<String> = Vec::new();
                while let Some(value) = seq.next_element::<String>()? {
                    newest_first.push(value);
                }
                // Room for all of them at once (each push would otherwise grow the buffer).
                let text: usize = newest_first.iter().map(|value| value.len() + 2).sum();
                let mut strings = NewestStrings {
                    bytes: Vec::with_capacity(text),
                    len: 0,
                };
                for value in newest_first.iter().rev() {
                    strings.push(value, usize::MAX);
                }
                strings.bytes.shrink_to_fit();
                Ok(strings)
            }
        }
        deserializer.deserialize_seq(Newest)
    }
}

/// Per source shard, the highest log sequence applied: a sorted list (a state
/// hears from a few shards) stored as a map, as the `BTreeMap` it replaces was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedSeqs(Vec<(ShardId, u64)>);

impl AppliedSeqs {
    pub fn get(&self, source: ShardId) -> Option<u64> {
        self.position(source).ok().map(|index| self.0[index].1)
    }

    pub fn insert(&mut self, source: ShardId, seq: u64) {
        match self.position(source) {
            Ok(index) => self.0[index].1 = seq,
            Err(index) => {
                self.0.reserve_exact(1);
                self.0.insert(index, (source, seq));
            }
        }
    }

    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }

    pub fn iter(&self) -> impl Iterator<Item = (ShardId, u64)> + '_ {
        self.0.iter().copied()
    }

    fn position(&self, source: ShardId) -> Result<usize, usize> {
        self.0.binary_search_by_key(&source, |(shard, _)| *shard)
    }
}

impl Serialize for AppliedSeqs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (shard, seq) in &self.0 {
            map.serialize_entry(shard, seq)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AppliedSeqs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seqs;
        impl<'de> Visitor<'de> for Seqs {
            type Value = AppliedSeqs;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a map of shard to sequence")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AppliedSeqs, A::Error> {
                let mut seqs = AppliedSeqs::default();
                while let Some((shard, seq)) = map.next_entry::<ShardId, u64>()? {
                    seqs.insert(shard, seq);
                }
                Ok(seqs)
            }
        }
        deserializer.deserialize_map(Seqs)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use super::*;

    #[test]
    fn newest_strings_keep_the_newest_within_the_limit() {
        let mut ids = NewestStrings::default();
        let long = "x".repeat(300);
        let uuid = "0192f5e4-7b3a-7c3e-9a1b-0123456789ab";
        let upper = "0192F5E4-7B3A-7C3E-9A1B-0123456789AB";
        for value in ["a", "", &long, uuid, "é-ü", upper, "last"] {
            ids.push(value, 6);
        }
        assert_eq!(
            ids.iter().collect::<Vec<_>>(),
            ["last", upper, "é-ü", uuid, long.as_str(), ""]
        );
        assert_eq!((ids.len(), ids.front().as_deref()), (6, Some("last")));
        // The lowercase UUID takes its 16 bytes and a header; the others their text.
        assert_eq!(ids.bytes.len(), (1 + 4) + (1 + 36) + (1 + 5) + (1 + 16) + (2 + 300) + 1);
    }

    #[test]
    fn both_read_and_write_the_encoding_of_the_collections_they_replace() {
        let before: VecDeque<String> = ["newest", "older", "oldest"].map(String::from).into();
        let stored = postcard::to_allocvec(&before).unwrap();
        let strings: NewestStrings = postcard::from_bytes(&stored).unwrap();
        assert_eq!(strings.iter().collect::<Vec<_>>(), ["newest", "older", "oldest"]);
        assert_eq!(postcard::to_allocvec(&strings).unwrap(), stored);

        let before: BTreeMap<ShardId, u64> = [(7, 70), (2, 20), (300, 3_000_000)].into();
        let stored = postcard::to_allocvec(&before).unwrap();
        let seqs: AppliedSeqs = postcard::from_bytes(&stored).unwrap();
        assert_eq!(
            (seqs.get(2), seqs.get(300), seqs.get(5)),
            (Some(20), Some(3_000_000), None)
        );
        assert_eq!(postcard::to_allocvec(&seqs).unwrap(), stored);
    }
}

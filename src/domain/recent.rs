//! A live state's latest item interactions, newest first, packed into one shared
//! buffer: the state updates them and the signals it publishes read the same bytes
//! (ranking wants their items), so a live key holds them once, not twice. Packed,
//! an interaction takes its item id, a byte for a standard event type, and its time:
//! ~20 bytes where a struct of strings took 72, and a state keeps up to
//! `engine.recent_items` (50) of them in each of hundreds of thousands of live keys.
//!
//! Stored as the sequence of interactions it replaced, so states persisted before
//! still load.

use std::fmt;
use std::iter;
use std::sync::Arc;

use compact_str::CompactString;
use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;

use super::compact::{read_leb128, write_leb128};
use super::live_state::KNOWN_EVENT_TYPES;

/// One item interaction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interaction<'a> {
    pub item_id: &'a str,
    pub event_type: &'a str,
    /// When the user acted, unix ms.
    pub at: i64,
    pub dwell_ms: Option<f64>,
}

/// Interactions, newest first, in one buffer shared by the clones (none when empty).
///
/// An entry is a head byte (the event type's place in [`KNOWN_EVENT_TYPES`], or
/// [`OTHER_TYPE`], shifted left by one over a bit that says a dwell follows), the
/// item id (LEB128 length, bytes), an other type's name (the same), the time (8
/// bytes, little-endian) and the dwell (8 bytes, if any).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RecentItems(Option<Arc<[u8]>>);

/// The head's type for a name not in [`KNOWN_EVENT_TYPES`]: the name follows.
const OTHER_TYPE: u8 = 0x7f;
/// The head's bit for a dwell.
const HAS_DWELL: u8 = 1;

impl RecentItems {
    /// Newest first.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            bytes: self.0.as_deref().unwrap_or_default(),
            at: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The newest `at_most` item ids, oldest first (the order of a session).
    pub fn item_ids_oldest_first(&self, at_most: usize) -> Vec<&str> {
        let mut ids: Vec<&str> = self
            .iter()
            .take(at_most)
            .map(|interaction| interaction.item_id)
            .collect();
        ids.reverse();
        ids
    }

    /// Packs `interactions`, given newest first.
    pub fn from_newest_first<'a>(interactions: impl IntoIterator<Item = Interaction<'a>>) -> RecentItems {
        let mut bytes = Vec::new();
        for interaction in interactions {
            write_entry(&mut bytes, interaction);
        }
        RecentItems((!bytes.is_empty()).then(|| Arc::from(bytes)))
    }

    /// Inserts `new` where its time puts it (a late event goes behind the newer ones
    /// already there; among equal times the one that arrived last comes first),
    /// keeping at most `limit`. The entries kept are copied as they are packed; the
    /// clones keep what they had.
    pub fn insert_by_time(&mut self, new: Interaction<'_>, limit: usize) {
        let bytes = self.0.as_deref().unwrap_or_default();
        // Where each entry starts, and its time.
        let mut entries: SmallVec<[(usize, i64); 64]> = SmallVec::new();
        let mut iter = self.iter();
        while let Some(start_and_time) = iter.next_time() {
            entries.push(start_and_time);
        }
        let position = entries
            .iter()
            .position(|(_, at)| *at <= new.at)
            .unwrap_or(entries.len());
        let offset = |index: usize| entries.get(index).map_or(bytes.len(), |(start, _)| *start);
        // Room for the new entry's strings and about what goes with them (the head,
        // lengths, time, dwell); a longer entry grows the buffer once.
        let mut packed = Vec::with_capacity(bytes.len() + new.item_id.len() + new.event_type.len() + 32);
        if position < limit {
            packed.extend_from_slice(&bytes[..offset(position)]);
            write_entry(&mut packed, new);
            packed.extend_from_slice(&bytes[offset(position)..offset(limit - 1)]);
        } else {
            packed.extend_from_slice(&bytes[..offset(limit)]);
        }
        *self = RecentItems((!packed.is_empty()).then(|| Arc::from(packed)));
    }

    /// Makes `new` the newest, dropping the item's earlier interactions.
    pub fn move_to_newest(&mut self, new: Interaction<'_>) {
        let others = self.iter().filter(|there| there.item_id != new.item_id);
        *self = RecentItems::from_newest_first(iter::once(new).chain(others));
    }
}

fn write_entry(bytes: &mut Vec<u8>, interaction: Interaction<'_>) {
    let known = KNOWN_EVENT_TYPES
        .iter()
        .position(|(name, _)| *name == interaction.event_type);
    let type_code = known.map_or(OTHER_TYPE, |index| index as u8);
    bytes.push(type_code << 1 | interaction.dwell_ms.is_some() as u8);
    write_str(bytes, interaction.item_id);
    if known.is_none() {
        write_str(bytes, interaction.event_type);
    }
    bytes.extend_from_slice(&interaction.at.to_le_bytes());
    if let Some(dwell) = interaction.dwell_ms {
        bytes.extend_from_slice(&dwell.to_le_bytes());
    }
}

fn write_str(bytes: &mut Vec<u8>, text: &str) {
    write_leb128(text.len(), bytes);
    bytes.extend_from_slice(text.as_bytes());
}

/// The interactions of a [`RecentItems`], newest first.
pub struct Iter<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Iter<'a> {
    fn read_str(&mut self) -> &'a str {
        let (len, start) = read_leb128(self.bytes, self.at);
        self.at = start + len;
        // Only whole `&str`s are written, so every one is UTF-8.
        std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or_default()
    }

    /// Where the next entry starts and its time, the entry skipped unread.
    fn next_time(&mut self) -> Option<(usize, i64)> {
        let start = self.at;
        let head = *self.bytes.get(start)?;
        self.at += 1;
        self.skip_str();
        if KNOWN_EVENT_TYPES.get((head >> 1) as usize).is_none() {
            self.skip_str();
        }
        let at = i64::from_le_bytes(self.read_8());
        if head & HAS_DWELL != 0 {
            self.at += 8;
        }
        Some((start, at))
    }

    fn skip_str(&mut self) {
        let (len, start) = read_leb128(self.bytes, self.at);
        self.at = start + len;
    }

    fn read_8(&mut self) -> [u8; 8] {
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.bytes[self.at..self.at + 8]);
        self.at += 8;
        word
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Interaction<'a>;

    fn next(&mut self) -> Option<Interaction<'a>> {
        let head = *self.bytes.get(self.at)?;
        self.at += 1;
        let item_id = self.read_str();
        let event_type = match KNOWN_EVENT_TYPES.get((head >> 1) as usize) {
            Some((name, _)) => name,
            None => self.read_str(),
        };
        let at = i64::from_le_bytes(self.read_8());
        let dwell_ms = (head & HAS_DWELL != 0).then(|| f64::from_le_bytes(self.read_8()));
        Some(Interaction {
            item_id,
            event_type,
            at,
            dwell_ms,
        })
    }
}

impl fmt::Debug for RecentItems {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for RecentItems {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for interaction in self.iter() {
            seq.serialize_element(&interaction)?;
        }
        seq.end()
    }
}

/// An interaction as it is read back (short strings inline).
#[derive(Deserialize)]
struct StoredInteraction {
    item_id: CompactString,
    event_type: CompactString,
    at: i64,
    dwell_ms: Option<f64>,
}

impl<'de> Deserialize<'de> for RecentItems {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Newest;
        impl<'de> Visitor<'de> for Newest {
            type Value = RecentItems;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a sequence of item interactions, newest first")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RecentItems, A::Error> {
                let mut stored: Vec<StoredInteraction> = Vec::new();
                while let Some(interaction) = seq.next_element()? {
                    stored.push(interaction);
                }
                Ok(RecentItems::from_newest_first(stored.iter().map(|interaction| {
                    Interaction {
                        item_id: &interaction.item_id,
                        event_type: &interaction.event_type,
                        at: interaction.at,
                        dwell_ms: interaction.dwell_ms,
                    }
                })))
            }
        }
        deserializer.deserialize_seq(Newest)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    fn click(item_id: &str, at: i64) -> Interaction<'_> {
        Interaction {
            item_id,
            event_type: "click",
            at,
            dwell_ms: None,
        }
    }

    fn items(recent: &RecentItems) -> Vec<&str> {
        recent.iter().map(|interaction| interaction.item_id).collect()
    }

    #[test]
    fn interactions_go_where_their_time_puts_them_within_the_limit() {
        let mut recent = RecentItems::default();
        assert!(recent.is_empty() && recent.len() == 0);
        for (item, at) in [("a", 10), ("b", 30), ("late", 20), ("same", 30), ("old", 1)] {
            recent.insert_by_time(click(item, at), 4);
        }
        // "old" is older than the four kept; equal times put the later arrival first.
        assert_eq!(items(&recent), ["same", "b", "late", "a"]);
        let before = recent.clone();
        recent.insert_by_time(click("new", 40), 4);
        assert_eq!(items(&recent), ["new", "same", "b", "late"]);
        assert_eq!(items(&before), ["same", "b", "late", "a"], "a clone keeps what it had");
        assert_eq!(recent.item_ids_oldest_first(2), ["same", "new"]);
        let mut one = recent.clone();
        one.insert_by_time(click("older", 0), 1);
        assert_eq!(items(&one), ["new"], "too old for a list of one");
        one.insert_by_time(click("newest", 50), 1);
        assert_eq!(items(&one), ["newest"]);
        one.insert_by_time(click("any", 60), 0);
        assert!(one.is_empty());
        assert_eq!(recent.item_ids_oldest_first(usize::MAX), ["late", "b", "same", "new"]);
    }

    #[test]
    fn every_field_reads_back_as_written() {
        let long_id = "é".repeat(100);
        let written = [
            Interaction {
                item_id: &long_id,
                event_type: "booking_request",
                at: -5,
                dwell_ms: Some(1234.567),
            },
            Interaction {
                item_id: "",
                event_type: "dwell_time",
                at: i64::MAX,
                dwell_ms: Some(0.0),
            },
            click("i1", 1_700_000_000_000),
        ];
        let recent = RecentItems::from_newest_first(written);
        assert_eq!(recent.iter().collect::<Vec<_>>(), written);
        // A known type takes no bytes past the head: 1 + (1 + 2) + 8 for the click.
        let bytes = recent.0.as_deref().unwrap();
        assert_eq!(
            bytes.len(),
            (1 + 2 + 200 + 1 + 15 + 8 + 8) + (1 + 1 + 8 + 8) + (1 + 3 + 8)
        );
    }

    #[test]
    fn moving_to_the_newest_drops_the_items_earlier_interactions() {
        let mut recent = RecentItems::from_newest_first([click("b", 2), click("a", 1)]);
        recent.move_to_newest(click("a", 3));
        assert_eq!(items(&recent), ["a", "b"]);
    }

    /// The struct a state's interactions were stored as before they were packed.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Unpacked {
        item_id: CompactString,
        event_type: CompactString,
        at: i64,
        dwell_ms: Option<f64>,
    }

    #[test]
    fn reads_and_writes_the_encoding_of_the_list_it_replaced() {
        let before: VecDeque<Unpacked> = [("i2", "custom", 20, Some(3.5)), ("i1", "view", 10, None)]
            .map(|(item_id, event_type, at, dwell_ms)| Unpacked {
                item_id: item_id.into(),
                event_type: event_type.into(),
                at,
                dwell_ms,
            })
            .into();
        let stored = postcard::to_allocvec(&before).unwrap();
        let recent: RecentItems = postcard::from_bytes(&stored).unwrap();
        assert_eq!(items(&recent), ["i2", "i1"]);
        assert_eq!(postcard::to_allocvec(&recent).unwrap(), stored);
        let empty = postcard::to_allocvec(&VecDeque::<Unpacked>::new()).unwrap();
        assert_eq!(
            postcard::from_bytes::<RecentItems>(&empty).unwrap(),
            RecentItems::default()
        );
    }
}

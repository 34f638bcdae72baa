//! What a ranking showed: the items in order with the features each was ranked
//! with. Stored under the response's `rec_id`; outcome events naming it become
//! training examples for the learned ranker. A record names no user or session:
//! learning needs only what was shown, and a user's deletion then has nothing to
//! look for in the rankings, which are kept by age.
//!
//! Every recommend writes one, so the stored form is small: each feature (scaled to
//! [0, 1] within its request) in one byte. At 100 candidates that halves a record
//! (about 1.8 KB instead of 3.5), and with it the memtable flushes that were a tenth
//! of a recommend's server CPU.

use serde::{Deserialize, Serialize};

use super::ltr::{FeatureVector, FEATURES};

/// What one recommend response showed, in order, with the features each item was
/// ranked with; events carrying its `rec_id` turn it into training examples.
#[derive(Debug, Clone)]
pub struct RecRecord {
    pub at: i64,
    pub model: String,
    pub shown: Vec<(String, FeatureVector)>,
}

/// A feature vector as stored: each value in [0, 1] in 255 steps.
type StoredFeatures = [u8; FEATURES];

const STEPS: f32 = 255.0;

fn quantize(features: &FeatureVector) -> StoredFeatures {
    features.map(|value| (value.clamp(0.0, 1.0) * STEPS).round() as u8)
}

fn dequantize(stored: &StoredFeatures) -> FeatureVector {
    stored.map(|step| step as f32 / STEPS)
}

/// A ranking to record, borrowing what it shows: stored in the encoding
/// [`RecRecord::decode`] reads, without copying every id first.
#[derive(Debug, Serialize)]
pub struct ShownRecord<'a> {
    at: i64,
    model: &'a str,
    shown: Vec<(&'a str, StoredFeatures)>,
}

impl<'a> ShownRecord<'a> {
    pub fn new(at: i64, model: &'a str, shown: impl IntoIterator<Item = (&'a str, FeatureVector)>) -> ShownRecord<'a> {
        let shown = shown
            .into_iter()
            .map(|(id, features)| (id, quantize(&features)))
            .collect();
        ShownRecord { at, model, shown }
    }

    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }
}

impl RecRecord {
    /// A stored [`ShownRecord`]; `None` for bytes in another encoding (a record
    /// written by an older version only loses its outcome example).
    pub fn decode(bytes: &[u8]) -> Option<RecRecord> {
        #[derive(Deserialize)]
        struct Stored {
            at: i64,
            model: String,
            shown: Vec<(String, StoredFeatures)>,
        }
        let (stored, rest) = postcard::take_from_bytes::<Stored>(bytes).ok()?;
        rest.is_empty().then(|| RecRecord {
            at: stored.at,
            model: stored.model,
            shown: stored
                .shown
                .into_iter()
                .map(|(id, features)| (id, dequantize(&features)))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_record_reads_back_as_a_rec_record_to_a_step() {
        let shown = ShownRecord::new(
            42,
            "default",
            [("a", [0.5, 1.0, 0.0, 0.3, 0.0, 1.0]), ("b", [0.0; FEATURES])],
        );
        let bytes = postcard::to_stdvec(&shown).unwrap();
        let record = RecRecord::decode(&bytes).expect("decodes");
        assert_eq!(record.at, 42);
        assert_eq!(record.model, "default");
        let ids: Vec<_> = record.shown.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        for (read, written) in record.shown[0].1.iter().zip([0.5, 1.0, 0.0, 0.3, 0.0, 1.0]) {
            assert!((read - written).abs() <= 0.5 / STEPS + 1e-6, "{read} for {written}");
        }
        assert_eq!(record.shown[1].1, [0.0; FEATURES]);
    }

    #[test]
    fn a_record_in_the_older_encoding_is_not_misread() {
        #[derive(Serialize)]
        struct Older<'a> {
            at: i64,
            model: &'a str,
            shown: Vec<(&'a str, FeatureVector)>,
        }
        let older = Older {
            at: 1_700_000_000_000,
            model: "default",
            shown: vec![("item-1", [0.25, 0.5, 0.0, 0.0, 0.0, 0.0]), ("item-2", [1.0; FEATURES])],
        };
        let bytes = postcard::to_stdvec(&older).unwrap();
        assert!(RecRecord::decode(&bytes).is_none());
    }
}

//! Words the label dictionary does not know ("gore", "flicks for toddlers"), read by
//! meaning: the catalog's group and tag names and the word are embedded by a model
//! that understands meaning (MiniLM), and a word names the label whose vector is
//! closest, when it is close enough and clearly closer than the next one. Pure: the
//! vectors are made by the caller.

use super::dictionary::DictionaryEntry;

/// Cosine a word must reach with a label to name it.
pub const MIN_SIMILARITY: f32 = 0.55;
/// How much closer than the second-closest label the closest must be.
pub const MIN_MARGIN: f32 = 0.05;

/// The catalog's labels and their vectors (L2-normalised, one per label).
#[derive(Debug, Default)]
pub struct LabelVectors {
    labels: Vec<DictionaryEntry>,
    vectors: Vec<Vec<f32>>,
}

impl LabelVectors {
    /// `vectors[i]` is the vector of `labels[i]`.
    pub fn new(labels: Vec<DictionaryEntry>, vectors: Vec<Vec<f32>>) -> LabelVectors {
        debug_assert_eq!(labels.len(), vectors.len());
        LabelVectors { labels, vectors }
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Each label with its vector.
    pub fn iter(&self) -> impl Iterator<Item = (&DictionaryEntry, &[f32])> {
        self.labels.iter().zip(self.vectors.iter().map(Vec::as_slice))
    }

    /// The label a word's vector names, if one is close enough and clearly closest.
    pub fn nearest(&self, word: &[f32]) -> Option<&DictionaryEntry> {
        let mut best: Option<(usize, f32)> = None;
        let mut second = f32::MIN;
        for (index, vector) in self.vectors.iter().enumerate() {
            if vector.len() != word.len() {
                continue;
            }
            let cosine: f32 = vector.iter().zip(word).map(|(a, b)| a * b).sum();
            match best {
                Some((_, top)) if cosine <= top => second = second.max(cosine),
                _ => {
                    second = second.max(best.map_or(f32::MIN, |(_, top)| top));
                    best = Some((index, cosine));
                }
            }
        }
        let (index, top) = best?;
        (top >= MIN_SIMILARITY && top - second >= MIN_MARGIN).then(|| &self.labels[index])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::dictionary::EntryKind;

    fn label(name: &str) -> DictionaryEntry {
        DictionaryEntry {
            display: name.to_owned(),
            kind: EntryKind::Group,
        }
    }

    fn unit(x: f32, y: f32) -> Vec<f32> {
        let norm = (x * x + y * y).sqrt();
        vec![x / norm, y / norm]
    }

    #[test]
    fn a_word_names_the_clearly_closest_label_only() {
        let labels = LabelVectors::new(
            vec![label("Horror"), label("Comedy")],
            vec![unit(1.0, 0.0), unit(0.0, 1.0)],
        );
        assert_eq!(
            labels.nearest(&unit(1.0, 0.2)).map(|l| l.display.as_str()),
            Some("Horror")
        );
        assert_eq!(
            labels.nearest(&unit(0.1, 1.0)).map(|l| l.display.as_str()),
            Some("Comedy")
        );
        assert_eq!(labels.nearest(&unit(1.0, 1.0)), None, "as close to both");
        assert_eq!(labels.nearest(&unit(-1.0, -0.1)), None, "close to neither");
        assert_eq!(labels.nearest(&[1.0, 0.0, 0.0]), None, "another model's length");
    }
}

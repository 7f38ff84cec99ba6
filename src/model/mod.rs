//! The trained model: all-MiniLM-L6-v2 (a 6-layer, 12-head BERT), its tokenizer and forward pass.

pub mod asset;
pub mod bert;
pub mod tokenizer;

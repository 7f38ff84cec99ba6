//! The precision a trained model's dense layers run at: its f16 weights multiplied in f32, or
//! 8-bit integers (`crate::cpu::int8`: weights per output channel, activations per row, exact
//! integer sums; the feed-forward layer's second product on 12-bit integers). LayerNorm,
//! softmax, GELU, the attention products and the residual stay f32 in both.

use std::fmt;

/// How a pass multiplies by the model's dense weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The model's f16 weights, widened to f32, products in f32.
    #[default]
    F16,
    /// Weights quantized to 8 bits once, activations to 7 bits per row, products in integers
    /// (`W_2`: 12-bit weights and activations).
    Int8,
}

impl Precision {
    /// Both, the default first.
    pub const ALL: [Precision; 2] = [Precision::F16, Precision::Int8];

    /// The name in a link (`?precision=`) and in exports.
    pub fn key(self) -> &'static str {
        match self {
            Precision::F16 => "f16",
            Precision::Int8 => "int8",
        }
    }

    /// The precision a link names, if any.
    pub fn from_key(key: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.key().eq_ignore_ascii_case(key.trim()))
    }

    /// A word or two for the page's badge.
    pub fn short(self) -> &'static str {
        match self {
            Precision::F16 => "f16",
            Precision::Int8 => "8-bit",
        }
    }

    /// The other one.
    pub fn other(self) -> Precision {
        match self {
            Precision::F16 => Precision::Int8,
            Precision::Int8 => Precision::F16,
        }
    }

    /// What the page calls it.
    pub fn label(self) -> &'static str {
        match self {
            Precision::F16 => "f16 weights, f32 products",
            Precision::Int8 => "8-bit weights and activations (12 bits for the FFN output)",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn keys_round_trip_and_unknown_keys_are_none() {
        for p in Precision::ALL {
            assert_eq!(Precision::from_key(p.key()), Some(p));
            assert_eq!(Precision::from_key(&p.key().to_uppercase()), Some(p));
        }
        assert_eq!(Precision::from_key("int4"), None);
        assert_eq!(Precision::default(), Precision::F16);
        for p in Precision::ALL {
            assert!(p.other() != p && p.other().other() == p);
        }
    }
}

//! The page's compact copy of the model: every weight in f16 plus the vocabulary, in one file.
//!
//! ```text
//! "HEADLAB-MINILM1\n"                 16 bytes: magic and format version
//! header length                      u32, little-endian
//! header                             UTF-8 lines "name<TAB>d0,d1<TAB>byte offset<TAB>count"
//!                                    and one "vocab<TAB>-<TAB>byte offset<TAB>byte length"
//! data                               f16 little-endian values and the vocabulary text
//! ```
//!
//! f16 keeps about three significant digits; the tests measure what that does to the attention
//! maps and the sentence embedding (README, "The trained model").

use std::collections::HashMap;

use half::f16;

const MAGIC: &[u8; 16] = b"HEADLAB-MINILM1\n";

/// Why an asset could not be read. Each is a sentence for the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssetError {
    /// Not a headlab model file (or another version of the format).
    NotAnAsset,
    /// Shorter than its header says: a download that stopped early.
    Truncated {
        /// Bytes the file should have at least.
        expected: u64,
        /// Bytes it has.
        got: u64,
    },
    /// The header cannot be parsed.
    BadHeader(String),
    /// The bytes are not the asset this page was built with (damaged, or another build).
    Checksum {
        /// SHA-256 of what arrived, hex.
        got: String,
    },
}

/// SHA-256 of the asset `scripts/build-model-asset.sh` makes from the pinned checkpoint (the
/// converter is deterministic). The page refuses any other bytes; the script and
/// `tests/minilm_f16.rs` check the built asset against this.
pub const ASSET_SHA256: &str = "cf7b0fca32cd8120a738e5da2f38248a9d64344d2baefbd1e68a5043afa825b0";

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks `bytes` against [`ASSET_SHA256`] before anything is decoded. When they differ, the
/// error names the damage where the first bytes can tell (not an asset, cut short in its
/// header), and is a checksum mismatch otherwise.
pub fn verify(bytes: &[u8]) -> Result<(), AssetError> {
    let got = sha256_hex(bytes);
    if got == ASSET_SHA256 {
        return Ok(());
    }
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(AssetError::NotAnAsset);
    }
    let len = bytes.len() as u64;
    if len < 20 {
        return Err(AssetError::Truncated { expected: 20, got: len });
    }
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as u64;
    if len < 20 + header_len {
        return Err(AssetError::Truncated { expected: 20 + header_len, got: len });
    }
    Err(AssetError::Checksum { got })
}

impl std::fmt::Display for AssetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssetError::NotAnAsset => {
                write!(f, "the model file is not a headlab model (wrong format or version)")
            }
            AssetError::Truncated { expected, got } => {
                write!(f, "the model file is incomplete: {got} of at least {expected} bytes arrived")
            }
            AssetError::BadHeader(e) => write!(f, "the model file's header is damaged ({e})"),
            AssetError::Checksum { got } => write!(
                f,
                "the model file is damaged or from another build: its SHA-256 is {}…, not the {}… this page expects",
                &got[..12.min(got.len())],
                &ASSET_SHA256[..12]
            ),
        }
    }
}

impl std::error::Error for AssetError {}

/// A decoded asset: f32 tensors by name, and the vocabulary text.
#[derive(Clone, Debug, PartialEq)]
pub struct Asset {
    /// Tensors by checkpoint name: shape and values.
    pub tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
    /// `vocab.txt`.
    pub vocab: String,
}

/// Writes tensors (rounded to f16) and the vocabulary into one file.
pub fn encode(tensors: &[(String, Vec<usize>, Vec<f32>)], vocab: &str) -> Vec<u8> {
    let mut header = String::new();
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        header.push_str(&format!("{name}\t{}\t{}\t{}\n", dims.join(","), data.len(), values.len()));
        for v in values {
            data.extend_from_slice(&f16::from_f32(*v).to_le_bytes());
        }
    }
    header.push_str(&format!("vocab\t-\t{}\t{}\n", data.len(), vocab.len()));
    data.extend_from_slice(vocab.as_bytes());
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    out
}

/// Reads an asset, checking every range against the file's length.
pub fn decode(bytes: &[u8]) -> Result<Asset, AssetError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(AssetError::NotAnAsset);
    }
    let got = bytes.len() as u64;
    let need =
        |expected: u64| if got < expected { Err(AssetError::Truncated { expected, got }) } else { Ok(()) };
    need(MAGIC.len() as u64 + 4)?;
    let header_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as u64;
    need(20 + header_len)?;
    let header = std::str::from_utf8(&bytes[20..20 + header_len as usize])
        .map_err(|_| AssetError::BadHeader("not UTF-8".into()))?;
    let data = &bytes[20 + header_len as usize..];
    let data_start = 20 + header_len;

    let mut tensors = HashMap::new();
    let mut vocab = None;
    for line in header.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, dims, offset, count] = fields[..] else {
            return Err(AssetError::BadHeader(format!("line {line:?}")));
        };
        let number =
            |s: &str| s.parse::<u64>().map_err(|_| AssetError::BadHeader(format!("{s:?} in {name}")));
        let (offset, count) = (number(offset)?, number(count)?);
        if name == "vocab" {
            need(data_start + offset + count)?;
            let text = std::str::from_utf8(&data[offset as usize..(offset + count) as usize])
                .map_err(|_| AssetError::BadHeader("vocabulary is not UTF-8".into()))?;
            vocab = Some(text.to_string());
            continue;
        }
        let shape = dims.split(',').map(|d| number(d).map(|d| d as usize)).collect::<Result<Vec<_>, _>>()?;
        if shape.iter().product::<usize>() as u64 != count {
            return Err(AssetError::BadHeader(format!(
                "{name}: shape {shape:?} does not hold {count} values"
            )));
        }
        need(data_start + offset + 2 * count)?;
        let raw = &data[offset as usize..(offset + 2 * count) as usize];
        let values = raw.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()).collect();
        tensors.insert(name.to_string(), (shape, values));
    }
    let vocab = vocab.ok_or_else(|| AssetError::BadHeader("no vocabulary".into()))?;
    Ok(Asset { tensors, vocab })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_rounds_to_f16_and_keeps_the_vocabulary() {
        let t = vec![("a.weight".to_string(), vec![2, 2], vec![1.0, -0.333_333_3, 65504.0, 1e-8])];
        let bytes = encode(&t, "[PAD]\n[UNK]\n");
        let asset = decode(&bytes).unwrap();
        let (shape, values) = &asset.tensors["a.weight"];
        assert_eq!(shape, &vec![2, 2]);
        assert_eq!(values[0], 1.0);
        assert!((values[1] + 0.333_333_3).abs() < 2e-4);
        assert_eq!(values[2], 65504.0);
        assert_eq!(asset.vocab, "[PAD]\n[UNK]\n");
    }

    #[test]
    fn damaged_files_are_typed_errors() {
        let bytes = encode(&[("w".into(), vec![3], vec![1.0, 2.0, 3.0])], "v");
        assert_eq!(decode(b"GIF89a"), Err(AssetError::NotAnAsset));
        for cut in [17, 30, bytes.len() - 1] {
            let err = decode(&bytes[..cut]).unwrap_err();
            assert!(matches!(err, AssetError::Truncated { .. }), "cut at {cut}: {err:?}");
            assert!(err.to_string().contains("incomplete"));
        }
        let mut bad = bytes.clone();
        bad[20] = b'\t'; // the header's first line loses a field
        assert!(matches!(decode(&bad), Err(AssetError::BadHeader(_))));
    }

    #[test]
    fn verification_names_the_damage_it_can_see() {
        assert_eq!(verify(b"<html>404</html>"), Err(AssetError::NotAnAsset));
        let mut cut = MAGIC.to_vec();
        cut.extend_from_slice(&16u32.to_le_bytes());
        cut.extend_from_slice(b"short");
        assert_eq!(verify(&cut), Err(AssetError::Truncated { expected: 36, got: 25 }));
        cut.extend_from_slice(&[b'x'; 40]);
        let err = verify(&cut).unwrap_err();
        assert!(matches!(err, AssetError::Checksum { .. }) && err.to_string().contains("damaged"), "{err}");
    }
}

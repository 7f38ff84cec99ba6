//! A table of rows, `rows x width`, read a row or a block of rows at a time: a decoder's token
//! embedding, which is also its output head. Held in f32, or as the f16 values its model file
//! holds ([`Rows::F16`]: half the bytes), widened exactly as they are read. A decoder held at 8
//! bits only keeps its embedding in f16 (GPT-2 Large's is 257 MB in f32, 129 MB in f16; its
//! output head runs on its own 8-bit copy), BENCHMARKS.md section 27.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use half::f16;

use crate::attention::turns::Turns;
use crate::cpu::Kernel;
use crate::model::layers::backward::matmul_in_turns;

/// Rows of a table an f16 table widens at a time in a product ([`Rows::product_in_turns`]):
/// 4096 of GPT-2 Large's rows are 21 MB in f32.
const BLOCK_ROWS: usize = 4096;

/// A `rows x width` table, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Rows {
    /// In f32.
    F32(Arc<[f32]>),
    /// As f16 values.
    F16(Arc<[f16]>),
}

impl From<Vec<f32>> for Rows {
    fn from(values: Vec<f32>) -> Rows {
        Rows::F32(values.into())
    }
}

impl Rows {
    /// Values held.
    pub fn len(&self) -> usize {
        match self {
            Rows::F32(v) => v.len(),
            Rows::F16(v) => v.len(),
        }
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes its values take.
    pub fn bytes(&self) -> u64 {
        match self {
            Rows::F32(v) => 4 * v.len() as u64,
            Rows::F16(v) => 2 * v.len() as u64,
        }
    }

    /// The values `range` of the row-major table in f32: borrowed from a table in f32, widened
    /// from one in f16 (exactly: every f16 is an f32).
    pub fn values(&self, range: Range<usize>) -> Cow<'_, [f32]> {
        match self {
            Rows::F32(v) => Cow::Borrowed(&v[range]),
            Rows::F16(v) => Cow::Owned(v[range].iter().map(|&h| widen(h)).collect()),
        }
    }

    /// Row `r` of a table `width` wide.
    pub fn row(&self, r: usize, width: usize) -> Cow<'_, [f32]> {
        self.values(r * width..(r + 1) * width)
    }

    /// The same table in f16: exact for the values of a model file, which holds f16 (any other
    /// value is rounded to the nearest f16).
    pub fn in_f16(&self) -> Rows {
        match self {
            Rows::F32(v) => Rows::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            Rows::F16(_) => self.clone(),
        }
    }

    /// `a (n x rows) @ table (rows x width)`, in `turns`' steps: in f32 one product
    /// ([`matmul_in_turns`]); in f16 a block of [`BLOCK_ROWS`] rows widened at a time, each
    /// block's product added in turn (so never the whole table in f32).
    pub async fn product_in_turns(
        &self,
        kernel: Kernel,
        a: &[f32],
        n: usize,
        width: usize,
        turns: &dyn Turns,
    ) -> Vec<f32> {
        let rows = self.len() / width.max(1);
        assert_eq!(a.len(), n * rows, "a is n x rows");
        let Rows::F16(_) = self else {
            return matmul_in_turns(kernel, a, &self.values(0..self.len()), n, rows, width, turns).await;
        };
        let mut y = vec![0.0f32; n * width];
        for r0 in (0..rows).step_by(BLOCK_ROWS) {
            let r1 = (r0 + BLOCK_ROWS).min(rows);
            let block = self.values(r0 * width..r1 * width);
            let columns: Vec<f32> =
                a.chunks_exact(rows).flat_map(|row| row[r0..r1].iter().copied()).collect();
            let part = matmul_in_turns(kernel, &columns, &block, n, r1 - r0, width, turns).await;
            y.iter_mut().zip(&part).for_each(|(y, p)| *y += p);
        }
        y
    }
}

/// `h` in f32, exactly, without a branch: its magnitude's bits moved into an f32's places and
/// scaled by `2^112` (the exponents' bias apart; this also makes f16's subnormals normal), its
/// infinities and NaNs given f32's all-ones exponent, its sign put back.
fn widen(h: f16) -> f32 {
    let bits = h.to_bits() as u32;
    let magnitude = (bits & 0x7fff) << 13;
    let finite = (f32::from_bits(magnitude) * f32::from_bits(0x7780_0000)).to_bits();
    let value = if bits & 0x7c00 == 0x7c00 { magnitude | 0x7f80_0000 } else { finite };
    f32::from_bits(value | (bits & 0x8000) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::turns::{at_once, AtOnce};

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn every_f16_widens_to_the_same_f32_as_the_half_crate_gives() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let (ours, theirs) = (widen(h), h.to_f32());
            match theirs.is_nan() {
                true => assert!(
                    ours.is_nan() && ours.is_sign_negative() == theirs.is_sign_negative(),
                    "{bits:#06x}"
                ),
                false => assert_eq!(ours.to_bits(), theirs.to_bits(), "{bits:#06x}"),
            }
        }
    }

    #[test]
    fn an_f16_table_reads_the_values_of_its_f32_table_when_they_are_f16() {
        let values: Vec<f32> = (0..7 * 5).map(|i| f16::from_f32((i as f32 - 9.0) * 0.37).to_f32()).collect();
        let (wide, half) = (Rows::from(values.clone()), Rows::from(values.clone()).in_f16());
        assert_eq!((wide.bytes(), half.bytes(), half.len()), (140, 70, 35));
        for r in 0..7 {
            assert_eq!(half.row(r, 5), wide.row(r, 5));
            assert_eq!(&half.row(r, 5)[..], &values[r * 5..(r + 1) * 5]);
        }
        assert!(matches!(wide.row(2, 5), Cow::Borrowed(_)));
    }

    #[test]
    fn a_product_by_an_f16_table_in_blocks_equals_the_f32_product_on_a_table_of_shapes() {
        // Rows fewer than a block, a block exactly, and blocks with a short last one.
        for (n, rows, width) in [(1, 3, 2), (3, BLOCK_ROWS, 5), (2, 2 * BLOCK_ROWS + 17, 3), (0, 9, 4)] {
            let table: Vec<f32> = (0..rows * width)
                .map(|i| f16::from_f32(((i * 37 % 101) as f32 - 50.0) / 64.0).to_f32())
                .collect();
            let a: Vec<f32> = (0..n * rows).map(|i| ((i * 13 % 29) as f32 - 14.0) / 16.0).collect();
            let exact: Vec<f64> = (0..n * width)
                .map(|o| {
                    (0..rows)
                        .map(|r| a[o / width * rows + r] as f64 * table[r * width + o % width] as f64)
                        .sum()
                })
                .collect();
            for rows_of in [Rows::from(table.clone()), Rows::from(table.clone()).in_f16()] {
                let mut y = at_once(rows_of.product_in_turns(Kernel::Simd, &a, n, width, &AtOnce));
                assert_eq!(y.len(), n * width);
                for (got, want) in y.drain(..).zip(&exact) {
                    assert!(
                        (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "{n} x {rows} x {width}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

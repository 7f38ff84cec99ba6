//! Where the trained model's forward passes run, as one trait: the CPU kernel here ([`Bert`]
//! itself), the GPU with the CPU kernel as its fallback in the page (`crate::backend`).

use crate::attention::{cosine, HeadSet};
use crate::cpu::Kernel;
use crate::model::encoder::bert::{Bert, BertOutput};

/// Where the trained model's forward passes run.
// The page is single-threaded: its futures never move between threads, so no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Runner {
    /// The model on `ids` with only `heads` active, reusing `base`'s layers before the first
    /// one whose heads differ (see [`Bert::forward_from`]). Never fails: a runner that can fail
    /// falls back to one that cannot.
    async fn run(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> BertOutput;

    /// [`Runner::run`]'s sentence embedding alone, where nothing else of the pass is read (the
    /// CPU kernel then keeps no attention weights: [`Bert::embed_patched`]).
    async fn embed(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> Vec<f32> {
        self.run(ids, heads, base).await.embedding
    }
}

/// The CPU kernel.
impl Runner for Bert {
    async fn run(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> BertOutput {
        self.forward_from(Kernel::Simd, ids, heads, base)
    }

    async fn embed(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> Vec<f32> {
        self.embed_patched(Kernel::Simd, ids, heads, base, None)
    }
}

/// How far a pruned sentence embedding moved from the full one: `1 - cosine`.
pub fn embedding_drift(full: &[f32], pruned: &[f32]) -> f64 {
    1.0 - cosine(full, pruned)
}

//! The WebGPU backend (wgpu): the same forward pass as [`crate::cpu`], in three dispatches.
//!
//! ```text
//! QKV = x @ W_qkv                       matmul.wgsl     (one dispatch)
//! P_h, O_h for every head               attention.wgsl  (one dispatch, fused scores/softmax/PV)
//! C_h = O_h @ W_o rows of h, all heads  matmul.wgsl     (one dispatch, batched over heads)
//! ```
//!
//! Getting a device ([`GpuContext::acquire`]) is separate from using it
//! ([`GpuContext::forward`]). Pipelines are built once per context; buffers and bind groups once
//! per configuration (and, for the trained model, once per sequence length) and reused, all made
//! in [`resources`]. Everything that can go wrong comes back as a [`GpuError`] with a
//! sentence for the page; the backend then falls back to the CPU kernel.

mod bert;
mod context;
mod error;
mod forward;
mod gpt2;
mod layers;
#[cfg(feature = "bench")]
mod profile;
pub mod resources;

pub use bert::GpuBert;
pub use context::GpuContext;
pub use error::GpuError;
pub use forward::{buffer_sizes, BufferSizes};
pub use gpt2::GpuGpt2;
#[cfg(feature = "bench")]
pub use profile::DispatchTimes;

use std::cell::Cell;

/// A GPU failure the page can force, to show (and test) that the app survives each: the next
/// operation of that kind fails for real (a rejected adapter request, a shader that does not
/// compile, a readback buffer destroyed before it is mapped, a device destroyed as a driver
/// reset would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next adapter request is rejected.
    Adapter,
    /// The next pipeline creation gets invalid WGSL.
    Pipeline,
    /// The next readback's buffer is destroyed before it is mapped.
    Map,
    /// The device that next checks its health is destroyed first ([`GpuContext::destroy`]).
    DeviceLoss,
}

impl Fault {
    /// `adapter`, `pipeline`, `map` or `device`.
    pub fn parse(name: &str) -> Option<Fault> {
        match name {
            "adapter" => Some(Fault::Adapter),
            "pipeline" => Some(Fault::Pipeline),
            "map" => Some(Fault::Map),
            "device" => Some(Fault::DeviceLoss),
            _ => None,
        }
    }
}

thread_local! {
    static FAULT: Cell<Option<Fault>> = const { Cell::new(None) };
    /// Devices opened and not yet destroyed or dropped.
    static LIVE_DEVICES: Cell<usize> = const { Cell::new(0) };
}

/// How many GPU devices this thread has open (a destroyed device no longer counts).
pub fn live_devices() -> usize {
    LIVE_DEVICES.with(Cell::get)
}

fn count_devices(change: isize) {
    LIVE_DEVICES.with(|n| n.set(n.get().saturating_add_signed(change)));
}

/// Arms `fault` for the next operation of its kind (once).
pub fn inject_fault(fault: Fault) {
    FAULT.with(|f| f.set(Some(fault)));
}

/// Whether `fault` is armed; disarms it.
pub(crate) fn take_fault(fault: Fault) -> bool {
    FAULT.with(|f| f.get() == Some(fault) && f.take().is_some())
}

/// The WGSL sources, as shipped in the binary.
pub mod shaders {
    /// Batched strided matrix product, B from a buffer.
    pub const MATMUL: &str = concat!(
        include_str!("../../shaders/matmul_stored_b.wgsl"),
        include_str!("../../shaders/matmul.wgsl")
    );
    /// The same product with B generated from the weight generator's seed.
    pub const MATMUL_GENERATED: &str = concat!(
        include_str!("../../shaders/matmul_generated_b.wgsl"),
        include_str!("../../shaders/matmul.wgsl")
    );
    /// Fused per-head scores, softmax and weighted sum of V.
    pub const ATTENTION: &str = include_str!("../../shaders/attention.wgsl");
    /// The trained model's bias/GELU, residual LayerNorm and head-mask kernels.
    pub const BERT: &str = include_str!("../../shaders/bert.wgsl");
    /// Every shader with its file name, for validation tests.
    pub const ALL: [(&str, &str); 4] = [
        ("matmul_stored_b.wgsl + matmul.wgsl", MATMUL),
        ("matmul_generated_b.wgsl + matmul.wgsl", MATMUL_GENERATED),
        ("attention.wgsl", ATTENTION),
        ("bert.wgsl", BERT),
    ];
}

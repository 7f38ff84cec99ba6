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
//! per configuration and reused. Everything that can go wrong comes back as a [`GpuError`] with a
//! sentence for the page; the backend then falls back to the CPU kernel.

mod bert;
mod context;
mod forward;
mod profile;

pub use bert::GpuBert;
pub use context::GpuContext;
pub use forward::buffer_sizes;
pub use profile::DispatchTimes;

use std::cell::{Cell, RefCell};

/// Buffers made for one job (a configuration's plan, one pass), destroyed when it is dropped.
/// wgpu's web backend does not destroy a buffer on drop: the browser would free its GPU memory
/// only when JavaScript's garbage collector found the handle, so memory would climb with every
/// pass and preset switch until then.
#[derive(Default)]
pub(crate) struct Owned(RefCell<Vec<wgpu::Buffer>>);

impl Owned {
    /// Keeps `buffer` to destroy with the job, and returns it.
    pub(crate) fn keep(&self, buffer: wgpu::Buffer) -> wgpu::Buffer {
        self.0.borrow_mut().push(buffer.clone());
        buffer
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        for buffer in self.0.get_mut().drain(..) {
            buffer.destroy();
        }
    }
}

/// A GPU failure the page can force, to show (and test) that the app survives each: the next
/// operation of that kind fails for real (a rejected adapter request, a shader that does not
/// compile, a readback buffer destroyed before it is mapped). Device loss has its own switch,
/// `GpuContext::destroy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next adapter request is rejected.
    Adapter,
    /// The next pipeline creation gets invalid WGSL.
    Pipeline,
    /// The next readback's buffer is destroyed before it is mapped.
    Map,
}

impl Fault {
    /// `adapter`, `pipeline` or `map`.
    pub fn parse(name: &str) -> Option<Fault> {
        match name {
            "adapter" => Some(Fault::Adapter),
            "pipeline" => Some(Fault::Pipeline),
            "map" => Some(Fault::Map),
            _ => None,
        }
    }
}

thread_local! {
    static FAULT: Cell<Option<Fault>> = const { Cell::new(None) };
}

/// Arms `fault` for the next operation of its kind (once).
pub fn inject_fault(fault: Fault) {
    FAULT.with(|f| f.set(Some(fault)));
}

/// Whether `fault` is armed; disarms it.
pub(crate) fn take_fault(fault: Fault) -> bool {
    FAULT.with(|f| f.get() == Some(fault) && f.take().is_some())
}

use std::fmt;

/// Why the GPU could not be used, or stopped working.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuError {
    /// The browser has no WebGPU (`navigator.gpu` is missing or offers no adapter).
    NoWebGpu,
    /// No adapter was found.
    NoAdapter(String),
    /// The adapter refused to create a device.
    RequestDevice(String),
    /// A buffer this configuration needs is larger than the device allows.
    TooLarge {
        /// Which buffer.
        what: &'static str,
        /// Bytes it needs.
        bytes: u64,
        /// The device's limit.
        limit: u64,
    },
    /// The device was lost (driver reset, `destroy()`, tab in the background for too long...).
    DeviceLost(String),
    /// The GPU ran out of memory.
    OutOfMemory(String),
    /// A validation or internal error reported by WebGPU.
    Internal(String),
    /// Reading results back failed.
    Readback(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoWebGpu => write!(f, "this browser does not offer WebGPU"),
            GpuError::NoAdapter(e) => write!(f, "no WebGPU adapter is available ({e})"),
            GpuError::RequestDevice(e) => {
                write!(f, "the GPU adapter refused to open a device ({e})")
            }
            GpuError::TooLarge { what, bytes, limit } => write!(
                f,
                "the {what} buffer needs {:.1} MiB, over this GPU's limit of {:.1} MiB",
                *bytes as f64 / 1048576.0,
                *limit as f64 / 1048576.0
            ),
            GpuError::DeviceLost(e) => write!(f, "the GPU device was lost ({e})"),
            GpuError::OutOfMemory(e) => write!(f, "the GPU ran out of memory ({e})"),
            GpuError::Internal(e) => write!(f, "the GPU reported an error ({e})"),
            GpuError::Readback(e) => write!(f, "reading results back from the GPU failed ({e})"),
        }
    }
}

impl std::error::Error for GpuError {}

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

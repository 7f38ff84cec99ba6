//! Why the GPU could not be used, or stopped working: one sentence each, for the page.

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

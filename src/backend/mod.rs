//! Where the page's passes run, and running them: the backend chosen once per session (the GPU
//! or the CPU kernel), named in the page's badge, and replaced by the CPU kernel for the rest of
//! the session when the GPU fails. A GPU failure is a value here, never an error the page must
//! handle: the pass is done again on the CPU kernel and the session remembers why.
//!
//! Unless the reader forced one (`?backend=`), a session with a GPU runs each pass where it was
//! measured faster: the first pass of each model times both backends on a few short passes
//! ([`calibrate`]) and later passes follow the lines fitted to them ([`placement`]).
//!
//! One concept a file: [`choice`] (the backend and the GPU's absence), [`session`] (the session),
//! [`synthetic`] (the synthetic layer's pass), [`batched`] (the batched-heads and loop-over-heads
//! experiments), [`timing`] (interleaved, clock-honest timing), [`encoder`] and [`decoder`] (where a trained
//! encoder's and decoder's passes run), [`pruned_speed`] (timing the really pruned model), [`faults`] (the failures the page
//! can force, for its tests).

pub mod batched;
pub mod calibrate;
pub mod choice;
pub mod decoder;
pub mod encoder;
pub mod faults;
pub mod placed;
pub mod placement;
pub mod precision_speed;
pub mod pruned_speed;
pub mod session;
pub mod synthetic;
pub mod timing;

pub use self::calibrate::QUICK_CPU_FLOPS;
pub use self::choice::{one_line, Backend, GpuUnused};
pub use self::encoder::EncoderRunner;
pub use self::placement::{Choice, Place};
pub use self::session::Session;
pub use self::synthetic::{is_quick, run, Halted, Run, WeightsIn};
pub use crate::settings::Preference;

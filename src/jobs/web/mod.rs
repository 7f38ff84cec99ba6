//! The jobs in the browser: the page's clock and turns ([`PageHost`]), its web workers as a
//! [`crate::jobs::pool::Pool`] ([`WebWorkers`]), and, inside a worker, serving the page's pieces
//! ([`worker`]).

mod host;
pub mod worker;
mod workers;

pub use host::{clock_step_ms, now_ms, yield_to_browser, PageHost};
pub use workers::{auto_threads, WebWorkers, AUTO_MAX};

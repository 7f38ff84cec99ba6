//! What a job needs from where it runs besides the model: a clock, and a turn for the browser
//! between steps. The page's is `jobs::web::PageHost`; natively, `jobs::native::NativeHost`.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::attention::clock::Clock;
use crate::attention::turns::{TurnFuture, Turns, SLICE_MS, STEP_FLOPS};

/// A future of the page's one thread (never sent elsewhere).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A clock and the browser's turn.
pub trait Host: Clock {
    /// Resolves once the browser has had a turn (rendered, handled events).
    fn turn(&self) -> LocalFuture<'static, ()>;
}

/// A host's clock as the backend's timing functions take it (they take a sized clock).
pub struct HostClock<'a>(pub &'a dyn Host);

impl Clock for HostClock<'_> {
    fn now_ms(&self) -> f64 {
        self.0.now_ms()
    }

    fn resolution_ms(&self) -> f64 {
        self.0.resolution_ms()
    }
}

/// A host's turns for the passes a runner makes on its thread: products cut into steps of
/// [`STEP_FLOPS`], and the
/// host's turn once [`SLICE_MS`] have passed since the last one (a first step after a quiet
/// while gives a turn at once).
pub struct HostTurns {
    host: Rc<dyn Host>,
    since: Cell<f64>,
}

impl HostTurns {
    /// Turns of `host`.
    pub fn new(host: Rc<dyn Host>) -> HostTurns {
        let since = Cell::new(host.now_ms());
        HostTurns { host, since }
    }
}

impl Turns for HostTurns {
    fn step_flops(&self) -> Option<usize> {
        Some(STEP_FLOPS)
    }

    fn turn(&self) -> TurnFuture<'_> {
        Box::pin(async move {
            if self.host.now_ms() - self.since.get() >= SLICE_MS {
                self.host.turn().await;
                self.since.set(self.host.now_ms());
            }
        })
    }
}

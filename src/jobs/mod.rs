//! The trained models' long work, in one place, below the page and above the models.
//!
//! Every long computation on either family is a job. An encoder's ([`encoder`]): the importance
//! sweeps, the task's importance, the quality of a set of heads and the heads' roles, the pruning
//! curves, activation patching and the pruned-forward timing. A decoder's ([`decoder`]): each
//! head's importance to the next token, the text set's perplexity and its head-gate gradients,
//! the pruning curves on the text set and the induction test. [`driver::drive`] runs each
//! through one loop: before every step the browser gets a turn, the job stops when its input
//! changed (its [`ticket::Ticket`], a condition on its inputs, no longer holds), and its progress
//! is published with the time left at the pace measured where it runs ([`pace`]).
//!
//! Where the work runs is decided once, by the [`engine::Engine`], generic over the family
//! ([`engine::Family`]): it owns the model on the page's backend (the GPU while it works, else the
//! CPU kernel) and the pool of threads for batch work, behind [`pool::Pool`]: the page's web
//! workers (`web`, in the browser), the page's own thread, or a fake in native tests (`native`).
//! The pieces of work ([`work::Piece`], both families) cross to the workers as bytes
//! ([`wire`]); a worker holds either family ([`copies`]). The page's components only start jobs
//! and show what they publish.

pub mod copies;
pub mod decoder;
pub mod driver;
pub mod encoder;
pub mod engine;
pub mod host;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
pub mod pace;
pub mod pool;
pub mod ticket;
#[cfg(target_arch = "wasm32")]
pub mod web;
pub mod wire;
pub mod work;

//! headlab: multi-head attention a reader can run, see and break.
//!
//! Dependencies point one way (`tests/architecture.rs` fails the build otherwise):
//! [`attention`] (the pure core) <- [`cpu`] <- [`model`] <- [`gpu`] <- [`backend`] <- [`jobs`]
//! <- `ui`; [`settings`], [`embed`], [`export`] and [`viz`] are pure and used by `ui`. Only `ui`
//! touches the browser's page, and only on wasm32; below it, only the web workers' two ends
//! (`jobs::web`) and WebGPU (`gpu`) use the browser. The benchmarks ([`bench`]) exist only with
//! the `bench` feature: the shipped page carries none of them.
#![warn(missing_docs)]

pub mod attention;
pub mod backend;
#[cfg(feature = "bench")]
pub mod bench;
pub mod cpu;
pub mod embed;
pub mod export;
pub mod gpu;
pub mod jobs;
pub mod model;
pub mod settings;
pub mod viz;

#[cfg(target_arch = "wasm32")]
pub mod ui;

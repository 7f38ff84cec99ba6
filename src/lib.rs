//! headlab: multi-head attention a reader can run, see and break.
//!
//! Dependency direction: [`attention`] (pure math) <- [`cpu`] <- [`backend`] <- `ui`;
//! [`viz`] (pure drawing) <- `ui`. Only `ui` touches the browser, and only on wasm32.
#![warn(missing_docs)]

pub mod attention;
pub mod backend;
pub mod bench;
pub mod cpu;
pub mod embed;
pub mod export;
pub mod gpu;
pub mod model;
pub mod settings;
pub mod viz;

#[cfg(target_arch = "wasm32")]
pub mod ui;

//! The synthetic layer's panels and the page's status lines; each reads the page's state from
//! context and displays it.

mod charts;
mod claims;
mod code;
mod controls;
mod drift;
mod heads;
mod layer_flow;
mod status;
mod table;

pub use charts::{ConfigChart, DriftChart};
pub use claims::Claims;
pub use code::CodeWalk;
pub use drift::DriftPanel;
pub use heads::HeadGrid;
pub use layer_flow::FlowPanel;
pub use status::{BackendNote, ConfigError, LinkNotes, Timing, Toolbar};

//! The synthetic layer's panels and the page's status lines; each reads the page's state from
//! context and displays it.

mod charts;
mod claims;
mod code;
mod controls;
mod drift;
mod flow;
mod heads;
mod status;
mod table;

pub use charts::ConfigChart;
pub use claims::Claims;
pub use code::CodeWalk;
pub use drift::DriftPanel;
pub use flow::FlowPanel;
pub use heads::HeadGrid;
pub use status::{BackendNote, ConfigError, LinkNotes, Timing, Toolbar};

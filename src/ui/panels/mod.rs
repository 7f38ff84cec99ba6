//! The synthetic layer's panels and the page's status lines; each reads the page's state from
//! context and displays it.

mod charts;
mod claims;
mod controls;
mod drift;
mod heads;
mod status;

pub use charts::ConfigChart;
pub use claims::Claims;
pub use drift::DriftPanel;
pub use heads::HeadGrid;
pub use status::{BackendNote, ConfigError, LinkNotes, Timing, Toolbar};

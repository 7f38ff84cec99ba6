//! Pure drawing helpers: colour maps and heatmap rasters, testable without a browser.

pub mod chart;
pub mod colormap;
pub mod heatmap;

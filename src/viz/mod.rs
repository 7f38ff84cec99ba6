//! Pure drawing helpers: colour maps, heatmap rasters and the charts, testable without a browser.

pub mod chart;
pub mod colormap;
pub mod flow_picture;
pub mod heatmap;
pub mod in_view;
pub mod labels;
pub mod surface;
pub mod svg;
pub mod task_chart;

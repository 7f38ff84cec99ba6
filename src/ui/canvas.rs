//! Pixels into canvases: heatmaps one pixel per weight, the charts' colours under the page's
//! theme, and where a pointer is on a canvas that CSS scales.

use leptos::prelude::window;
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData, MouseEvent};

use crate::settings::Theme;
use crate::viz::chart::Palette;
use crate::viz::heatmap::{rasterize, Scale};

/// Draws an `n x n` attention matrix into `canvas`, one pixel per weight.
pub fn draw_heatmap(
    canvas: &HtmlCanvasElement,
    weights: &[f32],
    n: usize,
) -> Result<(), wasm_bindgen::JsValue> {
    canvas.set_width(n as u32);
    canvas.set_height(n as u32);
    let ctx: CanvasRenderingContext2d =
        canvas.get_context("2d")?.ok_or("no 2d context")?.dyn_into().map_err(|_| "not a 2d context")?;
    let pixels = rasterize(weights, n, Scale::fit(weights));
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&pixels), n as u32, n as u32)?;
    ctx.put_image_data(&image, 0.0, 0.0)
}

/// The colours charts use under `theme` (the system's choice for [`Theme::Auto`]).
pub fn palette(theme: Theme) -> &'static Palette {
    let dark = match theme {
        Theme::Dark => true,
        Theme::Light => false,
        Theme::Auto => {
            window().match_media("(prefers-color-scheme: dark)").ok().flatten().is_some_and(|m| m.matches())
        }
    };
    if dark {
        &Palette::DARK
    } else {
        &Palette::LIGHT
    }
}

/// Canvas pixels under a mouse event (the canvas is scaled by CSS).
pub fn canvas_point(canvas: &HtmlCanvasElement, ev: &MouseEvent) -> (f64, f64) {
    let rect = canvas.get_bounding_client_rect();
    let sx = canvas.width() as f64 / rect.width().max(1.0);
    let sy = canvas.height() as f64 / rect.height().max(1.0);
    ((ev.client_x() as f64 - rect.left()) * sx, (ev.client_y() as f64 - rect.top()) * sy)
}

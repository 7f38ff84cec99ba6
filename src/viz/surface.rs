//! One drawing backend type for every chart: [`Surface`], which draws on any plotters backend
//! through a reference to it. Each chart's drawing code is generic over its backend, and the
//! page draws every chart on a canvas and exports it as SVG; called on both backends directly,
//! every chart (and the plotters code under it: meshes, series, labels) would be compiled once
//! per backend into the page's wasm. Called on a `Surface`, it is compiled once, and each
//! backend adds only the few calls below (BENCHMARKS.md section 19). What is drawn is the same:
//! each call goes to the backend unchanged, a text's style rebuilt from the same family, size,
//! style, transform, colour and anchor.

use std::error::Error;
use std::fmt;

use plotters::prelude::{DrawingArea, IntoDrawingArea};
use plotters::style::{FontDesc, TextStyle};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// A backend's failure, as its message.
#[derive(Debug)]
pub struct Failed(String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Failed {}

type Drawn<T = ()> = Result<T, DrawingErrorKind<Failed>>;

/// A line's or a shape's colour and width, as every backend reads a style.
struct Stroke {
    color: BackendColor,
    width: u32,
}

impl Stroke {
    fn of<S: BackendStyle>(style: &S) -> Stroke {
        Stroke { color: style.color(), width: style.stroke_width() }
    }
}

impl BackendStyle for Stroke {
    fn color(&self) -> BackendColor {
        self.color
    }

    fn stroke_width(&self) -> u32 {
        self.width
    }
}

/// What a chart asks of a backend, in calls a reference can make (no generic method).
trait Backend {
    fn size(&self) -> (u32, u32);
    fn prepare(&mut self) -> Drawn;
    fn present(&mut self) -> Drawn;
    fn pixel(&mut self, at: BackendCoord, color: BackendColor) -> Drawn;
    fn line(&mut self, from: BackendCoord, to: BackendCoord, stroke: &Stroke) -> Drawn;
    fn rect(&mut self, corners: (BackendCoord, BackendCoord), stroke: &Stroke, fill: bool) -> Drawn;
    fn path(&mut self, path: &[BackendCoord], stroke: &Stroke) -> Drawn;
    fn circle(&mut self, center: BackendCoord, radius: u32, stroke: &Stroke, fill: bool) -> Drawn;
    fn polygon(&mut self, vertices: &[BackendCoord], stroke: &Stroke) -> Drawn;
    fn text(&mut self, text: &str, style: &TextStyle<'_>, at: BackendCoord) -> Drawn;
    fn text_size(&self, text: &str, style: &TextStyle<'_>) -> Drawn<(u32, u32)>;
    fn bitmap(&mut self, at: BackendCoord, size: (u32, u32), rgb: &[u8]) -> Drawn;
}

/// A backend's error as a [`Failed`]; a font's error unchanged.
fn failed<E: Error + Send + Sync>(e: DrawingErrorKind<E>) -> DrawingErrorKind<Failed> {
    match e {
        DrawingErrorKind::DrawingError(e) => DrawingErrorKind::DrawingError(Failed(e.to_string())),
        DrawingErrorKind::FontError(e) => DrawingErrorKind::FontError(e),
    }
}

impl<DB: DrawingBackend> Backend for DB {
    fn size(&self) -> (u32, u32) {
        self.get_size()
    }

    fn prepare(&mut self) -> Drawn {
        self.ensure_prepared().map_err(failed)
    }

    fn present(&mut self) -> Drawn {
        DrawingBackend::present(self).map_err(failed)
    }

    fn pixel(&mut self, at: BackendCoord, color: BackendColor) -> Drawn {
        self.draw_pixel(at, color).map_err(failed)
    }

    fn line(&mut self, from: BackendCoord, to: BackendCoord, stroke: &Stroke) -> Drawn {
        self.draw_line(from, to, stroke).map_err(failed)
    }

    fn rect(&mut self, (from, to): (BackendCoord, BackendCoord), stroke: &Stroke, fill: bool) -> Drawn {
        self.draw_rect(from, to, stroke, fill).map_err(failed)
    }

    fn path(&mut self, path: &[BackendCoord], stroke: &Stroke) -> Drawn {
        self.draw_path(path.iter().copied(), stroke).map_err(failed)
    }

    fn circle(&mut self, center: BackendCoord, radius: u32, stroke: &Stroke, fill: bool) -> Drawn {
        self.draw_circle(center, radius, stroke, fill).map_err(failed)
    }

    fn polygon(&mut self, vertices: &[BackendCoord], stroke: &Stroke) -> Drawn {
        self.fill_polygon(vertices.iter().copied(), stroke).map_err(failed)
    }

    fn text(&mut self, text: &str, style: &TextStyle<'_>, at: BackendCoord) -> Drawn {
        self.draw_text(text, style, at).map_err(failed)
    }

    fn text_size(&self, text: &str, style: &TextStyle<'_>) -> Drawn<(u32, u32)> {
        self.estimate_text_size(text, style).map_err(failed)
    }

    fn bitmap(&mut self, at: BackendCoord, size: (u32, u32), rgb: &[u8]) -> Drawn {
        self.blit_bitmap(at, size, rgb).map_err(failed)
    }
}

/// A backend every chart draws on: any plotters backend, through a reference.
pub struct Surface<'a>(&'a mut dyn Backend);

impl<'a> Surface<'a> {
    /// The whole of `backend` as a chart's drawing area.
    pub fn area<DB: DrawingBackend>(backend: &'a mut DB) -> DrawingArea<Surface<'a>, plotters::coord::Shift> {
        Surface(backend).into_drawing_area()
    }
}

/// `style` as plotters' own text style: its family, size, style, transform, colour and anchor.
fn text_style<S: BackendTextStyle>(style: &S) -> TextStyle<'_> {
    let font = FontDesc::new(style.family(), style.size(), style.style()).transform(style.transform());
    TextStyle { font, color: style.color(), pos: style.anchor() }
}

impl DrawingBackend for Surface<'_> {
    type ErrorType = Failed;

    fn get_size(&self) -> (u32, u32) {
        self.0.size()
    }

    fn ensure_prepared(&mut self) -> Drawn {
        self.0.prepare()
    }

    fn present(&mut self) -> Drawn {
        self.0.present()
    }

    fn draw_pixel(&mut self, at: BackendCoord, color: BackendColor) -> Drawn {
        self.0.pixel(at, color)
    }

    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Drawn {
        self.0.line(from, to, &Stroke::of(style))
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Drawn {
        self.0.rect((from, to), &Stroke::of(style), fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Drawn {
        self.0.path(&path.into_iter().collect::<Vec<_>>(), &Stroke::of(style))
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Drawn {
        self.0.circle(center, radius, &Stroke::of(style), fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vertices: I,
        style: &S,
    ) -> Drawn {
        self.0.polygon(&vertices.into_iter().collect::<Vec<_>>(), &Stroke::of(style))
    }

    fn draw_text<S: BackendTextStyle>(&mut self, text: &str, style: &S, at: BackendCoord) -> Drawn {
        self.0.text(text, &text_style(style), at)
    }

    fn estimate_text_size<S: BackendTextStyle>(&self, text: &str, style: &S) -> Drawn<(u32, u32)> {
        self.0.text_size(text, &text_style(style))
    }

    fn blit_bitmap(&mut self, at: BackendCoord, size: (u32, u32), rgb: &[u8]) -> Drawn {
        self.0.bitmap(at, size, rgb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::viz::chart::{draw_config_chart, Palette};
    use plotters::prelude::SVGBackend;

    #[test]
    fn a_chart_on_a_surface_is_the_chart_on_its_backend() {
        let draw = |on_surface: bool| {
            let mut svg = String::new();
            {
                let mut backend = SVGBackend::with_string(&mut svg, (600, 460));
                if on_surface {
                    let area = Surface::area(&mut backend);
                    draw_config_chart(&area, Some((768, 12)), "yours", &Palette::LIGHT, 1.0).unwrap();
                    area.present().unwrap();
                } else {
                    let area = backend.into_drawing_area();
                    draw_config_chart(&area, Some((768, 12)), "yours", &Palette::LIGHT, 1.0).unwrap();
                    area.present().unwrap();
                }
            }
            svg
        };
        let (direct, through) = (draw(false), draw(true));
        assert!(direct.contains("<text") && direct.len() > 4000, "{}", &direct[..200.min(direct.len())]);
        assert_eq!(through, direct);
    }
}

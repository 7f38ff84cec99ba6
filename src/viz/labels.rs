//! Placing a chart's text labels so that none is clipped or covers another label, a point or a
//! line it does not name: each label tries its candidate positions in order and takes the first
//! that is clear. Pure geometry in backend pixels, shared by the charts and their tests.

/// An axis-aligned box in pixels (y grows downwards).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left edge.
    pub x0: f64,
    /// Top edge.
    pub y0: f64,
    /// Right edge.
    pub x1: f64,
    /// Bottom edge.
    pub y1: f64,
}

impl Rect {
    /// The box of `width` x `height` whose corner or edge given by `anchor` is at `(x, y)`.
    pub fn anchored(x: f64, y: f64, width: f64, height: f64, anchor: Anchor) -> Rect {
        let x0 = match anchor.h {
            Side::Start => x,
            Side::Middle => x - width / 2.0,
            Side::End => x - width,
        };
        let y0 = match anchor.v {
            Side::Start => y,
            Side::Middle => y - height / 2.0,
            Side::End => y - height,
        };
        Rect { x0, y0, x1: x0 + width, y1: y0 + height }
    }

    /// The square around a point drawn with radius `r`.
    pub fn around(x: f64, y: f64, r: f64) -> Rect {
        Rect { x0: x - r, y0: y - r, x1: x + r, y1: y + r }
    }

    /// Whether the two boxes share any area.
    pub fn overlaps(&self, other: &Rect) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }

    /// Whether this box lies wholly inside `outer`.
    pub fn inside(&self, outer: &Rect) -> bool {
        self.x0 >= outer.x0 && self.x1 <= outer.x1 && self.y0 >= outer.y0 && self.y1 <= outer.y1
    }

    /// Whether the segment from `a` to `b` passes through the box (Liang-Barsky clipping).
    pub fn crosses(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (p, q) in [(-dx, a.0 - self.x0), (dx, self.x1 - a.0), (-dy, a.1 - self.y0), (dy, self.y1 - a.1)] {
            if p == 0.0 {
                if q < 0.0 {
                    return false;
                }
            } else {
                let t = q / p;
                if p < 0.0 {
                    t0 = t0.max(t);
                } else {
                    t1 = t1.min(t);
                }
            }
        }
        t0 < t1
    }

    /// The box grown by `by` pixels on every side.
    pub fn grown(&self, by: f64) -> Rect {
        Rect { x0: self.x0 - by, y0: self.y0 - by, x1: self.x1 + by, y1: self.y1 + by }
    }
}

/// Where along one axis a box is anchored: its start (left, top), middle or end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Left or top.
    Start,
    /// Centre.
    Middle,
    /// Right or bottom.
    End,
}

/// Which point of a text box its position names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// Horizontal.
    pub h: Side,
    /// Vertical.
    pub v: Side,
}

/// The size a label of `chars` characters takes at `font_px`, when the backend cannot measure
/// it: a generous 0.62 em per character (DejaVu Sans, the widest common sans-serif, averages
/// about 0.58) and 1.25 em of height.
pub fn estimate_text(chars: usize, font_px: f64) -> (f64, f64) {
    (0.62 * font_px * chars as f64, 1.25 * font_px)
}

/// A drawn line from one pixel position to another, and the id of what it stands for.
pub type Segment = ((f64, f64), (f64, f64), usize);

/// What a label must stay clear of.
#[derive(Clone, Debug, Default)]
pub struct Obstacles {
    /// Drawn marks (points, rings) with the id of what they stand for.
    pub marks: Vec<(Rect, usize)>,
    /// Drawn lines with the id of what they stand for.
    pub lines: Vec<Segment>,
    /// Labels already placed.
    pub labels: Vec<Rect>,
}

impl Obstacles {
    /// Whether `rect`, a label naming `names`, is clear of every mark, line and label of
    /// anything else, and inside `bounds`; `gap` pixels of air are kept around it.
    pub fn clear(&self, rect: &Rect, names: usize, bounds: &Rect, gap: f64) -> bool {
        let air = rect.grown(gap);
        rect.inside(bounds)
            && self.marks.iter().all(|(m, id)| *id == names || !m.overlaps(&air))
            && self.lines.iter().all(|(a, b, id)| *id == names || !air.crosses(*a, *b))
            && self.labels.iter().all(|l| !l.overlaps(&air))
    }

    /// The first of `candidates` that is clear, recorded as placed; `None` if none is.
    pub fn place_if_clear(
        &mut self,
        candidates: &[Rect],
        names: usize,
        bounds: &Rect,
        gap: f64,
    ) -> Option<Rect> {
        let chosen = candidates.iter().find(|c| self.clear(c, names, bounds, gap)).copied()?;
        self.labels.push(chosen);
        Some(chosen)
    }

    /// The first of `candidates` that is clear (or the first, if none is), recorded as placed.
    pub fn place(&mut self, candidates: &[Rect], names: usize, bounds: &Rect, gap: f64) -> Rect {
        self.place_if_clear(candidates, names, bounds, gap).unwrap_or_else(|| {
            let first = *candidates.first().expect("at least one candidate position");
            self.labels.push(first);
            first
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_overlap_contain_and_are_crossed() {
        let a = Rect { x0: 0.0, y0: 0.0, x1: 10.0, y1: 5.0 };
        assert!(a.overlaps(&Rect { x0: 9.0, y0: 4.0, x1: 12.0, y1: 9.0 }));
        assert!(!a.overlaps(&Rect { x0: 10.0, y0: 0.0, x1: 12.0, y1: 5.0 }), "touching edges do not overlap");
        assert!(a.inside(&a.grown(1.0)) && !a.grown(1.0).inside(&a));
        assert!(a.crosses((-5.0, 2.0), (15.0, 2.0)), "straight through");
        assert!(a.crosses((5.0, 2.0), (50.0, 50.0)), "starts inside");
        assert!(!a.crosses((-5.0, -1.0), (15.0, -1.0)), "passes above");
        assert!(!a.crosses((-5.0, 2.0), (-1.0, 2.0)), "stops short");
        assert!(a.crosses((-1.0, 6.0), (11.0, -1.0)), "a diagonal across a corner region");
        assert!(!a.crosses((8.0, 8.0), (14.0, 2.0)), "a diagonal missing the corner");
    }

    #[test]
    fn anchors_put_the_named_point_of_the_box_at_the_position() {
        let end_end = Anchor { h: Side::End, v: Side::End };
        assert_eq!(
            Rect::anchored(10.0, 20.0, 4.0, 2.0, end_end),
            Rect { x0: 6.0, y0: 18.0, x1: 10.0, y1: 20.0 }
        );
        let mid = Anchor { h: Side::Middle, v: Side::Start };
        assert_eq!(Rect::anchored(10.0, 20.0, 4.0, 2.0, mid), Rect { x0: 8.0, y0: 20.0, x1: 12.0, y1: 22.0 });
    }

    #[test]
    fn a_label_takes_the_first_clear_candidate_and_may_touch_what_it_names() {
        let bounds = Rect { x0: 0.0, y0: 0.0, x1: 100.0, y1: 100.0 };
        let mut obstacles = Obstacles {
            marks: vec![(Rect::around(50.0, 50.0, 5.0), 1)],
            lines: vec![((0.0, 20.0), (100.0, 20.0), 2)],
            labels: vec![],
        };
        let on_line = Rect { x0: 10.0, y0: 15.0, x1: 30.0, y1: 25.0 };
        let clipped = Rect { x0: 90.0, y0: 60.0, x1: 110.0, y1: 70.0 };
        let on_point = Rect { x0: 45.0, y0: 45.0, x1: 60.0, y1: 55.0 };
        let free = Rect { x0: 10.0, y0: 60.0, x1: 30.0, y1: 70.0 };
        assert_eq!(obstacles.place(&[on_line, clipped, on_point, free], 3, &bounds, 1.0), free);
        // The line's own label may sit on it, the point's on the point; a label may not cover
        // another.
        assert_eq!(obstacles.place(&[on_line], 2, &bounds, 1.0), on_line);
        assert!(obstacles.clear(&on_point, 1, &bounds, 1.0) && !obstacles.clear(&on_point, 3, &bounds, 1.0));
        assert_eq!(obstacles.place(&[free, clipped], 3, &bounds, 1.0), free, "nothing clear: the first");
        assert!(!obstacles.clear(&free, 3, &bounds, 0.0));
        assert_eq!(obstacles.place_if_clear(&[free, clipped], 3, &bounds, 1.0), None, "or none at all");
    }
}

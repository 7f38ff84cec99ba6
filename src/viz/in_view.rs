//! The part of a long list or a wide picture that its scroll box shows. The page builds elements
//! only for the items in or near the view: a long sequence's flow picture and token drift list,
//! made whole in one call, held the page's thread past its bound, WebKit's most (the call, then
//! style and layout of every element; BENCHMARKS.md section 20, fifth round). The range is
//! widened by one view on each side and rounded out to whole chunks, so a scroll redraws only
//! when it leaves what is built, and a quick scroll shows no empty space.

use std::ops::Range;

/// Items are built in whole chunks of this many.
pub const CHUNK: usize = 8;

/// Where a scroll box stands along its axis: how far it is scrolled and how much it shows, in
/// CSS pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScrollView {
    /// How far the box is scrolled.
    pub offset: f64,
    /// How much of its content it shows.
    pub extent: f64,
}

impl ScrollView {
    /// A box scrolled to its start that shows `extent` pixels: what the page assumes before it
    /// has measured the box.
    pub const fn at_start(extent: f64) -> ScrollView {
        ScrollView { offset: 0.0, extent }
    }

    /// The items to build: `count` items of `item` pixels each, the first `lead` pixels into the
    /// content. Every item that overlaps the view is in the range, and so is every item within
    /// one view's extent of it; the ends are rounded out to multiples of [`CHUNK`]. A view that
    /// is not a finite, non-negative measure is taken as at the start, one item wide; items of
    /// no size are all built.
    pub fn items(&self, lead: f64, item: f64, count: usize) -> Range<usize> {
        if !(item.is_finite() && item > 0.0) {
            return 0..count;
        }
        let offset = if self.offset.is_finite() { self.offset.max(0.0) } else { 0.0 };
        let extent = if self.extent.is_finite() && self.extent > 0.0 { self.extent } else { item };
        // Positions in items from the first, the view widened by its extent on each side.
        let from = ((offset - extent - lead) / item).floor().max(0.0);
        let to = ((offset + 2.0 * extent - lead) / item).ceil().max(0.0);
        // `as` saturates: a huge position is past the end, clamped below.
        let first = (from as usize / CHUNK * CHUNK).min(count);
        let last = (to as usize).div_ceil(CHUNK).saturating_mul(CHUNK).min(count);
        first..last.max(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items that overlap `[offset, offset + extent)`: what the reader sees.
    fn seen(view: ScrollView, lead: f64, item: f64, count: usize) -> Range<usize> {
        let first = ((view.offset - lead) / item).floor().max(0.0) as usize;
        let last = ((view.offset + view.extent - lead) / item).ceil().max(0.0) as usize;
        first.min(count)..last.min(count)
    }

    #[test]
    fn every_item_seen_is_built_and_no_more_than_three_views_and_two_chunks() {
        // Boxes as the page has them (the token list's 20 px rows, the flow's 46 px columns
        // after 150 px of labels), odd sizes and counts, scrolled to the start, the end and
        // places between.
        let cases = [
            (20.0, 0.0, 448.0, 512),
            (46.0, 150.0, 1100.0, 512),
            (46.0, 150.0, 358.0, 7),
            (21.6, 0.0, 448.0, 1),
            (13.0, 5.0, 999.0, 100_000),
            (46.0, 150.0, 3000.0, 512),
        ];
        for (item, lead, extent, count) in cases {
            let content = lead + item * count as f64;
            let mut offset = 0.0;
            while offset <= content {
                let view = ScrollView { offset, extent };
                let built = view.items(lead, item, count);
                let shown = seen(view, lead, item, count);
                assert!(
                    built.start <= shown.start && shown.end <= built.end,
                    "{view:?} {item} {count}: {built:?} misses {shown:?}"
                );
                assert!(built.end <= count);
                let most = (3.0 * extent / item).ceil() as usize + 2 * CHUNK + 2;
                assert!(built.len() <= most, "{view:?}: {} items built, at most {most}", built.len());
                assert_eq!(built.start % CHUNK, 0);
                assert!(built.end.is_multiple_of(CHUNK) || built.end == count);
                offset += extent / 3.7;
            }
        }
    }

    #[test]
    fn a_small_scroll_builds_the_same_items() {
        let at = |offset| ScrollView { offset, extent: 448.0 }.items(0.0, 20.0, 512);
        assert_eq!(at(0.0), 0..48);
        assert_eq!(at(100.0), at(101.0));
        assert_eq!(at(2000.0), 72..152);
        assert_eq!(at(10_000.0), 472..512);
    }

    #[test]
    fn measures_that_are_not_sizes_build_a_sensible_range() {
        assert_eq!(ScrollView::at_start(f64::NAN).items(0.0, 20.0, 512), 0..8);
        assert_eq!(ScrollView { offset: f64::INFINITY, extent: 100.0 }.items(0.0, 20.0, 512), 0..16);
        assert_eq!(ScrollView { offset: -50.0, extent: 100.0 }.items(0.0, 20.0, 512), 0..16);
        assert_eq!(ScrollView { offset: 1e300, extent: 100.0 }.items(0.0, 20.0, 512), 512..512);
        assert_eq!(ScrollView::at_start(100.0).items(0.0, 0.0, 9), 0..9);
        assert_eq!(ScrollView::at_start(100.0).items(0.0, f64::NAN, 9), 0..9);
        assert_eq!(ScrollView::at_start(100.0).items(0.0, 20.0, 0), 0..0);
        // The whole content in view: everything.
        assert_eq!(ScrollView::at_start(1e6).items(150.0, 46.0, 512), 0..512);
    }
}

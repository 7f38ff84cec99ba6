//! Viridis: perceptually uniform, readable in greyscale and by the common forms of colour
//! blindness. Sampled at eleven stops and interpolated linearly.

const VIRIDIS: [[u8; 3]; 11] = [
    [68, 1, 84],
    [72, 36, 117],
    [65, 68, 135],
    [53, 95, 141],
    [42, 120, 142],
    [33, 145, 140],
    [34, 168, 132],
    [68, 191, 112],
    [122, 209, 81],
    [189, 223, 38],
    [253, 231, 37],
];

/// The viridis colour at `t` in `[0, 1]` (clamped; NaN maps to the low end).
pub fn viridis(t: f32) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let pos = t * (VIRIDIS.len() - 1) as f32;
    let i = (pos as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f32;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|c| (a[c] as f32 + (b[c] as f32 - a[c] as f32) * f).round() as u8)
}

/// A CSS `linear-gradient` of the same map, for the legend.
pub fn viridis_css_gradient() -> String {
    let stops: Vec<String> = VIRIDIS.iter().map(|[r, g, b]| format!("rgb({r},{g},{b})")).collect();
    format!("linear-gradient(to right, {})", stops.join(", "))
}

/// Okabe and Ito's eight colours, told apart by the common forms of colour blindness: for
/// categories (the head atlas's clusters).
pub const CATEGORIES: [[u8; 3]; 8] = [
    [230, 159, 0],
    [86, 180, 233],
    [0, 158, 115],
    [240, 228, 66],
    [0, 114, 178],
    [213, 94, 0],
    [204, 121, 167],
    [102, 102, 102],
];

/// Category `i`'s colour as CSS (the palette repeats after eight).
pub fn category_css(i: usize) -> String {
    let [r, g, b] = CATEGORIES[i % CATEGORIES.len()];
    format!("rgb({r},{g},{b})")
}

/// The blue end of [`diverging`] (ColorBrewer RdBu's).
const BLUE: [u8; 3] = [33, 102, 172];

/// The red end of [`diverging`].
const RED: [u8; 3] = [178, 24, 43];

/// A diverging map for signed shares: white at 0, blue toward `+1`, red toward `-1` (clamped;
/// NaN is white). Blue and red stay apart for the common forms of colour blindness.
pub fn diverging(t: f32) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(-1.0, 1.0) };
    let end = if t >= 0.0 { BLUE } else { RED };
    let f = t.abs();
    std::array::from_fn(|c| (255.0 + (end[c] as f32 - 255.0) * f).round() as u8)
}

/// WCAG 2's relative luminance of an sRGB colour.
fn luminance(rgb: [u8; 3]) -> f64 {
    let lin = |c: u8| {
        let c = c as f64 / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
}

/// Whether white text on `rgb` has more contrast than black (WCAG 2's ratio): the better of
/// the two is always at least 4.58:1, above the 4.5:1 small text needs.
pub fn wants_light_text(rgb: [u8; 3]) -> bool {
    let l = luminance(rgb);
    1.05 / (l + 0.05) > (l + 0.05) / 0.05
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diverging_is_white_at_zero_and_its_ends_beyond() {
        assert_eq!(diverging(0.0), [255, 255, 255]);
        assert_eq!(diverging(f32::NAN), [255, 255, 255]);
        assert_eq!((diverging(1.0), diverging(4.0)), (BLUE, BLUE));
        assert_eq!((diverging(-1.0), diverging(-4.0)), (RED, RED));
        // Halfway is halfway in every channel, and the sign picks the hue.
        assert_eq!(diverging(0.5), [144, 179, 214]);
        assert!(diverging(-0.5)[0] > diverging(-0.5)[2]);
        assert!(wants_light_text(BLUE) && wants_light_text(RED) && !wants_light_text(diverging(0.3)));
        // Every colour of both maps gets text of at least 4.5:1 contrast, black or white.
        let ratio = |rgb| {
            let l = luminance(rgb);
            if wants_light_text(rgb) {
                1.05 / (l + 0.05)
            } else {
                (l + 0.05) / 0.05
            }
        };
        for i in 0..=100 {
            let t = i as f32 / 100.0;
            for rgb in [viridis(t), diverging(t), diverging(-t)] {
                assert!(ratio(rgb) >= 4.5, "{rgb:?}: {}", ratio(rgb));
            }
        }
    }

    #[test]
    fn ends_and_clamping() {
        assert_eq!(viridis(0.0), VIRIDIS[0]);
        assert_eq!(viridis(1.0), VIRIDIS[10]);
        assert_eq!(viridis(-3.0), VIRIDIS[0]);
        assert_eq!(viridis(7.0), VIRIDIS[10]);
        assert_eq!(viridis(f32::NAN), VIRIDIS[0]);
        assert_eq!(viridis(0.5), VIRIDIS[5]);
    }

    #[test]
    fn lightness_rises_monotonically() {
        // Perceived lightness (Rec. 601 luma) must grow with t, or the map lies about order.
        let luma = |[r, g, b]: [u8; 3]| 0.299 * r as f32 + 0.587 * g as f32 + 0.114 * b as f32;
        let samples: Vec<f32> = (0..=100).map(|i| luma(viridis(i as f32 / 100.0))).collect();
        assert!(samples.windows(2).all(|w| w[1] >= w[0] - 0.5), "{samples:?}");
    }
}

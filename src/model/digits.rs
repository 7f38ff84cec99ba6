//! How many digits of the page's numbers the f16 weights support, and those numbers as text.
//! `tests/minilm_f16.rs` measures the bounds against the float32 checkpoint.

/// How far the page's f16 weights may move the cosine of a pruned sentence embedding to the
/// full one from the float32 checkpoint's, at most: [`COSINE_ABS_ERROR`] absolutely, and
/// [`COSINE_DRIFT_ERROR`] of the drift `1 - cosine` (measured with headroom: 2.2e-4 and 1.2e-3
/// over the fixture's sentences and masks from one head to 66 pruned).
pub const COSINE_ABS_ERROR: f64 = 3e-4;
/// See [`COSINE_ABS_ERROR`].
pub const COSINE_DRIFT_ERROR: f64 = 2e-3;

/// How far the f16 weights may move the meaning check's margin (a difference of two cosines
/// between different sentences) from the float32 checkpoint's: 2.4e-4 measured over the masks
/// tried.
pub const MARGIN_ERROR: f64 = 3e-4;

/// Decimals whose last one is still above `error` (three to six).
fn decimals_above(error: f64) -> usize {
    if error > 0.0 {
        (-error.log10()).floor().clamp(3.0, 6.0) as usize
    } else {
        6
    }
}

/// A cosine of a pruned embedding to the full one, with the decimals the f16 weights support:
/// the last one shown is above the error bound of [`COSINE_ABS_ERROR`], so a large drift shows
/// three decimals and a tiny one up to six (a small drift is known to a fixed share of itself).
pub fn cosine_text(c: f64) -> String {
    let decimals = decimals_above(COSINE_ABS_ERROR.min(COSINE_DRIFT_ERROR * (1.0 - c).abs()));
    format!("{c:.decimals$}")
}

/// The meaning check's margin, or a change of it, with the decimals the f16 weights support
/// ([`MARGIN_ERROR`]); one more where those would round it to zero, so that a small margin's
/// sign shows ("-0.0004", not "-0.000", for a head that flips the check by just over the error).
pub fn margin_text(m: f64) -> String {
    let decimals = decimals_above(MARGIN_ERROR);
    let decimals =
        if m != 0.0 && m.abs() < 0.5 * 10f64.powi(-(decimals as i32)) { decimals + 1 } else { decimals };
    format!("{m:.decimals$}")
}

/// A task quality (Spearman's correlation): three decimals, as the f16 weights move it by about
/// 2e-4.
pub fn quality_text(q: f64) -> String {
    format!("{q:.3}")
}

/// A size in bytes in the largest unit it reaches ("1.4 GB", "85 MB", "12 KB"; units of 1024).
pub fn bytes_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.0} MB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.0} KB", b as f64 / 1024.0),
    }
}

/// Two sizes in bytes, before and after ("85.3 -> 80.1 MiB"), in the unit of the larger: KiB
/// below a MiB, so a small model's weights do not read "0.0 -> 0.0 MiB".
pub fn bytes_change_text(before: u64, after: u64) -> String {
    let (unit, name) = match before.max(after) {
        b if b >= 1 << 30 => ((1u64 << 30) as f64, "GiB"),
        b if b >= 1 << 20 => ((1u64 << 20) as f64, "MiB"),
        _ => (1024.0, "KiB"),
    };
    format!("{:.1} -> {:.1} {name}", before as f64 / unit, after as f64 / unit)
}

/// A relative change `share` (0.01 is one per cent) as a signed percentage: two decimals, up to
/// two more where two would round a change that is not zero to "-0.00" or "+0.00", so its
/// sign shows ("-0.003", not "-0.00"); a change too small even for four decimals reads "0.00".
pub fn signed_percent_text(share: f64) -> String {
    let pct = 100.0 * share;
    let shows = |decimals: i32| pct.abs() >= 0.5 * 10f64.powi(-decimals);
    match (2..=4).find(|&d| shows(d)) {
        Some(d) => format!("{pct:+.prec$}", prec = d as usize),
        None if pct.is_nan() => "NaN".into(),
        None => "0.00".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_change_in_per_cent_keeps_its_sign_and_never_reads_minus_zero() {
        use super::signed_percent_text as t;
        assert_eq!((t(0.0123), t(-0.0123)), ("+1.23".into(), "-1.23".into()));
        // Two decimals would show "-0.00" and "+0.00": one and two more.
        assert_eq!((t(-3.1e-5), t(2e-6)), ("-0.003".into(), "+0.0002".into()));
        assert_eq!((t(0.0), t(-0.0), t(1e-9)), ("0.00".into(), "0.00".into(), "0.00".into()));
        assert_eq!((t(0.5), t(f64::NAN)), ("+50.00".into(), "NaN".into()));
    }

    #[test]
    fn sizes_change_in_the_unit_of_the_larger() {
        assert_eq!(super::bytes_change_text(89_456_640, 83_886_080), "85.3 -> 80.0 MiB");
        assert_eq!(super::bytes_change_text(47_104, 35_328), "46.0 -> 34.5 KiB");
        assert_eq!(super::bytes_change_text(3 << 30, 1 << 29), "3.0 -> 0.5 GiB");
        assert_eq!(super::bytes_change_text(0, 0), "0.0 -> 0.0 KiB");
    }

    use super::*;

    #[test]
    fn a_cosine_shows_the_decimals_the_f16_weights_support() {
        // 1 - cosine 0.43: the error bound is 3e-4, three decimals.
        assert_eq!(cosine_text(0.571_278), "0.571");
        // 1 - cosine 0.1: 2e-4, still three.
        assert_eq!(cosine_text(0.894_423), "0.894");
        // 1 - cosine 0.003: 6e-6, five.
        assert_eq!(cosine_text(0.996_943_5), "0.99694");
        // 1 - cosine 3e-5: 6e-8, capped at six; nothing pruned is exactly one.
        assert_eq!(cosine_text(0.999_970_12), "0.999970");
        assert_eq!(cosine_text(1.0), "1.000000");
        assert_eq!(cosine_text(-0.25), "-0.250");
        // A margin's error is 3e-4 whatever its size: three decimals.
        assert_eq!((margin_text(0.022_814), margin_text(-0.004_23)), ("0.023".into(), "-0.004".into()));
        // Three decimals would show both as "-0.000": a flip by just over the error, and one
        // within it (too close to call), each with its sign.
        assert_eq!((margin_text(-4.1e-4), margin_text(-1.6e-4)), ("-0.0004".into(), "-0.0002".into()));
        assert_eq!((margin_text(0.0), margin_text(5e-4)), ("0.000".into(), "0.001".into()));
        assert_eq!(quality_text(0.81349), "0.813");
    }
}

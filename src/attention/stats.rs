//! Summary statistics shared by the page, the analyses and the benchmarks.

/// The median of `values` (the mean of the two middle values for an even count); `None` when
/// there are none. NaNs sort last, as `f64::total_cmp` orders them.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some(0.5 * (v[n / 2 - 1] + v[n / 2])),
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians_of_odd_even_and_empty_lists() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}

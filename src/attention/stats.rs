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

/// Ranks from 1, ties given the mean of the ranks they span (as `scipy.stats.rankdata`).
pub fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let mean = (i + j) as f64 / 2.0 + 1.0;
        order[i..=j].iter().for_each(|&k| ranks[k] = mean);
        i = j + 1;
    }
    ranks
}

/// Pearson's correlation of `a` and `b` (the same length); `None` when either is constant or
/// there are fewer than two values.
pub fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    assert_eq!(a.len(), b.len(), "paired values");
    let n = a.len() as f64;
    if a.len() < 2 {
        return None;
    }
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        ab += (x - ma) * (y - mb);
        aa += (x - ma) * (x - ma);
        bb += (y - mb) * (y - mb);
    }
    (aa > 0.0 && bb > 0.0).then(|| ab / (aa * bb).sqrt())
}

/// Spearman's rank correlation: Pearson's on the ranks (ties averaged), as
/// `scipy.stats.spearmanr` computes it.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    pearson(&ranks(a), &ranks(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_empty_lists() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn ranks_average_ties() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0, 20.0]), vec![1.0, 4.0, 2.5, 2.5]);
        assert_eq!(ranks(&[]), Vec::<f64>::new());
    }

    #[test]
    fn rank_correlation_follows_order_not_scale() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(spearman(&a, &[1.0, 8.0, 27.0, 64.0, 125.0]), Some(1.0));
        assert_eq!(spearman(&a, &[5.0, 4.0, 3.0, 2.0, 1.0]), Some(-1.0));
        // scipy.stats.spearmanr([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]).statistic = 0.8
        assert!((spearman(&a, &[2.0, 1.0, 4.0, 3.0, 5.0]).unwrap() - 0.8).abs() < 1e-12);
        // With ties: scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]).statistic = 0.9486832980505138
        let tied = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]).unwrap();
        assert!((tied - 0.9486832980505138).abs() < 1e-12, "{tied}");
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(pearson(&[1.0], &[2.0]), None);
    }
}

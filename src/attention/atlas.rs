//! The head atlas: how alike every two heads' attention patterns are over a corpus, the heads
//! ordered and grouped by a hierarchical clustering, and each head's nearest others.
//!
//! Two heads are compared row by row on the same sentences: for every query token `i` of every
//! sentence, the Jensen-Shannon divergence (base 2, so in `[0, 1]`) between head `a`'s weights
//! `A_a[i, :]` and head `b`'s `A_b[i, :]`, averaged over all rows:
//!
//! ```text
//! JS(p, q) = H((p + q) / 2) - (H(p) + H(q)) / 2,    H(p) = -sum_j p_j log2 p_j
//! D(a, b)  = mean over sentences and rows i of JS(A_a[i, :], A_b[i, :])
//! ```
//!
//! `D(a, a) = 0`, `D` is symmetric, and `sqrt(D)` is a metric. The clustering is average
//! linkage (UPGMA) on `D`: the two clusters with the smallest mean distance between their
//! members merge, until one is left; its leaf order puts alike heads side by side.

/// Sums of row divergences between every two heads, sentence by sentence, as a piece of work
/// accumulates them and the page adds pieces up.
#[derive(Clone, Debug, PartialEq)]
pub struct PatternSums {
    heads: usize,
    /// Per pair `a < b` (row-major over the upper triangle), the sum of row divergences.
    sums: Vec<f64>,
    /// Rows compared.
    rows: u64,
}

/// Entropy in bits of a row of weights (zeros add nothing).
fn entropy(row: &[f32]) -> f64 {
    row.iter().filter(|&&x| x > 0.0).map(|&x| -(x as f64) * (x as f64).log2()).sum()
}

/// The Jensen-Shannon divergence of two rows of weights, in bits (`[0, 1]` for distributions),
/// given their entropies.
fn js(p: &[f32], q: &[f32], hp: f64, hq: f64) -> f64 {
    let mut hm = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        let m = 0.5 * (a as f64 + b as f64);
        if m > 0.0 {
            hm -= m * m.log2();
        }
    }
    // Rounding can take a divergence of identical rows a hair below zero.
    (hm - 0.5 * (hp + hq)).max(0.0)
}

impl PatternSums {
    /// Sums for `heads` heads (every head of a model), nothing seen yet.
    pub fn new(heads: usize) -> PatternSums {
        PatternSums { heads, sums: vec![0.0; heads * heads.saturating_sub(1) / 2], rows: 0 }
    }

    /// Index of pair `a < b` in `sums`.
    fn pair(&self, a: usize, b: usize) -> usize {
        a * self.heads - a * (a + 1) / 2 + (b - a - 1)
    }

    /// Adds one sentence of `n` tokens: `layers[l]` is layer `l`'s `heads_per_layer x n x n`
    /// weights, the model's heads numbered `l * heads_per_layer + h`.
    pub fn add<L: AsRef<Vec<f32>>>(&mut self, layers: &[L], n: usize) {
        let per_layer = self.heads / layers.len().max(1);
        let row = |h: usize, i: usize| {
            let (l, k) = (h / per_layer, h % per_layer);
            &layers[l].as_ref()[(k * n + i) * n..(k * n + i + 1) * n]
        };
        for i in 0..n {
            let h: Vec<f64> = (0..self.heads).map(|a| entropy(row(a, i))).collect();
            for a in 0..self.heads {
                for b in a + 1..self.heads {
                    let at = self.pair(a, b);
                    self.sums[at] += js(row(a, i), row(b, i), h[a], h[b]);
                }
            }
        }
        self.rows += n as u64;
    }

    /// What has been summed, as numbers (the pairs' sums, then the rows): a piece of work sums
    /// its sentences elsewhere and sends these.
    pub fn to_sums(&self) -> Vec<f64> {
        let mut out = self.sums.clone();
        out.push(self.rows as f64);
        out
    }

    /// Length of [`PatternSums::to_sums`] for `heads` heads.
    pub fn sums_len(heads: usize) -> usize {
        heads * heads.saturating_sub(1) / 2 + 1
    }

    /// Adds sums made elsewhere ([`PatternSums::to_sums`] for as many heads). Adding pieces in a
    /// fixed order gives the same bits wherever each was summed.
    pub fn absorb(&mut self, sums: &[f64]) {
        assert_eq!(sums.len(), Self::sums_len(self.heads), "sums for another number of heads");
        self.sums.iter_mut().zip(sums).for_each(|(s, v)| *s += v);
        self.rows += sums[sums.len() - 1] as u64;
    }

    /// Rows compared so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The mean divergence of every two heads.
    pub fn distances(&self) -> Distances {
        let n = self.heads;
        let mut d = vec![0.0; n * n];
        let rows = self.rows.max(1) as f64;
        for a in 0..n {
            for b in a + 1..n {
                let v = self.sums[self.pair(a, b)] / rows;
                d[a * n + b] = v;
                d[b * n + a] = v;
            }
        }
        Distances { heads: n, d }
    }
}

/// The mean divergence of every two heads' patterns: symmetric, zero on the diagonal.
#[derive(Clone, Debug, PartialEq)]
pub struct Distances {
    heads: usize,
    /// `heads x heads`, row-major.
    d: Vec<f64>,
}

impl Distances {
    /// A matrix from its rows (`heads x heads`, row-major): for tests and constructed cases.
    pub fn from_rows(heads: usize, d: Vec<f64>) -> Distances {
        assert_eq!(d.len(), heads * heads, "a square matrix");
        Distances { heads, d }
    }

    /// Number of heads.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The divergence of heads `a` and `b`.
    pub fn get(&self, a: usize, b: usize) -> f64 {
        self.d[a * self.heads + b]
    }

    /// The `k` heads nearest to `h` (itself left out), nearest first (ties by number).
    pub fn nearest(&self, h: usize, k: usize) -> Vec<usize> {
        let mut others: Vec<usize> = (0..self.heads).filter(|&o| o != h).collect();
        others.sort_by(|&a, &b| self.get(h, a).total_cmp(&self.get(h, b)).then(a.cmp(&b)));
        others.truncate(k);
        others
    }

    /// Average-linkage clustering of the heads.
    pub fn cluster(&self) -> Dendrogram {
        let n = self.heads;
        // Active clusters: (members, id); distances between clusters as mean member distance.
        let mut clusters: Vec<(Vec<usize>, usize)> = (0..n).map(|h| (vec![h], h)).collect();
        let mut between: Vec<Vec<f64>> = (0..n).map(|a| (0..n).map(|b| self.get(a, b)).collect()).collect();
        let mut merges = Vec::with_capacity(n.saturating_sub(1));
        while clusters.len() > 1 {
            let (mut best, mut at) = (f64::INFINITY, (0, 1));
            for (i, row) in between.iter().enumerate() {
                for (j, &v) in row.iter().enumerate().skip(i + 1) {
                    if v < best {
                        (best, at) = (v, (i, j));
                    }
                }
            }
            let (i, j) = at;
            let (si, sj) = (clusters[i].0.len() as f64, clusters[j].0.len() as f64);
            // The merged cluster's mean distance to each other one, weighted by size (UPGMA).
            let merged: Vec<f64> =
                between[i].iter().zip(&between[j]).map(|(a, b)| (si * a + sj * b) / (si + sj)).collect();
            for (k, v) in merged.into_iter().enumerate() {
                between[i][k] = v;
                between[k][i] = v;
            }
            between[i][i] = 0.0;
            let (members, id) = clusters.remove(j);
            between.remove(j);
            between.iter_mut().for_each(|row| {
                row.remove(j);
            });
            merges.push(Merge { a: clusters[i].1, b: id, height: best });
            clusters[i].0.extend(members);
            clusters[i].1 = n + merges.len() - 1;
        }
        let order = clusters.pop().map(|c| c.0).unwrap_or_default();
        Dendrogram { heads: n, merges, order }
    }
}

/// The atlas of a model's heads: their patterns' distances, clustered.
#[derive(Clone, Debug, PartialEq)]
pub struct Atlas {
    /// Every two heads' mean row divergence.
    pub distances: Distances,
    /// Their average-linkage clustering.
    pub tree: Dendrogram,
    /// Rows (query tokens over all sentences) the distances average.
    pub rows: u64,
}

impl Atlas {
    /// The atlas of what `sums` has summed.
    pub fn from_sums(sums: &PatternSums) -> Atlas {
        let distances = sums.distances();
        let tree = distances.cluster();
        Atlas { distances, tree, rows: sums.rows() }
    }
}

/// One merge of two clusters: ids below the head count are heads, `heads + k` the cluster
/// merge `k` made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Merge {
    /// One cluster merged.
    pub a: usize,
    /// The other.
    pub b: usize,
    /// Their mean divergence when merged (never below an earlier merge's for average linkage).
    pub height: f64,
}

/// A hierarchical clustering of the heads.
#[derive(Clone, Debug, PartialEq)]
pub struct Dendrogram {
    heads: usize,
    /// The merges, lowest first.
    pub merges: Vec<Merge>,
    /// Every head once, alike heads side by side (the clusters' members in merge order).
    pub order: Vec<usize>,
}

impl Dendrogram {
    /// Each head's cluster when the tree is cut into `k` clusters (the last `k - 1` merges
    /// undone), numbered `0..k` by where they first appear in [`Dendrogram::order`].
    pub fn clusters(&self, k: usize) -> Vec<usize> {
        let k = k.clamp(1, self.heads.max(1));
        let mut parent: Vec<usize> = (0..self.heads + self.merges.len()).collect();
        for (m, merge) in self.merges.iter().take(self.heads - k).enumerate() {
            parent[merge.a] = self.heads + m;
            parent[merge.b] = self.heads + m;
        }
        let root = |mut x: usize| {
            while parent[x] != x {
                x = parent[x];
            }
            x
        };
        let mut label = vec![usize::MAX; self.heads + self.merges.len()];
        let mut next = 0;
        let mut out = vec![0; self.heads];
        for &h in &self.order {
            let r = root(h);
            if label[r] == usize::MAX {
                label[r] = next;
                next += 1;
            }
            out[h] = label[r];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One layer of `heads` heads on `n` tokens, each head's map from `pattern(h, i)`, a row.
    fn maps(heads: usize, n: usize, pattern: impl Fn(usize, usize) -> Vec<f32>) -> Vec<f32> {
        (0..heads).flat_map(|h| (0..n).flat_map(|i| pattern(h, i)).collect::<Vec<_>>()).collect()
    }

    fn one_hot(n: usize, j: usize) -> Vec<f32> {
        (0..n).map(|k| if k == j { 1.0 } else { 0.0 }).collect()
    }

    #[test]
    fn a_head_is_zero_from_itself_and_the_matrix_is_symmetric() {
        let n = 5;
        let layer = maps(3, n, |h, i| {
            let raw: Vec<f32> = (0..n).map(|j| 1.0 + ((h * 7 + i * 3 + j * 5) % 11) as f32).collect();
            let s: f32 = raw.iter().sum();
            raw.iter().map(|x| x / s).collect()
        });
        let mut sums = PatternSums::new(6);
        sums.add(&[layer.clone(), layer.clone()], n);
        let d = sums.distances();
        for a in 0..6 {
            assert_eq!(d.get(a, a), 0.0);
            for b in 0..6 {
                assert_eq!(d.get(a, b), d.get(b, a));
                assert!((0.0..=1.0).contains(&d.get(a, b)));
            }
        }
        // Head h of layer 1 is head h of layer 2 here: the same pattern.
        for h in 0..3 {
            assert!(d.get(h, h + 3) < 1e-12, "{}", d.get(h, h + 3));
        }
        assert!(d.get(0, 1) > 0.0);
    }

    #[test]
    fn disjoint_rows_are_one_bit_apart_and_the_divergence_matches_a_direct_sum() {
        let n = 4;
        // Head 0 looks at the previous token, head 1 at the next, head 2 half and half.
        let layer = maps(3, n, |h, i| match h {
            0 => one_hot(n, i.saturating_sub(1)),
            1 => one_hot(n, (i + 1).min(n - 1)),
            _ => one_hot(n, i.saturating_sub(1))
                .iter()
                .zip(one_hot(n, (i + 1).min(n - 1)))
                .map(|(a, b)| 0.5 * (a + b))
                .collect(),
        });
        let mut sums = PatternSums::new(3);
        sums.add(&[layer], n);
        let d = sums.distances();
        // Previous and next never meet, even where the ends clamp: one bit in every row.
        assert!((d.get(0, 1) - 1.0).abs() < 1e-12, "{}", d.get(0, 1));
        // A one-hot row against the half mixture of it and another: H(3/4, 1/4) - 1/2 bits.
        let h = |p: f64| -p * p.log2() - (1.0 - p) * (1.0 - p).log2();
        let want = h(0.25) - 0.5;
        assert!((d.get(0, 2) - want).abs() < 1e-12, "{} vs {want}", d.get(0, 2));
    }

    #[test]
    fn pieces_add_up_to_the_whole_and_survive_as_numbers() {
        let n = 3;
        let a = maps(2, n, |h, i| one_hot(n, (h + i) % n));
        let b = maps(2, n, |h, i| one_hot(n, (2 * h + i) % n));
        let mut whole = PatternSums::new(2);
        whole.add(std::slice::from_ref(&a), n);
        whole.add(std::slice::from_ref(&b), n);
        let (mut one, mut two) = (PatternSums::new(2), PatternSums::new(2));
        one.add(&[a], n);
        two.add(&[b], n);
        let mut joined = PatternSums::new(2);
        joined.absorb(&one.to_sums());
        joined.absorb(&two.to_sums());
        assert_eq!(joined, whole);
        assert_eq!(whole.rows(), 6);
        assert_eq!(PatternSums::sums_len(2), whole.to_sums().len());
    }

    #[test]
    fn clustering_constructed_patterns_recovers_the_construction() {
        // Twelve heads in three families (previous token, first token, uniform), each head a
        // little off its family's pattern: the cut into three clusters is the families.
        let n = 6;
        let family = |h: usize| h % 3;
        let layer = maps(12, n, |h, i| {
            let base = match family(h) {
                0 => one_hot(n, i.saturating_sub(1)),
                1 => one_hot(n, 0),
                _ => vec![1.0 / n as f32; n],
            };
            let eps = 0.02 + 0.01 * (h / 3) as f32;
            base.iter().map(|x| (1.0 - eps) * x + eps / n as f32).collect()
        });
        let mut sums = PatternSums::new(12);
        sums.add(&[layer], n);
        let d = sums.distances();
        let tree = d.cluster();
        assert_eq!(tree.merges.len(), 11);
        assert!(tree.merges.windows(2).all(|w| w[0].height <= w[1].height + 1e-12), "{:?}", tree.merges);
        let mut order = tree.order.clone();
        order.sort_unstable();
        assert_eq!(order, (0..12).collect::<Vec<_>>());
        let labels = tree.clusters(3);
        for a in 0..12 {
            for b in 0..12 {
                assert_eq!(labels[a] == labels[b], family(a) == family(b), "heads {a} and {b}: {labels:?}");
            }
        }
        // A family's members are side by side in the order.
        let runs = tree.order.windows(2).filter(|w| labels[w[0]] != labels[w[1]]).count();
        assert_eq!(runs, 2, "{:?}", tree.order);
        assert_eq!(tree.clusters(1), vec![0; 12]);
        let each: std::collections::BTreeSet<usize> = tree.clusters(12).into_iter().collect();
        assert_eq!(each.len(), 12);
        // The nearest heads of a previous-token head are its family's.
        assert!(d.nearest(0, 3).iter().all(|&o| family(o) == 0), "{:?}", d.nearest(0, 3));
    }

    #[test]
    fn average_linkage_merges_by_mean_distance() {
        // Points on a line at 0, 1, 5, 6 (distances as |x - y|): {0,1} and {5,6} first, then
        // the two pairs at the mean of their cross distances, 5.
        let x = [0.0f64, 1.0, 5.0, 6.0];
        let d = Distances::from_rows(4, (0..16).map(|k| (x[k / 4] - x[k % 4]).abs()).collect());
        let tree = d.cluster();
        assert_eq!(tree.merges.iter().map(|m| m.height).collect::<Vec<_>>(), vec![1.0, 1.0, 5.0]);
        assert_eq!(tree.clusters(2), vec![0, 0, 1, 1]);
    }
}

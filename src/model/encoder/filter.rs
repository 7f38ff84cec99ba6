//! Which heads the grid shows: all of them, or those with a role, those the chosen measure finds
//! most important, or one cluster of the head atlas.

use crate::attention::importance::Ranking;
use crate::model::encoder::roles::Role;
use crate::model::spec::ModelSpec;

/// How many heads "the most important" filter shows.
pub const MOST_IMPORTANT: usize = 10;

/// A filter of the heads' grid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HeadFilter {
    /// Every head.
    #[default]
    All,
    /// The heads with this role (measured over the task's sentences).
    Role(Role),
    /// The [`MOST_IMPORTANT`] heads by the chosen importance measure.
    Important,
    /// The heads of one cluster of the head atlas (numbered from 0 in the atlas's order).
    Cluster(usize),
}

/// What a filter is applied to: what has been measured so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Known<'a> {
    /// Every head's role.
    pub roles: Option<&'a [Role]>,
    /// Every head's importance by the chosen measure.
    pub ranking: Option<&'a Ranking>,
    /// Every head's cluster in the atlas.
    pub clusters: Option<&'a [usize]>,
}

impl HeadFilter {
    /// The filters a reader can choose with `clusters` clusters in the atlas (none before it is
    /// computed): all, each role but none, the most important, each cluster.
    pub fn choices(clusters: usize) -> Vec<HeadFilter> {
        let roles = Role::ALL.into_iter().filter(|r| *r != Role::None).map(HeadFilter::Role);
        let mut out = vec![HeadFilter::All];
        out.extend(roles);
        out.push(HeadFilter::Important);
        out.extend((0..clusters).map(HeadFilter::Cluster));
        out
    }

    /// The filter's value in the page's control ("all", "role-prev", "important", "cluster-2").
    pub fn as_value(self) -> String {
        match self {
            HeadFilter::All => "all".into(),
            HeadFilter::Role(r) => format!("role-{}", if r == Role::None { "none" } else { r.short() }),
            HeadFilter::Important => "important".into(),
            HeadFilter::Cluster(c) => format!("cluster-{c}"),
        }
    }

    /// The filter of the control's `value` ([`HeadFilter::as_value`]).
    pub fn parse(value: &str) -> Option<HeadFilter> {
        if let Some(c) = value.strip_prefix("cluster-") {
            return c.parse().ok().map(HeadFilter::Cluster);
        }
        let role = |v: &str| Role::ALL.into_iter().find(|r| HeadFilter::Role(*r).as_value() == v);
        match value {
            "all" => Some(HeadFilter::All),
            "important" => Some(HeadFilter::Important),
            v => role(v).map(HeadFilter::Role),
        }
    }

    /// What the control says.
    pub fn label(self) -> String {
        match self {
            HeadFilter::All => "every head".into(),
            HeadFilter::Role(r) => format!("{} heads", r.name()),
            HeadFilter::Important => format!("the {MOST_IMPORTANT} most important by the chosen measure"),
            HeadFilter::Cluster(c) => format!("cluster {} of the atlas", c + 1),
        }
    }

    /// Whether head `h` is shown; `None` while what the filter needs is not measured yet.
    pub fn shows(self, h: usize, known: Known<'_>) -> Option<bool> {
        match self {
            HeadFilter::All => Some(true),
            HeadFilter::Role(r) => known.roles.and_then(|roles| roles.get(h)).map(|&role| role == r),
            HeadFilter::Important => {
                // Rank 1 is the most important.
                Some(known.ranking?.rank(h)? <= MOST_IMPORTANT)
            }
            HeadFilter::Cluster(c) => known.clusters.and_then(|cl| cl.get(h)).map(|&of| of == c),
        }
    }

    /// How many of `total` heads are shown, when known.
    pub fn count(self, total: usize, known: Known<'_>) -> Option<usize> {
        (0..total).map(|h| self.shows(h, known)).try_fold(0, |n, s| s.map(|s| n + usize::from(s)))
    }
}

/// A line per cluster of the head atlas (`clusters[h]` is head `h`'s, from 0): how many heads,
/// which layers, and the most common role among them when the roles are known.
pub fn cluster_lines(clusters: &[usize], roles: Option<&[Role]>, spec: &ModelSpec) -> Vec<String> {
    let count = clusters.iter().max().map_or(0, |m| m + 1);
    (0..count)
        .map(|c| {
            let heads: Vec<usize> = (0..clusters.len()).filter(|&h| clusters[h] == c).collect();
            let layers: Vec<usize> = heads.iter().map(|&h| spec.layer_of(h) + 1).collect();
            let (lo, hi) =
                (layers.iter().min().copied().unwrap_or(0), layers.iter().max().copied().unwrap_or(0));
            let span = if lo == hi { format!("layer {lo}") } else { format!("layers {lo}-{hi}") };
            let role = roles.and_then(|roles| {
                let of = |r: Role| heads.iter().filter(|&&h| roles.get(h) == Some(&r)).count();
                let best = Role::ALL
                    .into_iter()
                    .filter(|&r| r != Role::None)
                    .max_by_key(|&r| (of(r), std::cmp::Reverse(r as u8)))?;
                (of(best) > 0).then(|| format!("; {} {}", of(best), best.name()))
            });
            let plural = if heads.len() == 1 { "head" } else { "heads" };
            format!("Cluster {}: {} {plural}, {span}{}.", c + 1, heads.len(), role.unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cluster_says_its_size_layers_and_most_common_role() {
        let spec = ModelSpec { layers: 2, heads: 3, d_model: 6, ..ModelSpec::MINILM_L6_V2 };
        let clusters = [0, 0, 1, 0, 2, 1];
        let roles =
            [Role::PreviousToken, Role::PreviousToken, Role::Broad, Role::None, Role::ToCls, Role::Broad];
        assert_eq!(
            cluster_lines(&clusters, Some(&roles), &spec),
            vec![
                "Cluster 1: 3 heads, layers 1-2; 2 previous-token.",
                "Cluster 2: 2 heads, layers 1-2; 2 broad.",
                "Cluster 3: 1 head, layer 2; 1 to-[CLS].",
            ]
        );
        assert_eq!(cluster_lines(&[0, 0], None, &spec), vec!["Cluster 1: 2 heads, layer 1."]);
        let none = [Role::None; 6];
        assert_eq!(cluster_lines(&[0; 6], Some(&none), &spec), vec!["Cluster 1: 6 heads, layers 1-2."]);
    }

    #[test]
    fn every_choice_survives_the_control_and_unknown_values_are_refused() {
        for f in HeadFilter::choices(4) {
            assert_eq!(HeadFilter::parse(&f.as_value()), Some(f), "{f:?}");
        }
        assert_eq!(HeadFilter::choices(0).len(), 1 + 6 + 1);
        assert_eq!(HeadFilter::parse("role-prev"), Some(HeadFilter::Role(Role::PreviousToken)));
        for bad in ["", "cluster-", "cluster-x", "role-", "role-nope", "ALL"] {
            assert_eq!(HeadFilter::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_filter_shows_its_heads_once_what_it_needs_is_measured() {
        let roles = [Role::PreviousToken, Role::Broad, Role::PreviousToken, Role::None];
        let ranking = Ranking::new(vec![0.1, 0.4, 0.2, 0.3]);
        let clusters = [1, 0, 1, 0];
        let known = Known { roles: Some(&roles), ranking: Some(&ranking), clusters: Some(&clusters) };
        let shown = |f: HeadFilter| (0..4).filter(|&h| f.shows(h, known) == Some(true)).collect::<Vec<_>>();
        assert_eq!(shown(HeadFilter::All), vec![0, 1, 2, 3]);
        assert_eq!(shown(HeadFilter::Role(Role::PreviousToken)), vec![0, 2]);
        assert_eq!(shown(HeadFilter::Cluster(1)), vec![0, 2]);
        // Ten most important of four: all of them; of 12, the 10 largest.
        assert_eq!(shown(HeadFilter::Important), vec![0, 1, 2, 3]);
        let twelve = Ranking::new((0..12).map(|h| h as f64).collect());
        let top = Known { ranking: Some(&twelve), ..Known::default() };
        let picked: Vec<usize> =
            (0..12).filter(|&h| HeadFilter::Important.shows(h, top) == Some(true)).collect();
        assert_eq!(picked, (2..12).collect::<Vec<_>>());
        assert_eq!(HeadFilter::Important.count(12, top), Some(10));
        // Before the roles or the atlas are in, the filter cannot say.
        assert_eq!(HeadFilter::Role(Role::Broad).shows(0, Known::default()), None);
        assert_eq!(HeadFilter::Cluster(0).count(4, Known::default()), None);
        assert_eq!(HeadFilter::All.count(4, Known::default()), Some(4));
    }
}

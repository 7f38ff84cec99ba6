//! What each head does, measured over many sentences: the roles Clark et al. (2019, "What does
//! BERT look at?") and Voita et al. (2019, "Analyzing multi-head self-attention") found in
//! trained models. For every head, over every token of every sentence, the mean attention a
//! query puts on:
//!
//! | role | attention on | labelled when |
//! |---|---|---|
//! | previous-token | the token before it | mean weight >= [`FOCUSED`] |
//! | next-token | the token after it | mean weight >= [`FOCUSED`] |
//! | self | itself | mean weight >= [`FOCUSED`] |
//! | to-[CLS] | the first token | mean weight >= [`FOCUSED`] |
//! | to-[SEP]/punctuation | the last token and punctuation | mean weight >= [`FOCUSED`] |
//! | broad | spread out | none of the above, mean row entropy >= [`BROAD`] of the uniform one |
//!
//! Otherwise the head has no role here. When two focused roles pass the threshold the larger
//! wins. Rows of `[CLS]` and `[SEP]` are left out (their neighbours are special tokens).

use std::sync::Arc;

use crate::model::spec::ModelSpec;

use crate::attention::summary::FOCUSED;

/// Mean row entropy, as a share of the uniform row's, above which a head is broad.
pub const BROAD: f64 = 0.8;

/// A head's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Attends to the previous token.
    PreviousToken,
    /// Attends to the next token.
    NextToken,
    /// Attends to itself.
    SelfToken,
    /// Attends to `[CLS]`.
    ToCls,
    /// Attends to `[SEP]` and punctuation.
    ToSepOrPunctuation,
    /// Spreads its attention out.
    Broad,
    /// None of these.
    None,
}

impl Role {
    /// The roles, in the order the page lists them.
    pub const ALL: [Role; 7] = [
        Role::PreviousToken,
        Role::NextToken,
        Role::SelfToken,
        Role::ToCls,
        Role::ToSepOrPunctuation,
        Role::Broad,
        Role::None,
    ];

    /// A short label for the head grid.
    pub fn short(self) -> &'static str {
        match self {
            Role::PreviousToken => "prev",
            Role::NextToken => "next",
            Role::SelfToken => "self",
            Role::ToCls => "CLS",
            Role::ToSepOrPunctuation => "SEP",
            Role::Broad => "broad",
            Role::None => "",
        }
    }

    /// Its name in a sentence.
    pub fn name(self) -> &'static str {
        match self {
            Role::PreviousToken => "previous-token",
            Role::NextToken => "next-token",
            Role::SelfToken => "self",
            Role::ToCls => "to-[CLS]",
            Role::ToSepOrPunctuation => "to-[SEP]/punctuation",
            Role::Broad => "broad",
            Role::None => "no role",
        }
    }

    /// Whether this is a specialised role (all but broad and none).
    pub fn specialised(self) -> bool {
        !matches!(self, Role::Broad | Role::None)
    }
}

/// Sums over the rows seen so far of one head's attention on each kind of token.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Mass {
    previous: f64,
    next: f64,
    own: f64,
    cls: f64,
    sep: f64,
    entropy_share: f64,
    rows: usize,
}

/// Accumulates attention maps, sentence by sentence, into every head's role.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleCounter {
    /// Heads per layer.
    heads: usize,
    mass: Vec<Mass>,
}

impl RoleCounter {
    /// A counter for the heads of a model of shape `spec`, nothing seen yet.
    pub fn new(spec: &ModelSpec) -> Self {
        RoleCounter { heads: spec.heads, mass: vec![Mass::default(); spec.total_heads()] }
    }

    /// Adds one sentence: `attention[l]` is layer `l`'s `heads x n x n` weights, and
    /// `punctuation[j]` whether token `j` is punctuation.
    pub fn add(&mut self, attention: &[Arc<Vec<f32>>], punctuation: &[bool]) {
        let n = punctuation.len();
        if n < 3 {
            return;
        }
        for (l, layer) in attention.iter().enumerate() {
            for h in 0..self.heads {
                let m = &mut self.mass[l * self.heads + h];
                let p = &layer[h * n * n..(h + 1) * n * n];
                for i in 1..n - 1 {
                    let row = &p[i * n..(i + 1) * n];
                    let w = |j: usize| row[j] as f64;
                    m.previous += w(i - 1);
                    m.next += w(i + 1);
                    m.own += w(i);
                    m.cls += w(0);
                    m.sep += (0..n).filter(|&j| j == n - 1 || (punctuation[j] && j != 0)).map(w).sum::<f64>();
                    let entropy: f64 =
                        row.iter().filter(|&&x| x > 0.0).map(|&x| -(x as f64) * (x as f64).ln()).sum();
                    m.entropy_share += entropy / (n as f64).ln();
                    m.rows += 1;
                }
            }
        }
    }

    /// Values per head in [`RoleCounter::to_sums`].
    const SUMS_PER_HEAD: usize = 7;

    /// Length of [`RoleCounter::to_sums`] for a model of shape `spec`.
    pub fn sums_len(spec: &ModelSpec) -> usize {
        spec.total_heads() * Self::SUMS_PER_HEAD
    }

    /// What has been counted, as numbers ([`RoleCounter::SUMS_PER_HEAD`] per head): a piece of
    /// work counts its sentences elsewhere and sends these.
    pub fn to_sums(&self) -> Vec<f64> {
        let each = |m: &Mass| [m.previous, m.next, m.own, m.cls, m.sep, m.entropy_share, m.rows as f64];
        self.mass.iter().flat_map(each).collect()
    }

    /// Adds counts made elsewhere ([`RoleCounter::to_sums`] of a counter for the same model).
    /// Adding pieces in a fixed order gives the same bits wherever each was counted.
    pub fn absorb(&mut self, sums: &[f64]) {
        assert_eq!(sums.len(), self.mass.len() * Self::SUMS_PER_HEAD, "sums of another model");
        for (m, s) in self.mass.iter_mut().zip(sums.chunks_exact(Self::SUMS_PER_HEAD)) {
            for (field, v) in
                [&mut m.previous, &mut m.next, &mut m.own, &mut m.cls, &mut m.sep, &mut m.entropy_share]
                    .into_iter()
                    .zip(s)
            {
                *field += v;
            }
            m.rows += s[6] as usize;
        }
    }

    /// Every head's role, `layer * heads + head`.
    pub fn roles(&self) -> Vec<Role> {
        self.mass.iter().map(role_of).collect()
    }
}

fn role_of(m: &Mass) -> Role {
    if m.rows == 0 {
        return Role::None;
    }
    let mean = |v: f64| v / m.rows as f64;
    let focused = [
        (Role::PreviousToken, mean(m.previous)),
        (Role::NextToken, mean(m.next)),
        (Role::SelfToken, mean(m.own)),
        (Role::ToCls, mean(m.cls)),
        (Role::ToSepOrPunctuation, mean(m.sep)),
    ];
    let (best, weight) = focused.into_iter().fold((Role::None, 0.0), |a, b| if b.1 > a.1 { b } else { a });
    match () {
        _ if weight >= FOCUSED => best,
        _ if mean(m.entropy_share) >= BROAD => Role::Broad,
        _ => Role::None,
    }
}

/// Whether a token piece is punctuation (every character is).
pub fn is_punctuation(piece: &str) -> bool {
    !piece.is_empty() && piece.chars().all(|c| c.is_ascii_punctuation() || unicode_punctuation(c))
}

fn unicode_punctuation(c: char) -> bool {
    matches!(c, '\u{2010}'..='\u{2027}' | '\u{3001}' | '\u{3002}')
}

/// Where the specialised heads fall in a pruning order: the mean position (from 0) of the
/// specialised heads and of the others, in `order` (least important first).
pub fn mean_positions(roles: &[Role], order: &[usize]) -> Option<(f64, f64)> {
    let (mut special, mut other) = (Vec::new(), Vec::new());
    for (pos, &h) in order.iter().enumerate() {
        if roles[h].specialised() { &mut special } else { &mut other }.push(pos as f64);
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    Some((mean(&special)?, mean(&other)?))
}

/// What the roles say, for the page: how many heads have each role over `sentences` sentences,
/// and, once the iterative pruning order has reached half the heads, whether it prunes the
/// specialised heads later than the others (as Voita et al. found).
pub fn roles_sentence(roles: &[Role], iterative_order: &[usize], sentences: usize) -> String {
    let total = roles.len();
    let count = |r: Role| roles.iter().filter(|x| **x == r).count();
    let tally: Vec<String> = Role::ALL
        .iter()
        .filter(|r| **r != Role::None && count(**r) > 0)
        .map(|r| format!("{} {}", count(*r), r.name()))
        .collect();
    let special = roles.iter().filter(|r| r.specialised()).count();
    let mut text = format!(
        "Roles over the first {sentences} sentences of the pairs: {}; {} with none of these.",
        tally.join(", "),
        count(Role::None)
    );
    // Heads the iterative order has not reached yet are pruned after all it has.
    let mut full_order = iterative_order.to_vec();
    full_order.extend((0..total).filter(|h| !iterative_order.contains(h)));
    if iterative_order.len() >= total / 2 {
        if let Some((s, o)) = mean_positions(roles, &full_order) {
            let verdict = if s > o { "later than" } else { "no later than" };
            text += &format!(
                " The iterative order prunes the {special} specialised heads {verdict} the others (mean position {:.0} against {:.0} of {total}), {} Voita et al.'s finding that specialised heads are the last to go.",
                s + 1.0,
                o + 1.0,
                if s > o { "as in" } else { "unlike" }
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: ModelSpec = ModelSpec::MINILM_L6_V2;

    /// One layer of `n x n` maps for every head, head `h`'s rows made by `row(h, i)`.
    fn layers(n: usize, row: impl Fn(usize, usize) -> Vec<f32>) -> Vec<Arc<Vec<f32>>> {
        (0..SPEC.layers)
            .map(|_| {
                Arc::new(
                    (0..SPEC.heads)
                        .flat_map(|h| (0..n).flat_map(|i| row(h, i)).collect::<Vec<_>>())
                        .collect(),
                )
            })
            .collect()
    }

    fn one_hot(n: usize, j: usize) -> Vec<f32> {
        (0..n).map(|k| if k == j { 1.0 } else { 0.0 }).collect()
    }

    #[test]
    fn heads_are_labelled_by_where_their_attention_goes() {
        let n = 6;
        let maps = layers(n, |h, i| match h {
            0 => one_hot(n, i.saturating_sub(1)),
            1 => one_hot(n, (i + 1).min(n - 1)),
            2 => one_hot(n, i),
            3 => one_hot(n, 0),
            4 => one_hot(n, n - 1),
            5 => vec![1.0 / n as f32; n],
            // Half on itself, half on the next: both reach the threshold, the first listed wins.
            6 => (0..n).map(|k| if k == i || k == (i + 1).min(n - 1) { 0.5 } else { 0.0 }).collect(),
            // A third each on three tokens: neither focused nor broad.
            _ => (0..n).map(|k| if k < 3 { 1.0 / 3.0 } else { 0.0 }).collect(),
        });
        let mut counter = RoleCounter::new(&SPEC);
        counter.add(&maps, &[false, false, false, true, false, false]);
        let roles = counter.roles();
        assert_eq!(
            roles[..8],
            [
                Role::PreviousToken,
                Role::NextToken,
                Role::SelfToken,
                Role::ToCls,
                Role::ToSepOrPunctuation,
                Role::Broad,
                Role::NextToken,
                Role::None
            ]
        );
        assert_eq!(roles[SPEC.heads + 4], Role::ToSepOrPunctuation);
        assert!(is_punctuation(".") && is_punctuation("?!") && !is_punctuation("a.") && !is_punctuation(""));
    }

    #[test]
    fn counts_made_in_pieces_add_up_to_the_counts_made_at_once() {
        let n = 5;
        let maps = layers(n, |h, i| one_hot(n, (i + h) % n));
        let punctuation = [false, true, false, false, false];
        let mut whole = RoleCounter::new(&SPEC);
        whole.add(&maps, &punctuation);
        whole.add(&maps, &punctuation);
        let mut piece = RoleCounter::new(&SPEC);
        piece.add(&maps, &punctuation);
        let mut merged = RoleCounter::new(&SPEC);
        merged.absorb(&piece.to_sums());
        merged.absorb(&piece.to_sums());
        assert_eq!(merged, whole);
        assert_eq!(whole.to_sums().len(), RoleCounter::sums_len(&SPEC));
    }

    #[test]
    fn specialised_heads_positions_in_an_order() {
        let mut roles = vec![Role::None; SPEC.total_heads()];
        roles[5] = Role::PreviousToken;
        roles[6] = Role::ToCls;
        let order: Vec<usize> = (0..SPEC.total_heads()).rev().collect(); // head 71 first ... head 0 last
        let (special, other) = mean_positions(&roles, &order).unwrap();
        assert_eq!(special, (66.0 + 65.0) / 2.0);
        assert!(special > other);
        assert_eq!(mean_positions(&[Role::None; 2], &[0, 1]), None);
    }

    #[test]
    fn the_roles_sentence_counts_and_compares_once_half_the_order_is_known() {
        let roles = [Role::PreviousToken, Role::None, Role::Broad, Role::None];
        assert_eq!(
            roles_sentence(&roles, &[1], 64),
            "Roles over the first 64 sentences of the pairs: 1 previous-token, 1 broad; 2 with none of these."
        );
        let late = roles_sentence(&roles, &[1, 3], 64);
        assert!(late.ends_with("specialised heads later than the others (mean position 3 against 2 of 4), as in Voita et al.'s finding that specialised heads are the last to go."), "{late}");
    }
}

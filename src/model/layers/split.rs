//! The steps of a pass cut across threads that share no memory, as both families cut it
//! (`crate::model::encoder::sharded`, `crate::model::decoder::sharded`): every layer is two steps,
//! its attention branch and its feed-forward branch; in each, every shard computes a partial
//! branch (its heads, its feed-forward units) from the same input, and the thread driving the
//! pass adds them up.

/// One step of a layer: what every shard computes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Layer `l`'s attention branch.
    Attention(usize),
    /// Layer `l`'s feed-forward branch.
    FeedForward(usize),
}

impl Step {
    /// The step as one number, for a message: `2 l` or `2 l + 1`.
    pub fn code(self) -> u32 {
        match self {
            Step::Attention(l) => 2 * l as u32,
            Step::FeedForward(l) => 2 * l as u32 + 1,
        }
    }

    /// The step a [`Step::code`] names in a model of `layers` layers; `None` past the last.
    pub fn from_code(code: u32, layers: usize) -> Option<Step> {
        let l = (code / 2) as usize;
        (l < layers).then_some(if code.is_multiple_of(2) { Step::Attention(l) } else { Step::FeedForward(l) })
    }

    /// The step after this one in a model of `layers` layers; `None` after the last layer's.
    pub fn next(self, layers: usize) -> Option<Step> {
        Step::from_code(self.code() + 1, layers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_count_through_every_layer_and_stop() {
        for layers in [1, 2, 6, 24] {
            let steps: Vec<Step> =
                std::iter::successors(Some(Step::Attention(0)), |s| s.next(layers)).collect();
            assert_eq!(steps.len(), 2 * layers);
            assert_eq!(steps[1], Step::FeedForward(0));
            assert_eq!(steps.last(), Some(&Step::FeedForward(layers - 1)));
            assert!(steps.iter().all(|s| Step::from_code(s.code(), layers) == Some(*s)));
            assert_eq!(Step::from_code(2 * layers as u32, layers), None);
        }
    }
}
